"""The group-rollout EnvRunner: what the single- and multi-agent LLM EnvRunners share.

RLlib's ``SingleAgentEnvRunner`` and ``MultiAgentEnvRunner`` are the model: one class owns the envs, the
module, the metrics, the callbacks and the state; ``sample()`` plays episodes. Ours differ from RLlib's in
one way: a rollout is ``num_groups`` groups of ``group_size`` envs, the envs of a group reset with one
seed (group environments, what the group-relative estimators compare), played in lock step so that every
step's prompts go to the generation backend in one batch.

:class:`GroupEnvRunner` holds everything that is not about one or many agents:

- seeding and group starts (:meth:`_start_group_rollout`: one seed per group, episode ids
  ``<worker>-<rollout>-<group>``) and RLlib's ``num_episodes`` / ``num_timesteps`` requests;
- env calls under ``env_step_timeout_s`` (:func:`call_with_timeout`), reset retries on fresh envs
  (:data:`MAX_RESET_ATTEMPTS`), a failing env replaced (``restart_failed_sub_environments``) and its fault
  counted on the episode it hit (:data:`~rllib_llm.columns.ENV_FAULTS`);
- RLlib's callbacks: ``on_episode_start`` / ``on_episode_step`` / ``on_episode_end`` per episode and
  ``on_sample_end`` per rollout, through ``config.callbacks(...)`` as in RLlib's own runners;
- the rollout metrics (:func:`rllib_llm.metrics.rollout_stats`), weight sync and the runner state.

Subclasses (:class:`~rllib_llm.core.single_agent_env_runner.LLMEnvRunner`,
:class:`~rllib_llm.core.multi_agent_env_runner.LLMMultiAgentEnvRunner`) say how to build an env and a module,
how an episode starts, and play the steps (:meth:`_play`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray.rllib.callbacks.utils import make_callback
from ray.rllib.core import COMPONENT_RL_MODULE
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.utils import force_list
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.framework import get_device
from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO
from ray.util.debug import log_once

from rllib_llm.checkpoint_files import MsgpackCheckpointable
from rllib_llm.columns import (
    ACTION_FORMAT_KEY,
    ACTION_LOGP,
    ACTIONS,
    ANCHOR,
    ENV_ERROR,
    ENV_FAULTS,
    FEW_SHOT_KEY,
    FINISH_REASON,
    INFO_ANCHOR_OBS,
    INFO_WON,
    POLICY_VERSION,
    PROMPT,
    RESPONSE,
    RESPONSE_PREFIX_KEY,
    RESPONSE_TEXT,
    TASK_KEY,
    TEMPLATE_KEY,
)
from rllib_llm.generation import GenerationBackend, SamplingParams
from rllib_llm.generation.deferred import DeferredBackend
from rllib_llm.metrics import (
    NUM_ENV_FAULTS,
    NUM_ENV_STEPS,
    NUM_ENV_STEPS_LIFETIME,
    NUM_EPISODES,
    NUM_GENERATE_CALLS,
    TOKENS_PER_S,
    WEIGHT_SYNC_S,
    rollout_stats,
)

logger = logging.getLogger(__name__)

#: Fresh envs tried for one reset before the rollout gives up.
MAX_RESET_ATTEMPTS = 3


class EnvStepTimeout(RuntimeError):
    """An env call ran past ``env_step_timeout_s``."""


def call_with_timeout(fn: Any, timeout_s: float | None, *args: Any) -> Any:
    """``fn(*args)``, raising :class:`EnvStepTimeout` after ``timeout_s`` seconds (None: no limit).

    The call runs in a daemon thread; a hung env cannot be killed from Python, so the runner abandons it
    (and the env object) and builds a fresh env instead.
    """
    if timeout_s is None:
        return fn(*args)
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn(*args)
        except BaseException as e:  # re-raised in the caller's thread
            result["error"] = e

    thread = threading.Thread(target=target, daemon=True, name="env-call")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise EnvStepTimeout(f"env call {getattr(fn, '__name__', fn)} took longer than {timeout_s} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


def anchor_of(observation: Any, info: dict) -> Any:
    """The hashable state key GiGPO groups by: the env's ``anchor_obs`` or the text observation."""
    anchor = info.get(INFO_ANCHOR_OBS)
    if anchor is None:
        anchor = observation.get("text") if isinstance(observation, dict) else observation
    if isinstance(anchor, list):
        anchor = tuple(anchor)
    return anchor


