"""The LLM EnvRunner: steps a batch of group environments in lock step with batched generation.

Each call of :meth:`LLMEnvRunner.sample` plays one rollout: ``num_groups`` groups of ``group_size`` envs,
all envs of a group reset with the same seed (group environments). At every step the env-to-module
connector pipeline (memory + prompt builder) turns each active episode into prompt token ids, the
generation backend answers all of them in one call, the action is parsed out of ``<action>...</action>``
and the envs step. Episodes are RLlib ``SingleAgentEpisode``s; per step they record (as
``extra_model_outputs``) the prompt and response token ids, the old log-probs, the env's anchor
observation and validity, and in ``custom_data`` their group id.

A vision-language policy (:func:`~rllib_llm.vision.is_vision_model`) samples through
:class:`~rllib_llm.vision.HFVisionBackend` with each prompt's image (``batch["images"]``, the current
observation's); its steps record the prompt ids with the image placeholder expanded to the image's patch
tokens and ``num_images`` (0 or 1), and the Learner re-reads the image from the episode's observation.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import ray
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.framework import get_device

from rllib_llm.action_parsing import parse_action
from rllib_llm.env_connectors.prompts import (
    FEW_SHOT_KEY,
    IMAGES,
    PROMPT_IDS,
    RESPONSE_PREFIX_KEY,
    TASK_KEY,
    TEMPLATE_KEY,
)
from rllib_llm.envs.registry import make_env
from rllib_llm.generation import GenerationBackend, SamplingParams, make_backend
from rllib_llm.models import ModelSpec
from rllib_llm.vision import HFVisionBackend, expand_prompt, is_vision_model

logger = logging.getLogger(__name__)

# extra_model_outputs keys recorded per step.
PROMPT = "prompt_ids"
RESPONSE = "response_ids"
OLD_LOGP = "old_logp"
RESPONSE_TEXT = "response_text"
ANCHOR = "anchor"
VALID = "is_action_valid"
ENV_REWARD = "env_reward"
FINISH_REASON = "finish_reason"
#: Images the step's prompt showed (vision-language policies only): the observation's image if 1.
NUM_IMAGES = "num_images"
# custom_data keys.
GROUP_ID = "group_id"
SEED = "seed"

# Metric keys.
SUCCESS_RATE = "success_rate"
VALID_ACTION_RATE = "valid_action_rate"
EPISODE_RETURN_MEAN = "episode_return_mean"
EPISODE_LEN_MEAN = "episode_len_mean"
RESPONSE_LENGTH_MEAN = "response_length_mean"
PROMPT_LENGTH_MEAN = "prompt_length_mean"
TOKENS_PER_S = "generated_tokens_per_s"
NUM_ENV_STEPS = "num_env_steps_sampled"
NUM_ENV_STEPS_LIFETIME = "num_env_steps_sampled_lifetime"
NUM_ENV_FAULTS = "num_env_faults"
TRUNCATED_RESPONSE_RATE = "truncated_response_rate"
EMPTY_RESPONSE_RATE = "empty_response_rate"
UNDECODABLE_RESPONSE_RATE = "undecodable_response_rate"
# info key of the step at which an env failed (the episode is truncated there).
ENV_ERROR = "env_error"
#: Episode custom data: env faults that hit this episode (failed resets before it started, a failed step).
ENV_FAULTS = "env_faults"
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
    anchor = info.get("anchor_obs")
    if anchor is None:
        anchor = observation.get("text") if isinstance(observation, dict) else observation
    if isinstance(anchor, list):
        anchor = tuple(anchor)
    return anchor


def episode_success(episode: SingleAgentEpisode) -> bool:
    """Whether the episode ended with the env's ``won`` flag set."""
    return bool((episode.get_infos(-1) or {}).get("won", False))


