"""``LLMAlgorithm``: RLlib's sample -> learn -> sync-weights loop for group rollouts of LLM agents."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.callbacks.utils import make_callback
from ray.rllib.core import ALL_MODULES, COMPONENT_LEARNER, COMPONENT_OPTIMIZER, COMPONENT_RL_MODULE
from ray.rllib.env.env_runner_state_server import EnvRunnerStateServer
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
    WEIGHTS_SEQ_NO,
)

from rllib_llm.algorithms.async_rollouts import GroupQueue
from rllib_llm.algorithms.dynamic_sampling import is_informative
from rllib_llm.algorithms.rllib_internals import sample_with_env_runners
from rllib_llm.algorithms.sharding import NotEnoughGroupsError, learner_update_data
from rllib_llm.checkpoint_files import MsgpackCheckpointable, read_checkpoint_state, write_checkpoint
from rllib_llm.core.group_env_runner import component_requested
from rllib_llm.metrics import flat_stats, rollout_stats

logger = logging.getLogger(__name__)

#: Rollouts in a row without any episode after which training stops with an error.
MAX_EMPTY_SAMPLES = 3
#: Asynchronous rollouts: how long one poll for finished rollouts waits, the tag of the sample calls, and
#: the result key of the staleness metrics.
ASYNC_POLL_S = 0.05
ASYNC_SAMPLE_TAG = "async_sample"
ASYNC_RESULTS = "async_rollouts"
#: The result key of the periodic held-out evaluation (``evaluation(held_out_interval=N)``).
HELD_OUT_RESULTS = "held_out"
#: The Algorithm state's entry with each remote EnvRunner's own state (seed RNG, rollout counter), by index: RLlib
#: checkpoints only the local runner's, and a resumed run's remote runners would replay their first seeds and ids.
REMOTE_ENV_RUNNERS = "remote_env_runners"
#: How often the Algorithm asks RLlib whether a crashed remote EnvRunner is back (:meth:`LLMAlgorithm.await_env_runners`).
RESTORE_POLL_S = 1.0


def _sample_with_metrics(runner: Any, updates: int = 1) -> tuple[list, dict]:
    """One group rollout on a remote EnvRunner, ``updates`` Learner updates' worth of groups (``num_groups``
    each), with the metrics it logged (as IMPALA's ``sample_get_state_and_metrics``; the connectors here
    keep no state to merge)."""
    config = runner.config
    return runner.sample(num_episodes=updates * config.num_groups * config.group_size), runner.get_metrics()


class LLMAlgorithm(MsgpackCheckpointable, Algorithm):
    """One ``training_step``: every EnvRunner plays one group rollout, the LearnerGroup updates on the
    episodes (advantages come from the learner connector), and the new weights go to the EnvRunners."""

    #: The config class whose defaults make this algorithm (subclasses set it; None: plain LLMConfig).
    config_class: ClassVar[type | None] = None
    #: Rollouts in a row that returned no episode (see :meth:`_note_empty_sample`).
    _empty_samples = 0
    #: The episodes the last ``training_step`` trained on (after dynamic sampling's filter), for
    #: ``on_train_result`` callbacks such as :class:`~rllib_llm.run.trajectory_recorder.TrajectoryRecorder`.
    training_episodes: ClassVar[list] = []
    #: Learner updates so far: the policy version the last broadcast weights carry (RLlib's weights_seq_no).
    policy_version: int = 0
    #: The modules the last update trained (whose weights go to the EnvRunners).
    _trained_modules: set | None = None
    #: Asynchronous rollouts: the complete groups waiting for the Learner.
    _group_queue: GroupQueue | None = None
    #: Asynchronous rollouts: RLlib's ``EnvRunnerStateServer`` actor, holding the newest weights the EnvRunners
    #: pull at the start of each rollout (as IMPALA/APPO's with ``use_env_runner_state_server``).
    _state_server: Any = None

    @classmethod
    def get_default_config(cls):
        from rllib_llm.algorithms.config import LLMConfig

        return (cls.config_class or LLMConfig)(cls)

    def sample_episodes(self) -> list:
        """Episodes of one group rollout from every EnvRunner (override for dynamic sampling)."""
        self.await_env_runners()
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = sample_with_env_runners(self.env_runner_group)
        self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
        if episodes:
            self._empty_samples = 0
        else:
            self._note_empty_sample()
        return episodes

    def training_step(self) -> None:
        if self.config.async_rollouts:
            self._async_training_step()
        else:
            episodes = self.training_episodes = self.sample_episodes()
            # No episodes: dynamic sampling found no informative group, or sampling failed (see below).
            if episodes and self._update(episodes):
                self._broadcast_weights()
        self._evaluate_held_out_if_due()

    def _evaluate_held_out_if_due(self) -> None:
        """``evaluation(held_out_interval=N)``: every N-th iteration, greedy success on the held-out seeds
        (:meth:`evaluate_seeds`) goes into this iteration's results under ``held_out/`` (``held_out/success_rate``),
        so a Tune trial reports it and a sweep can select on it, not only on training success."""
        interval = self.config.held_out_interval
        if interval and (self.iteration + 1) % interval == 0:
            self.metrics.log_dict(self.evaluate_seeds(), key=HELD_OUT_RESULTS, window=1)

    def _update(self, episodes: list) -> bool:
        """One LearnerGroup update on ``episodes`` (whole groups sharded over the Learners); False when it
        was skipped."""
        try:
            data = learner_update_data(
                episodes, self.config.num_learners, self.config.minibatch_size, self.config.num_epochs
            )
        except NotEnoughGroupsError as e:  # dynamic sampling kept fewer groups than there are Learners
            logger.warning("Update skipped in iteration %d: %s", self.iteration + 1, e)
            return False
        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER)):
            learner_results = self.learner_group.update(
                **data,
                timesteps={
                    NUM_ENV_STEPS_SAMPLED_LIFETIME: self.metrics.peek(
                        (ENV_RUNNER_RESULTS, "num_env_steps_sampled_lifetime"), default=0
                    )
                },
                num_epochs=self.config.num_epochs,
                minibatch_size=self.config.minibatch_size,
                shuffle_batch_per_epoch=self.config.shuffle_batch_per_epoch,
            )
        self.metrics.aggregate(learner_results, key=LEARNER_RESULTS)
        self._trained_modules = set(learner_results[0].keys()) - {ALL_MODULES}
        self.policy_version += 1
        return True

    def _broadcast_weights(self) -> None:
        """The Learner's weights (tagged with its ``weights_seq_no``) to every EnvRunner. RLlib sends them
        with a fire-and-fetch call, so a remote runner busy with a rollout applies them right after it."""
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=self._trained_modules,
                inference_only=True,
            )

    # --- asynchronous rollouts (algorithms/async_rollouts.py) --------------------------------------------

    def _async_training_step(self) -> None:
        """Collect finished rollouts (every remote EnvRunner keeps one in flight) until one iteration's worth
        of fresh-enough groups is queued, update on them, and broadcast every ``broadcast_interval`` updates."""
        if self._group_queue is None:  # first step (also after a restore): the Learner's version is the truth
            if self.env_runner_group.num_remote_env_runners() == 0:
                raise ValueError(
                    "async_rollouts=True needs remote EnvRunners that sample while the Learner updates: set "
                    ".env_runners(num_env_runners=1) or more"
                )
            keep = is_informative if self.config.dynamic_sampling else None
            self._group_queue = GroupQueue(self.config.max_staleness, keep)
            self.policy_version = self._learner_weights_seq_no()
            self._push_weights()  # the Learner's weights now: also what a restore brought back
        queue = self._group_queue
        needed = self.config.num_groups * max(self.env_runner_group.num_healthy_remote_env_runners(), 1)
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            while True:
                queue.drop_stale(self.policy_version)
                if len(queue) >= needed:
                    break
                if not self._collect_rollouts(timeout_s=ASYNC_POLL_S):
                    return  # no runner can deliver: RLlib restores failed runners between iterations
        episodes, stats = queue.take(needed, self.policy_version)
        self.training_episodes = episodes
        self.metrics.log_dict(stats, key=ASYNC_RESULTS, window=1)
        if episodes and self._update(episodes) and self.policy_version % self.config.broadcast_interval == 0:
            self._push_weights()

    def setup(self, config: Any) -> None:
        super().setup(config)
        #: Remote EnvRunner index -> how often RLlib restored it (after Ray restarted its actor).
        self._restarts: Counter[int] = Counter()
        if self.config.async_rollouts and self.env_runner_group.num_remote_env_runners() > 0:
            # RLlib's pull-based weight sync (IMPALA's ``use_env_runner_state_server``): an
            # ``EnvRunnerStateServer`` actor holds the newest weights and every EnvRunner (the local one too,
            # which evaluates) pulls them at the start of its next ``sample()`` if they are newer than its own.
            # Pushed broadcasts would queue behind the rollout in flight, and RLlib keeps at most one per runner
            # in flight, so a runner could start its next rollout on weights an update older than the Learner's.
            # Started here, as IMPALA does, so that its process is up before the first rollout asks.
            server = ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=4)(EnvRunnerStateServer)
            self._state_server = server.remote()
            self._share_state_server(remote_ids=None, local=True)

    def _share_state_server(self, remote_ids: list[int] | None, local: bool) -> None:
        def share(runner, server=self._state_server):
            runner.use_state_server(server)

        self.env_runner_group.foreach_env_runner(share, remote_worker_ids=remote_ids, local_env_runner=local)

    def _push_weights(self) -> None:
        """The Learner's weights (tagged with its ``weights_seq_no``) to the state server: one object in Ray's
        store, fetched by each EnvRunner only when it pulls a newer version."""
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            trained = self._trained_modules
            modules = [f"{COMPONENT_RL_MODULE}/{m}" for m in trained] if trained else [COMPONENT_RL_MODULE]
            state = self.learner_group.get_state(
                components=[f"{COMPONENT_LEARNER}/{m}" for m in modules], inference_only=True
            )[COMPONENT_LEARNER]
            self._state_server.push.remote(
                {COMPONENT_RL_MODULE: ray.put(state[COMPONENT_RL_MODULE]), WEIGHTS_SEQ_NO: state[WEIGHTS_SEQ_NO]}
            )

    def restore_env_runners(self, env_runner_group: Any) -> list[int]:
        """RLlib's restore of restarted EnvRunners, completed for ours. RLlib copies the local runner's state
        into a restored one: not weights (our runners' ``get_state`` leaves them out unless asked) and the local
        runner's seed RNG and rollout counter. So each restored runner also gets a seed stream and group ids of
        its own (:meth:`~rllib_llm.core.group_env_runner.GroupEnvRunner.continue_after_restart`) and the Learner's
        weights: lock-step, pushed now (it missed the broadcasts while it was down, and would sample with its
        initial weights); asynchronous, the state server's handle again (as IMPALA re-shares it), which it
        pulls the newest weights from."""
        restored = super().restore_env_runners(env_runner_group)
        if not restored or env_runner_group is not self.env_runner_group:
            return restored
        self._restarts.update(restored)
        counts = dict(self._restarts)
        env_runner_group.foreach_env_runner(
            lambda runner: runner.continue_after_restart(counts[runner.worker_index]),
            remote_worker_ids=restored, local_env_runner=False,
        )
        if self._state_server is not None:
            self._share_state_server(remote_ids=restored, local=False)
        else:
            env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=self._trained_modules,
                to_worker_indices=restored,
                inference_only=True,
                timeout_seconds=self.config.env_runner_restore_timeout_s,
            )
        return restored

    def _learner_weights_seq_no(self) -> int:
        """The Learner's ``weights_seq_no`` (its update count, restored with a checkpoint), without weights."""
        skip = [f"{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}", f"{COMPONENT_LEARNER}/{COMPONENT_OPTIMIZER}"]
        state = self.learner_group.get_state(components=COMPONENT_LEARNER, not_components=skip)
        return int(state[COMPONENT_LEARNER].get(WEIGHTS_SEQ_NO, 0))

    def _collect_rollouts(self, timeout_s: float) -> bool:
        """Fetches the rollouts that finished (waiting up to ``timeout_s``) into the queue, and starts a new
        ``sample()`` (``updates_per_rollout`` updates' worth of groups) on every healthy remote EnvRunner that
        has none in flight. A rollout without episodes counts towards :data:`MAX_EMPTY_SAMPLES` (as in
        lock-step training); a slow one does not: it is still in flight. False (and one empty rollout
        counted) when no healthy runner has anything in flight."""
        group = self.env_runner_group
        results = group.foreach_env_runner_async_fetch_ready(
            func=functools.partial(_sample_with_metrics, updates=self.config.updates_per_rollout),
            tag=ASYNC_SAMPLE_TAG,
            timeout_seconds=timeout_s,
        )
        for episodes, metrics in results:
            self._group_queue.add(episodes)
            self.metrics.aggregate([metrics], key=ENV_RUNNER_RESULTS)
            if episodes:
                self._empty_samples = 0
            else:
                self._note_empty_sample()
        if not results and group.num_healthy_remote_env_runners() == 0 and group.num_in_flight_async_reqs() == 0:
            if self.await_env_runners():
                return True  # a restarted runner is back: the next poll starts its rollout
            self._note_empty_sample()
            return False
        return True

    def await_env_runners(self) -> bool:
        """Waits for a crashed remote EnvRunner to come back when none is healthy. With
        ``restart_failed_env_runners`` (RLlib's default) Ray restarts it as a new actor, which takes as long as
        its start (a model load, an engine start: seconds to minutes), and a rollout asked for meanwhile has
        no runner to sample: it would end the iteration without data and count as sampling failing
        (:data:`MAX_EMPTY_SAMPLES`). So poll RLlib's :meth:`restore_env_runners` (which syncs the runner's
        state, and here shares the state server) every :data:`RESTORE_POLL_S` up to the config's
        ``env_runner_restore_timeout_s``, and fire ``on_env_runners_recreated`` for what it restored, as
        RLlib's iteration start does. True when a remote runner is healthy (or the run has none)."""
        group = self.env_runner_group
        if group.num_remote_env_runners() == 0 or group.num_healthy_remote_env_runners() > 0:
            return True
        if not self.config.restart_failed_env_runners:
            return False
        timeout_s = self.config.env_runner_restore_timeout_s
        logger.warning("No remote EnvRunner is healthy: waiting up to %.0f s for a restarted one.", timeout_s)
        start = time.monotonic()
        while True:
            restored = self.restore_env_runners(group)
            if restored:
                make_callback(
                    "on_env_runners_recreated",
                    callbacks_objects=self.callbacks,
                    callbacks_functions=self.config.callbacks_on_env_runners_recreated,
                    kwargs=dict(algorithm=self, env_runner_group=group, env_runner_indices=restored,
                                is_evaluation=False),
                )
                logger.warning("EnvRunner(s) %s back after %.1f s.", restored, time.monotonic() - start)
                return True
            if time.monotonic() - start >= timeout_s:
                return False
            time.sleep(RESTORE_POLL_S)

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict:
        """RLlib's state plus :data:`REMOTE_ENV_RUNNERS` (each healthy remote runner's ``get_state``: counters and
        the seed RNG, no weights), so that a checkpoint resumes every runner's seed stream, not only the local
        one's. (With asynchronous rollouts this waits for the rollouts in flight; their groups are not
        checkpointed, as in RLlib's APPO.)"""
        state = super().get_state(components, not_components=not_components, **kwargs)
        group = self.env_runner_group
        if (group is not None and group.num_healthy_remote_env_runners() > 0
                and component_requested(REMOTE_ENV_RUNNERS, components, not_components)):
            state[REMOTE_ENV_RUNNERS] = dict(
                group.foreach_env_runner(lambda runner: (runner.worker_index, runner.get_state()),
                                         local_env_runner=False)
            )
        return state

    def set_state(self, state: dict) -> None:
        """RLlib's, then each remote runner's own state from :data:`REMOTE_ENV_RUNNERS` (by index; runners the
        checkpoint does not name keep theirs)."""
        super().set_state(state)
        saved = state.get(REMOTE_ENV_RUNNERS) or {}
        group = self.env_runner_group
        ids = [i for i in (group.healthy_worker_ids() if group is not None else []) if i in saved]
        if ids:
            group.foreach_env_runner(lambda runner: runner.set_state(saved[runner.worker_index]),
                                     remote_worker_ids=ids, local_env_runner=False)

    def restore_from_path(self, path: Any, *args: Any, **kwargs: Any) -> None:
        """A whole local checkpoint through ``set_state`` (:func:`~rllib_llm.checkpoint_files.read_checkpoint_state`),
        which restores every component and syncs the weights and states to the EnvRunners as RLlib's restore
        does; but RLlib's reads msgpack through ``msgpack_numpy.patch()``, process-wide, and syncs while
        patched: the remote EnvRunners (unpatched) then got msgpack_numpy's raw records instead of arrays and
        died. Other cases (a component, another file system) are RLlib's."""
        local = isinstance(path, (str, os.PathLike)) and "://" not in str(path) and Path(path).is_dir()
        if args or kwargs.get("component") is not None or kwargs.get("filesystem") is not None or not local:
            return super().restore_from_path(path, *args, **kwargs)
        self.set_state(read_checkpoint_state(path))

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Tune's checkpoint hook (``Trainable.save``): the directory ``rllib-llm train`` writes, RLlib's state
        plus the RNGs and the integrity marker (:func:`~rllib_llm.checkpoint_files.write_checkpoint`), so a
        sweep's checkpoints are checked, evaluated and resumed like a CLI run's."""
        write_checkpoint(self, checkpoint_dir)

    def _note_empty_sample(self) -> None:
        """A rollout in which no EnvRunner returned an episode (every remote runner failed or is restarting)
        trains nothing: say so, and stop after :data:`MAX_EMPTY_SAMPLES` such rollouts in a row rather than
        "train" on without data."""
        self._empty_samples += 1
        logger.warning(
            "No EnvRunner returned episodes in iteration %d (%d rollouts in a row); see the EnvRunner errors "
            "above.", self.iteration + 1, self._empty_samples,
        )
        if self._empty_samples >= MAX_EMPTY_SAMPLES:
            raise RuntimeError(
                f"No EnvRunner returned episodes for {self._empty_samples} rollouts in a row: sampling is "
                "failing (see the EnvRunner errors in the log); stopping instead of training on nothing."
            )

    def play_held_out(self, seeds: list[int] | None = None, explore: bool = False) -> list[Any]:
        """One episode per held-out seed (default: the config's evaluation seeds), on the first remote
        EnvRunner if there are any (the local one with ``async_rollouts``), else on the local one."""
        if seeds is None:
            offset, n = self.config.evaluation_seed_offset, self.config.evaluation_num_seeds
            seeds = list(range(offset, offset + n))

        def play(runner):
            return runner.sample(seeds=seeds, explore=explore, group_size=1, record_metrics=False)

        # Asynchronous training keeps the remote runners busy with rollouts (an evaluation would wait behind
        # one and use weights an update old): evaluate on the local runner, which every sync updates.
        remote = self.env_runner_group.num_remote_env_runners() > 0 and not self.config.async_rollouts
        remote = remote and self.await_env_runners()  # none back in time: the local runner evaluates
        return self.env_runner_group.foreach_env_runner(play, local_env_runner=not remote)[0]

    def evaluate_seeds(self, seeds: list[int] | None = None, explore: bool = False) -> dict[str, Any]:
        """:func:`~rllib_llm.metrics.rollout_stats` of held-out seeds, one episode per seed (greedy by default),
        with the env faults that hit them (an evaluation's faults are its own, never a training iteration's).
        Multi-agent: per-agent numbers as flat ``agent_<id>/<name>`` keys (the CLI logs each as one number)."""
        return flat_stats(rollout_stats(self.play_held_out(seeds, explore)))
