"""``LLMAlgorithm``: RLlib's sample -> learn -> sync-weights loop for group rollouts of LLM agents."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.core import ALL_MODULES
from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from rllib_llm.algorithms.sharding import NotEnoughGroupsError, learner_update_data
from rllib_llm.metrics import flat_stats, rollout_stats

logger = logging.getLogger(__name__)

#: Rollouts in a row without any episode after which training stops with an error.
MAX_EMPTY_SAMPLES = 3


class LLMAlgorithm(Algorithm):
    """One ``training_step``: every EnvRunner plays one group rollout, the LearnerGroup updates on the
    episodes (advantages come from the learner connector), and the new weights go to the EnvRunners."""

    #: The config class whose defaults make this algorithm (subclasses set it; None: plain LLMConfig).
    config_class: ClassVar[type | None] = None
    #: Rollouts in a row that returned no episode (see :meth:`_note_empty_sample`).
    _empty_samples = 0
    #: The episodes the last ``training_step`` trained on (after dynamic sampling's filter), for
    #: ``on_train_result`` callbacks such as :class:`~rllib_llm.run.trajectory_recorder.TrajectoryRecorder`.
    training_episodes: ClassVar[list] = []

    @classmethod
    def get_default_config(cls):
        from rllib_llm.algorithms.config import LLMConfig

        return (cls.config_class or LLMConfig)(cls)

    def sample_episodes(self) -> list:
        """Episodes of one group rollout from every EnvRunner (override for dynamic sampling)."""
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER)):
            episodes, env_runner_results = synchronous_parallel_sample(
                worker_set=self.env_runner_group, _uses_new_env_runners=True, _return_metrics=True
            )
        self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
        if episodes:
            self._empty_samples = 0
        else:
            self._note_empty_sample()
        return episodes

    def training_step(self) -> None:
        episodes = self.training_episodes = self.sample_episodes()
        if not episodes:  # dynamic sampling found no informative group, or sampling failed (see below)
            return
        try:
            data = learner_update_data(
                episodes, self.config.num_learners, self.config.minibatch_size, self.config.num_epochs
            )
        except NotEnoughGroupsError as e:  # dynamic sampling kept fewer groups than there are Learners
            logger.warning("Update skipped in iteration %d: %s", self.iteration + 1, e)
            return
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
        with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER)):
            self.env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                policies=set(learner_results[0].keys()) - {ALL_MODULES},
                inference_only=True,
            )

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
        EnvRunner if there are any, else on the local one."""
        if seeds is None:
            offset, n = self.config.evaluation_seed_offset, self.config.evaluation_num_seeds
            seeds = list(range(offset, offset + n))

        def play(runner):
            return runner.sample(seeds=seeds, explore=explore, group_size=1, record_metrics=False)

        remote = self.env_runner_group.num_remote_env_runners() > 0
        return self.env_runner_group.foreach_env_runner(play, local_env_runner=not remote)[0]

    def evaluate_seeds(self, seeds: list[int] | None = None, explore: bool = False) -> dict[str, Any]:
        """:func:`~rllib_llm.metrics.rollout_stats` of held-out seeds, one episode per seed (greedy by default),
        with the env faults that hit them (an evaluation's faults are its own, never a training iteration's).
        Multi-agent: per-agent numbers as flat ``agent_<id>/<name>`` keys (the CLI logs each as one number)."""
        return flat_stats(rollout_stats(self.play_held_out(seeds, explore)))