def prompt_fields(config: Any, env: Any, template: str, task: str, agent_id: str | None = None) -> dict[str, Any]:
    """The per-episode fields the prompt connector reads (template, task, few-shot examples, reply prefix).

    Few-shot examples come from the config, else the env; a dict of them is keyed by agent id."""
    few_shot = config.few_shot if config.few_shot is not None else getattr(env, "few_shot", [])
    if isinstance(few_shot, dict):
        few_shot = few_shot.get(agent_id, [])
    return {
        TEMPLATE_KEY: template,
        TASK_KEY: task,
        FEW_SHOT_KEY: list(few_shot),
        RESPONSE_PREFIX_KEY: config.response_prefix,
    }


def module_weights(state: dict) -> dict | None:
    """The RLModule weights in an EnvRunner state (None if absent). ``EnvRunnerGroup.sync_weights`` puts them
    in Ray's object store once for all remote runners and sends each an ``ObjectRef``, which is resolved here."""
    weights = state.get(COMPONENT_RL_MODULE)
    if isinstance(weights, ray.ObjectRef):
        weights = ray.get(weights)
    return weights


def reward_penalty(config: Any, valid: bool) -> float:
    """The invalid-action penalty that goes into a step's reward: none for a valid action, and none in
    ``invalid_action_penalty_mode="row"``, where the learner connector subtracts it from the step's row."""
    return 0.0 if valid or config.invalid_action_penalty_mode == "row" else config.invalid_action_penalty


def begin_group_rollout(
    runner: Any, seeds: list[int] | None, explore: bool, sampling: dict[str, Any] | None, group_size: int | None
) -> tuple[SamplingParams, list]:
    """The start shared by the single- and multi-agent runners' ``sample``: one seed per group (fresh
    random ones for ``num_groups`` when None), enough envs, the sampling params (greedy unless
    ``explore``), and one started episode per env, ``group_size`` per seed, ids ``<worker>-<rollout>-<group>``."""
    group_size = group_size or runner.config.group_size
    if seeds is None:
        seeds = [int(s) for s in runner._rng.integers(0, 2**31 - 1, size=runner.config.num_groups)]
    runner._ensure_envs(len(seeds) * group_size)
    params = runner.sampling.replace(**(sampling or {}))
    if not explore:
        params = params.replace(greedy=True)
    rollout = f"{runner.worker_index or 0}-{runner._num_rollouts}"
    runner._num_rollouts += 1
    episodes = [
        runner._start_episode(g * group_size + k, seed, f"{rollout}-{g}")
        for g, seed in enumerate(seeds)
        for k in range(group_size)
    ]
    return params, episodes