def step_record(prompt_ids: list[int], output: Any, episode: Any) -> dict[str, Any]:
    """The ``extra_model_outputs`` of the step ``episode`` (single-agent) is about to take, as generated: prompt
    and response ids, the sampler's per-token log-probs (what the Learner's ratio divides by), the text, the
    anchor of the observation acted on (GiGPO) and why generation stopped. The runner adds the env's verdict
    (:data:`~rllib_llm.columns.VALID`) after the step; rewards stay the env's (shaping is the Learner's)."""
    anchor = anchor_of(episode.get_observations(-1), episode.get_infos(-1) or {})
    return {
        PROMPT: prompt_ids,
        RESPONSE: output.token_ids,
        ACTION_LOGP: output.logprobs,
        RESPONSE_TEXT: output.text,
        ANCHOR: anchor,
        FINISH_REASON: output.finish_reason,
    }


def prompt_fields(config: Any, env: Any, template: str, task: str, agent_id: str | None = None) -> dict[str, Any]:
    """The per-episode fields the connectors read (template, task, few-shot examples, reply prefix, the env's
    action format).

    Few-shot examples come from the config, else the env; a dict of them is keyed by agent id."""
    few_shot = config.few_shot if config.few_shot is not None else getattr(env, "few_shot", [])
    if isinstance(few_shot, dict):
        few_shot = few_shot.get(agent_id, [])
    return {
        TEMPLATE_KEY: template,
        TASK_KEY: task,
        FEW_SHOT_KEY: list(few_shot),
        RESPONSE_PREFIX_KEY: config.response_prefix,
        ACTION_FORMAT_KEY: getattr(env, "action_format", "tags"),
    }


def module_weights(state: dict) -> dict | None:
    """The RLModule weights in an EnvRunner state (None if absent). ``EnvRunnerGroup.sync_weights`` puts them
    in Ray's object store once for all remote runners and sends each an ``ObjectRef``, which is resolved here."""
    weights = state.get(COMPONENT_RL_MODULE)
    if isinstance(weights, ray.ObjectRef):
        weights = ray.get(weights)
    return weights


def component_requested(name: str, components: Any, not_components: Any) -> bool:
    """RLlib's ``get_state(components=, not_components=)`` test for one component (top-level names; a
    ``rl_module/<id>`` entry asks for ``rl_module``)."""

    def as_set(value: Any) -> set[str]:
        return {value.split("/", 1)[0]} if isinstance(value, str) else {c.split("/", 1)[0] for c in value or ()}

    return (components is None or name in as_set(components)) and name not in as_set(not_components)


@dataclass
class RolloutCounters:
    """What one rollout's step loop measured besides the episodes."""

    generated_tokens: int = 0
    generate_seconds: float = 0.0
    generate_calls: int = 0


def portable_rng_state(state: dict[str, Any]) -> dict[str, Any]:
    """A numpy bit generator's state with its integers as decimal strings: PCG64's 128-bit ``state`` and
    ``inc`` overflow msgpack (checkpoints are written with msgpack, not pickle, so loading one runs no code)."""
    return {k: portable_rng_state(v) if isinstance(v, dict) else str(v) if isinstance(v, int) and not
            isinstance(v, bool) and abs(v) >= 2**63 else v for k, v in state.items()}  # fmt: skip


def native_rng_state(state: dict[str, Any]) -> dict[str, Any]:
    """:func:`portable_rng_state` undone (a state that was never converted passes unchanged)."""
    out = {}
    for key, value in state.items():
        if isinstance(value, dict):
            value = native_rng_state(value)
        elif key in ("state", "inc") and isinstance(value, str):
            value = int(value)
        out[key] = value
    return out