class LLMEnvRunner(EnvRunner, Checkpointable):
    """EnvRunner for LLM agents (see module docstring). Configured by an :class:`LLMConfig`."""

    def __init__(self, *, config, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self._rng = np.random.default_rng(self._seed)
        self._num_rollouts = 0
        self.envs: list[gym.Env] = []
        self.make_env()
        self.make_module()
        self._env_to_module = self.config.build_env_to_module_connector(env=self.env, spaces=self.get_spaces())
        self.vision = is_vision_model(self.module.model)
        self.backend = self.make_backend()
        self.sampling = SamplingParams.from_dict(self.config.sampling)

    # --- construction --------------------------------------------------------------------------------

    def _new_env(self) -> gym.Env:
        return make_env(self.config.env, self.config.env_config)

    def make_env(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = [self._new_env() for _ in range(self.config.num_groups * self.config.group_size)]
        self.env = self.envs[0]

    def make_module(self) -> None:
        """Builds the inference-only module on RLlib's device for ``num_gpus_per_env_runner`` (the local
        runner too: unlike RLlib's runners, ours samples in the driver when ``num_env_runners=0``), in the
        model's ``inference_dtype``; the generation backend runs wherever the module is."""
        spec = self.config.get_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()
        device = get_device(self.config, self.config.num_gpus_per_env_runner)
        self.module.to(device=device, dtype=ModelSpec.from_any(self.config.llm_model).inference_torch_dtype)

    def make_backend(self) -> GenerationBackend:
        """The configured backend; a vision-language model samples through :class:`HFVisionBackend`.
        Called once in ``__init__`` after :meth:`make_module`; override to generate elsewhere (the prompt
        agent plays an OpenAI-compatible API this way)."""
        name, options = self.config.generation_backend, self.config.generation_backend_options
        if not self.vision:
            return make_backend(name, model=self.module.model, tokenizer=self.module.tokenizer, **options)
        if name != "hf":
            raise ValueError(f"Vision-language models sample with the 'hf' backend only (image prompts are not "
                             f"wired into {name!r} yet), got generation backend {name!r}.")  # fmt: skip
        if options:
            logger.warning("Vision-language sampling (HFVisionBackend) ignores generation_backend_options %s.", options)
        return HFVisionBackend(self.module.model, self.module.tokenizer)

    def get_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        spaces = (self.env.observation_space, self.env.action_space)
        return {INPUT_ENV_SPACES: spaces, INPUT_ENV_SINGLE_SPACES: spaces, DEFAULT_MODULE_ID: spaces}

    def assert_healthy(self) -> None:
        assert self.envs and self.module is not None, "LLMEnvRunner has no envs or no module."

    # --- sampling ------------------------------------------------------------------------------------

    def _ensure_envs(self, count: int) -> None:
        while len(self.envs) < count:
            self.envs.append(self._new_env())

    @property
    def _timeout(self) -> float | None:
        return getattr(self.config, "env_step_timeout_s", None)

    def _replace_env(self, index: int, error: BaseException, where: str) -> None:
        """Swaps in a fresh env; the old one is closed best-effort (a hung env is only abandoned: its thread
        may still hold it). The fault is counted on the episode it hit (:data:`ENV_FAULTS`)."""
        logger.warning("Env %d failed in %s (%s: %s); recreating it.", index, where, type(error).__name__, error)
        broken = self.envs[index]
        if not isinstance(error, EnvStepTimeout):
            try:
                call_with_timeout(broken.close, self._timeout or 5.0)
            except Exception:
                logger.debug("Closing the failed env %d failed too.", index, exc_info=True)
        self.envs[index] = self._new_env()

    def _reset(self, index: int, seed: int) -> tuple[Any, dict, int]:
        """``env.reset(seed=)`` -> (observation, info, failed resets); a failing env is replaced and reset
        again, up to ``MAX_RESET_ATTEMPTS`` times (an env that cannot even reset has no episode to truncate)."""
        def reset() -> tuple[Any, dict]:
            return call_with_timeout(lambda: self.envs[index].reset(seed=seed), self._timeout)

        for failed in range(MAX_RESET_ATTEMPTS - 1):
            try:
                return *reset(), failed
            except Exception as e:
                if not self.config.restart_failed_sub_environments:
                    raise
                self._replace_env(index, e, "reset")
        try:
            return *reset(), MAX_RESET_ATTEMPTS - 1
        except Exception as e:
            raise RuntimeError(
                f"env {self.config.env!r} failed to reset (seed {seed}) {MAX_RESET_ATTEMPTS} times in a row, "
                f"last with {type(e).__name__}: {e}"
            ) from e

    def _step(self, index: int, action: str | None) -> tuple[Any, float, bool, bool, dict]:
        """``env.step(action)``; a failing env is replaced and its episode truncated with reward 0, not
        won, and ``info["env_error"]`` saying why (so it is neither dropped nor counted as a success). The
        fault is the env's, not the model's: the action counts as valid if it parsed (no penalty then)."""
        try:
            return call_with_timeout(self.envs[index].step, self._timeout, action)
        except Exception as e:
            if not self.config.restart_failed_sub_environments:
                raise
            self._replace_env(index, e, "step")
            return "", 0.0, False, True, {"won": False, ENV_ERROR: repr(e)}

    def _start_episode(self, index: int, seed: int, group_id: str) -> SingleAgentEpisode:
        observation, info, faults = self._reset(index, seed)
        env = self.envs[index]
        episode = SingleAgentEpisode(observations=[observation], infos=[info], len_lookback_buffer=0)
        template = self.config.prompt_template or env.prompt_template
        episode.custom_data.update(
            {GROUP_ID: group_id, SEED: seed, ENV_FAULTS: faults},
            **prompt_fields(self.config, env, template, getattr(env, "task_description", "")),
        )
        return episode

    def sample(
        self,
        *,
        seeds: list[int] | None = None,
        explore: bool = True,
        sampling: dict[str, Any] | None = None,
        group_size: int | None = None,
        record_metrics: bool = True,
        **kwargs: Any,
    ) -> list[SingleAgentEpisode]:
        """One group rollout. ``seeds``: one per group (default: fresh random seeds for ``num_groups``);
        ``group_size`` overrides the config's (evaluation plays each seed once); ``explore=False`` is greedy.
        ``record_metrics=False`` (held-out evaluation) leaves the training metrics and counters alone: its
        steps and faults are not the next training iteration's (nor do they advance an lr schedule)."""
        params, episodes = begin_group_rollout(self, seeds, explore, sampling, group_size)
        raw_format = [getattr(env, "action_format", "tags") == "raw" for env in self.envs]
        generated = 0
        t_gen = 0.0
        for step in range(self.config.max_episode_steps):
            active = [i for i, ep in enumerate(episodes) if not ep.is_done]
            if not active:
                break
            batch = self._env_to_module(
                rl_module=self.module,
                batch={},
                episodes=[episodes[i] for i in active],
                explore=explore,
                shared_data={},
                metrics=self.metrics,
            )
            prompts, images = batch[PROMPT_IDS], None
            start = time.perf_counter()
            if self.vision:
                prompts, images = self._image_prompts(batch)
                outputs = self.backend.generate(prompts, params, images=images)
            else:
                outputs = self.backend.generate(prompts, params)
            t_gen += time.perf_counter() - start
            for j, (i, prompt_ids, out) in enumerate(zip(active, prompts, outputs, strict=True)):
                generated += len(out.token_ids)
                reply = self.config.response_prefix + out.text
                action = reply if raw_format[i] else parse_action(reply)
                anchor = anchor_of(episodes[i].get_observations(-1), episodes[i].get_infos(-1) or {})
                observation, reward, terminated, truncated, info = self._step(i, action)
                episodes[i].custom_data[ENV_FAULTS] += ENV_ERROR in info
                valid = bool(info.get("is_action_valid", action is not None)) and action is not None
                last = step == self.config.max_episode_steps - 1
                extra = {
                    PROMPT: prompt_ids,
                    RESPONSE: out.token_ids,
                    OLD_LOGP: out.logprobs,
                    RESPONSE_TEXT: out.text,
                    ANCHOR: anchor,
                    VALID: valid,
                    ENV_REWARD: float(reward),
                    FINISH_REASON: out.finish_reason,
                }
                if images is not None:
                    extra[NUM_IMAGES] = len(images[j])
                episodes[i].add_env_step(
                    observation,
                    action,
                    float(reward) - reward_penalty(self.config, valid),
                    infos=info,
                    terminated=bool(terminated),
                    truncated=bool(truncated or (last and not terminated)),
                    extra_model_outputs=extra,
                )
        if record_metrics:
            self._log_rollout_metrics(episodes, generated, t_gen)
        return episodes

    def _image_prompts(self, batch: dict[str, Any]) -> tuple[list[list[int]], list[list[np.ndarray]]]:
        """Each prompt with its image placeholder expanded to the image's patch tokens, and its images: the
        observation's image when the prompt builder put a placeholder in (at most one per prompt)."""
        model = self.module.model
        token = model.config.image_token_id
        prompts, images = [], []
        for prompt, image in zip(batch[PROMPT_IDS], batch.get(IMAGES) or [None] * len(batch[PROMPT_IDS]), strict=True):
            row = [image] if image is not None and token in prompt else []
            prompts.append(expand_prompt(model, prompt, row))
            images.append(row)
        return prompts, images

    def _log_rollout_metrics(self, episodes: list[SingleAgentEpisode], generated: int, t_gen: float) -> None:
        steps = sum(len(ep) for ep in episodes)
        self.num_env_steps_sampled_lifetime += steps
        valid = [v for ep in episodes for v in ep.get_extra_model_outputs(VALID)]
        lengths = [len(r) for ep in episodes for r in ep.get_extra_model_outputs(RESPONSE)]
        prompts = [len(p) for ep in episodes for p in ep.get_extra_model_outputs(PROMPT)]
        log = self.metrics.log_value
        log(SUCCESS_RATE, float(np.mean([episode_success(ep) for ep in episodes])), window=1)
        log(EPISODE_RETURN_MEAN, float(np.mean([ep.get_return() for ep in episodes])), window=1)
        log(EPISODE_LEN_MEAN, float(np.mean([len(ep) for ep in episodes])), window=1)
        log(VALID_ACTION_RATE, float(np.mean(valid)) if valid else 0.0, window=1)
        log(RESPONSE_LENGTH_MEAN, float(np.mean(lengths)) if lengths else 0.0, window=1)
        # Model-output faults: responses cut at max_new_tokens, empty ones and ones with bytes that are not
        # UTF-8 (decoded as U+FFFD); without a parseable action they are invalid actions too.
        finish = [f for ep in episodes for f in ep.get_extra_model_outputs(FINISH_REASON)]
        texts = [t for ep in episodes for t in ep.get_extra_model_outputs(RESPONSE_TEXT)]
        log(TRUNCATED_RESPONSE_RATE, float(np.mean([f == "length" for f in finish])) if finish else 0.0, window=1)
        log(EMPTY_RESPONSE_RATE, float(np.mean([not t.strip() for t in texts])) if texts else 0.0, window=1)
        log(UNDECODABLE_RESPONSE_RATE, float(np.mean(["\ufffd" in t for t in texts])) if texts else 0.0, window=1)
        log(PROMPT_LENGTH_MEAN, float(np.mean(prompts)) if prompts else 0.0, window=1)
        log(TOKENS_PER_S, generated / t_gen if t_gen > 0 else 0.0, window=1)
        log(NUM_ENV_STEPS, steps, reduce="sum")
        log(NUM_ENV_FAULTS, sum(ep.custom_data[ENV_FAULTS] for ep in episodes), reduce="sum")
        log(NUM_ENV_STEPS_LIFETIME, steps, reduce="lifetime_sum")

    def get_metrics(self) -> dict:
        return self.metrics.reduce()

    # --- state (weights) -----------------------------------------------------------------------------

    def get_state(self, components=None, *, not_components=None, **kwargs: Any) -> dict:
        """Counters and the seed RNG; module weights only when asked for by name (checkpoints leave
        them out: the Learner's copy is the one saved, and restoring syncs it back here)."""
        state: dict[str, Any] = {
            NUM_ENV_STEPS_LIFETIME: self.num_env_steps_sampled_lifetime,
            "rng": self._rng.bit_generator.state,
            "num_rollouts": self._num_rollouts,
        }
        if components is not None and self._check_component(COMPONENT_RL_MODULE, components, not_components):
            state[COMPONENT_RL_MODULE] = self.module.get_state(inference_only=True)
        return state

    def set_state(self, state: dict) -> None:
        module_state = module_weights(state)
        if module_state is not None:
            if DEFAULT_MODULE_ID in module_state:  # a MultiRLModule state from the LearnerGroup
                module_state = module_state[DEFAULT_MODULE_ID]
            self.module.set_state(module_state)
            self.backend.update_weights(module_state)
        self.num_env_steps_sampled_lifetime = state.get(NUM_ENV_STEPS_LIFETIME, self.num_env_steps_sampled_lifetime)
        if "rng" in state:
            self._rng.bit_generator.state = state["rng"]
        self._num_rollouts = state.get("num_rollouts", self._num_rollouts)

    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    def get_checkpointable_components(self):
        return []

    @staticmethod
    def _check_component(name: str, components, not_components) -> bool:
        def as_set(value):
            return {value} if isinstance(value, str) else set(value or ())

        return (components is None or name in as_set(components)) and name not in as_set(not_components)

    def stop(self) -> None:
        for env in self.envs:
            env.close()