class GroupEnvRunner(MsgpackCheckpointable, EnvRunner, Checkpointable):
    """Base of the LLM EnvRunners (see module docstring). ``self.envs`` are the env slots (a gym env, or a
    PettingZoo adapter), grown on demand; ``self.env`` is the first slot's env (spaces, agent ids)."""

    def __init__(self, *, config: Any, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self._rng = np.random.default_rng(self._seed)
        self._num_rollouts = 0
        #: How often Ray restarted this runner's actor (:meth:`continue_after_restart`): part of its group ids.
        self._restarts = 0
        #: The Learner weights version this runner samples with (RLlib's WEIGHTS_SEQ_NO; 0: the initial ones).
        self.weights_seq_no = 0
        #: RLlib's ``EnvRunnerStateServer`` (asynchronous rollouts: the Algorithm shares it, as IMPALA does);
        #: each ``sample()`` first pulls the newest weights from it. None: weights are pushed (``set_state``).
        self._env_runner_state_server: Any = None
        self._callbacks = [cls() for cls in force_list(self.config.callbacks_class)]
        self.envs: list[Any] = []
        self.make_env()
        self.make_module()
        self.sampling = SamplingParams.from_dict(self.config.sampling)
        self._module_to_env = self.config.build_module_to_env_connector(env=self.env, spaces=self.get_spaces())

    # --- what a subclass provides --------------------------------------------------------------------

    def _new_env(self) -> Any:
        """One fresh env slot."""
        raise NotImplementedError

    def _env_of(self, slot: Any) -> Any:
        """The env object in a slot (for spaces, prompt fields and callbacks)."""
        return slot

    def _new_episode(self, index: int, seed: int, group_id: str, reset: tuple[Any, Any]) -> Any:
        """The episode started from ``reset`` (the slot's reset result) with its group's custom data."""
        raise NotImplementedError

    def _play(self, episodes: list, params: SamplingParams, explore: bool) -> RolloutCounters:
        """Steps ``episodes`` (one per env slot, in order) to their ends or ``max_episode_steps``."""
        raise NotImplementedError

    def _modules(self) -> dict[str, Any]:
        """Module id -> (inference-only) RLModule."""
        raise NotImplementedError

    def _backend_for(self, module: Any, build: Callable[[], GenerationBackend]) -> GenerationBackend:
        """``build()``, or, on the local runner of a run with remote EnvRunners (which samples only to
        evaluate, if at all), a :class:`~rllib_llm.generation.deferred.DeferredBackend` that builds it on
        first use: no second vLLM engine per run in the driver."""
        if (self.worker_index or 0) == 0 and (self.config.num_env_runners or 0) > 0:
            return DeferredBackend(build, lambda: module.get_state(inference_only=True))
        return build()

    def _backends(self) -> dict[str, GenerationBackend]:
        """Module id -> the generation backend its module samples with."""
        return {module_id: module.generation_backend for module_id, module in self._modules().items()}

    def _sync_module(self, module_id: str, state: dict) -> None:
        """New weights for one module (its ``set_state`` passes them on to its generation backend), timed:
        the ``weight_sync_s`` metric."""
        start = time.perf_counter()
        self._modules()[module_id].set_state(state)
        self.metrics.log_value(WEIGHT_SYNC_S, time.perf_counter() - start, window=1)

    def _module_state(self, components: Any) -> Any:
        """The ``rl_module`` entry of :meth:`get_state`."""
        raise NotImplementedError

    def _module_states(self, weights: dict) -> dict[str, dict]:
        """Module id -> state, from the ``rl_module`` entry of a state :meth:`set_state` got."""
        return weights

    def _agent_ids(self) -> list[str]:
        """Agents that get a per-agent metrics sub-dict (none for single-agent)."""
        return []

    # --- construction --------------------------------------------------------------------------------

    def make_env(self) -> None:
        for slot in self.envs:
            slot.close()
        self.envs = [self._new_env() for _ in range(self.config.num_groups * self.config.group_size)]
        self.env = self._env_of(self.envs[0])

    def module_device(self) -> Any:
        """RLlib's device for ``num_gpus_per_env_runner`` (the local runner too: unlike RLlib's runners,
        ours samples in the driver when ``num_env_runners=0``); generation runs wherever the module is."""
        return get_device(self.config, self.config.num_gpus_per_env_runner)

    def assert_healthy(self) -> None:
        assert self.envs and self.module is not None, f"{type(self).__name__} has no envs or no module."

    # --- env calls: timeouts, retries, replacement ---------------------------------------------------

    def _ensure_envs(self, count: int) -> None:
        while len(self.envs) < count:
            self.envs.append(self._new_env())

    @property
    def _timeout(self) -> float | None:
        return getattr(self.config, "env_step_timeout_s", None)

    def _replace_env(self, index: int, error: BaseException, where: str) -> None:
        """Swaps in a fresh env; the old one is closed best-effort (a hung env is only abandoned: its thread
        may still hold it)."""
        logger.warning("Env %d failed in %s (%s: %s); recreating it.", index, where, type(error).__name__, error)
        broken = self.envs[index]
        if not isinstance(error, EnvStepTimeout):
            try:
                call_with_timeout(broken.close, self._timeout or 5.0)
            except Exception:
                logger.debug("Closing the failed env %d failed too.", index, exc_info=True)
        self.envs[index] = self._new_env()

    def _reset(self, index: int, seed: int) -> tuple[Any, int]:
        """The slot's ``reset(seed)`` -> (its result, failed resets); a failing env is replaced and reset
        again, up to ``MAX_RESET_ATTEMPTS`` times (an env that cannot even reset has no episode to truncate)."""

        def reset() -> Any:
            return call_with_timeout(lambda: self._reset_slot(self.envs[index], seed), self._timeout)

        for failed in range(MAX_RESET_ATTEMPTS - 1):
            try:
                return reset(), failed
            except Exception as e:
                if not self.config.restart_failed_sub_environments:
                    raise
                self._replace_env(index, e, "reset")
        try:
            return reset(), MAX_RESET_ATTEMPTS - 1
        except Exception as e:
            raise RuntimeError(
                f"env {self.config.env!r} failed to reset (seed {seed}) {MAX_RESET_ATTEMPTS} times in a row, "
                f"last with {type(e).__name__}: {e}"
            ) from e

    def _reset_slot(self, slot: Any, seed: int) -> Any:
        return slot.reset(seed=seed)

    def _env_step(self, index: int, episode: Any, action: Any) -> tuple[Any, str | None]:
        """``slot.step(action)`` -> (result, None); a failing env is replaced and ``(None, error)`` returned,
        the fault counted on ``episode``: the caller truncates the episode there (reward 0, not won, the
        error in ``info["env_error"]``), so it is neither dropped nor counted as a success. The fault is
        the env's, not the model's: the action counts as valid if it parsed."""
        try:
            return call_with_timeout(self.envs[index].step, self._timeout, action), None
        except Exception as e:
            if not self.config.restart_failed_sub_environments:
                raise
            self._replace_env(index, e, "step")
            episode.custom_data[ENV_FAULTS] += 1
            return None, repr(e)

    # --- sampling ------------------------------------------------------------------------------------

    def sample(
        self,
        *,
        seeds: list[int] | None = None,
        explore: bool = True,
        sampling: dict[str, Any] | None = None,
        group_size: int | None = None,
        record_metrics: bool = True,
        num_episodes: int | None = None,
        num_timesteps: int | None = None,
        **kwargs: Any,
    ) -> list:
        """Group rollouts. ``seeds``: one per group (default: fresh random seeds for ``num_groups``);
        ``group_size`` overrides the config's (evaluation plays each seed once); ``explore=False`` is greedy.
        RLlib's ``num_episodes`` asks for that many episodes (whole groups: rounded up to ``group_size``),
        ``num_timesteps`` for rollouts until at least that many env steps. ``record_metrics=False`` (held-out
        evaluation) leaves the training metrics and counters alone: its steps and faults are not the next
        training iteration's (nor do they advance an lr schedule)."""
        self._pull_newer_weights()
        size = group_size or self.config.group_size
        if seeds is None and num_episodes is not None:
            seeds = self._fresh_seeds(math.ceil(num_episodes / size))
        episodes = self._rollout(seeds, explore, sampling, size, record_metrics)
        while num_timesteps is not None and sum(len(ep) for ep in episodes) < num_timesteps:
            episodes += self._rollout(None, explore, sampling, size, record_metrics)
        for backend in self._backends().values():
            backend.release_memory()  # the Learner's turn: e.g. vLLM's KV cache goes back to the GPU
        make_callback(
            "on_sample_end",
            callbacks_objects=self._callbacks,
            callbacks_functions=self.config.callbacks_on_sample_end,
            kwargs=dict(env_runner=self, metrics_logger=self.metrics, samples=episodes),
        )
        return episodes

    def _pull_newer_weights(self) -> None:
        """Pull-based weight sync (RLlib's ``SingleAgentEnvRunner.sample`` with a state server): the newest
        weights the Learner pushed, if newer than this runner's, before the rollout starts. An unreachable
        server leaves the current weights (warned once; a group records the version it was sampled with)."""
        if self._env_runner_state_server is None:
            return
        try:
            state = ray.get(self._env_runner_state_server.pull_if_newer.remote(self.weights_seq_no))
        except ray.exceptions.RayError as e:
            if log_once("group_env_runner_state_server_pull_failed"):
                logger.warning("EnvRunner could not pull weights from the state server (%s); sampling with "
                               "version %d until it answers again.", type(e).__name__, self.weights_seq_no)
            return
        if state is not None:
            self.set_state(state)

    def _fresh_seeds(self, count: int) -> list[int]:
        return [int(s) for s in self._rng.integers(0, 2**31 - 1, size=count)]

    def _rollout(
        self, seeds: list[int] | None, explore: bool, sampling: dict[str, Any] | None, size: int, record: bool
    ) -> list:
        params, episodes = self._start_group_rollout(seeds, explore, sampling, size)
        for index, episode in enumerate(episodes):
            self._episode_callback("on_episode_start", index, episode)
        counters = self._play(episodes, params, explore)
        for index, episode in enumerate(episodes):
            self._episode_callback("on_episode_end", index, episode)
        if record:
            self._log_rollout_metrics(episodes, counters)
        return episodes

    def _start_group_rollout(
        self, seeds: list[int] | None, explore: bool, sampling: dict[str, Any] | None, group_size: int
    ) -> tuple[SamplingParams, list]:
        """One seed per group (fresh random ones for ``num_groups`` when None), enough envs, the sampling
        params (greedy unless ``explore``), and one started episode per env, ``group_size`` per seed, ids
        ``<worker>-<rollout>-<group>`` (``<worker>r<restarts>`` after a restart: :meth:`continue_after_restart`)."""
        if seeds is None:
            seeds = self._fresh_seeds(self.config.num_groups)
        self._ensure_envs(len(seeds) * group_size)
        params = self.sampling.replace(**(sampling or {}))
        if not explore:
            params = params.replace(greedy=True)
        worker = f"{self.worker_index or 0}" + (f"r{self._restarts}" if self._restarts else "")
        rollout = f"{worker}-{self._num_rollouts}"
        self._num_rollouts += 1
        episodes = []
        for g, seed in enumerate(seeds):
            for k in range(group_size):
                index = g * group_size + k
                reset, faults = self._reset(index, seed)
                episode = self._new_episode(index, seed, f"{rollout}-{g}", reset)
                episode.custom_data[ENV_FAULTS] = faults
                episode.custom_data[POLICY_VERSION] = self.weights_seq_no
                episodes.append(episode)
        return params, episodes

    def _episode_callback(self, which: str, index: int, episode: Any) -> None:
        """RLlib's per-episode callback ``which`` (``on_episode_start/step/end``), with RLlib's arguments."""
        make_callback(
            which,
            callbacks_objects=self._callbacks,
            callbacks_functions=getattr(self.config, f"callbacks_{which}"),
            kwargs=dict(
                episode=episode,
                env_runner=self,
                metrics_logger=self.metrics,
                env=self._env_of(self.envs[index]),
                env_index=index,
                rl_module=self.module,
            ),
        )

    def _actions(self, episodes: list, outputs: list, explore: bool) -> list:
        """The env action of each (single-agent) episode's reply: the module-to-env pipeline
        (:class:`~rllib_llm.env_connectors.actions.ParseActions` by default) on the reply texts."""
        batch = self._module_to_env(
            rl_module=self.module,
            batch={RESPONSE_TEXT: [out.text for out in outputs]},
            episodes=episodes,
            explore=explore,
            shared_data={},
            metrics=self.metrics,
        )
        return batch[ACTIONS]

    @staticmethod
    def _step_failure_info(error: str) -> dict[str, Any]:
        """The info of a step an env failure ended: not won, the error, the action not judged invalid."""
        return {INFO_WON: False, ENV_ERROR: error}

    # --- metrics -------------------------------------------------------------------------------------

    def _log_rollout_metrics(self, episodes: list, counters: RolloutCounters) -> None:
        steps = sum(len(ep) for ep in episodes)
        self.num_env_steps_sampled_lifetime += steps
        log = self.metrics.log_value
        for key, value in rollout_stats(episodes, self._agent_ids()).items():
            if isinstance(value, dict):  # one agent's sub-dict
                for name, v in value.items():
                    log((key, name), v, window=1)
            elif key == NUM_ENV_FAULTS:
                log(key, value, reduce="sum")
            elif key != NUM_EPISODES:
                log(key, value, window=1)
        seconds = counters.generate_seconds
        log(TOKENS_PER_S, counters.generated_tokens / seconds if seconds > 0 else 0.0, window=1)
        log(NUM_GENERATE_CALLS, counters.generate_calls, window=1)
        log(NUM_ENV_STEPS, steps, reduce="sum")
        log(NUM_ENV_STEPS_LIFETIME, steps, reduce="lifetime_sum")

    def get_metrics(self) -> dict:
        return self.metrics.reduce()

    # --- state (weights) -----------------------------------------------------------------------------

    def get_state(self, components=None, *, not_components=None, **kwargs: Any) -> dict:
        """Counters and the seed RNG; module weights only when asked for by name (checkpoints leave
        them out: the Learner's copy is the one saved, and restoring syncs it back here)."""
        state: dict[str, Any] = {
            NUM_ENV_STEPS_LIFETIME: self.num_env_steps_sampled_lifetime,
            "rng": portable_rng_state(self._rng.bit_generator.state),
            "num_rollouts": self._num_rollouts,
        }
        if components is not None and component_requested(COMPONENT_RL_MODULE, components, not_components):
            state[COMPONENT_RL_MODULE] = self._module_state(components)
        return state

    def set_state(self, state: dict) -> None:
        """Counters, the seed RNG and module weights. As in RLlib's EnvRunners, weights tagged with a
        ``weights_seq_no`` are loaded only when newer than the runner's (0 or none: always), and the number
        becomes the version the next rollouts record (:data:`~rllib_llm.columns.POLICY_VERSION`)."""
        seq_no = int(state.get(WEIGHTS_SEQ_NO, 0) or 0)
        weights = module_weights(state) if seq_no == 0 or seq_no > self.weights_seq_no else None
        if seq_no > 0 and COMPONENT_RL_MODULE in state:
            self.weights_seq_no = max(self.weights_seq_no, seq_no)
        if weights is not None:
            modules = self._modules()
            for module_id, module_state in self._module_states(weights).items():
                if module_id in modules:
                    self._sync_module(module_id, module_state)
        self.num_env_steps_sampled_lifetime = state.get(NUM_ENV_STEPS_LIFETIME, self.num_env_steps_sampled_lifetime)
        if "rng" in state:
            self._rng.bit_generator.state = native_rng_state(state["rng"])
        self._num_rollouts = state.get("num_rollouts", self._num_rollouts)

    def continue_after_restart(self, restarts: int) -> None:
        """Called by the Algorithm on a runner that Ray restarted (``restarts`` times so far) once RLlib restored
        it. RLlib's restore copies the local runner's state into it, seed RNG and rollout counter included, so
        two restored runners would draw the same seeds, and a fresh counter would give group ids its earlier
        rollouts had (a queue of asynchronous groups may still hold those: one id, two groups). Its own seed
        stream for this incarnation, and ids ``<worker>r<restarts>-<rollout>-<group>``."""
        self._restarts = restarts
        self._rng = np.random.default_rng(None if self._seed is None else [self._seed, restarts])
        self._num_rollouts = 0

    def use_state_server(self, server: Any) -> None:
        """Pull weights from RLlib's ``EnvRunnerStateServer`` actor at the start of each rollout (asynchronous
        rollouts; the Algorithm hands every runner the one it started, as IMPALA does)."""
        self._env_runner_state_server = server

    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    def get_checkpointable_components(self):
        """None: the module's weights are the Learner's (saved there); the runner's own state (counters,
        the seed RNG) is in :meth:`get_state`."""
        return []

    def stop(self) -> None:
        for slot in self.envs:
            slot.close()

