"""The LLM EnvRunner: steps a batch of group environments in lock step with batched generation.

Each call of :meth:`LLMEnvRunner.sample` plays one rollout: ``num_groups`` groups of ``group_size`` envs,
all envs of a group reset with the same seed (group environments). At every step the env-to-module
connector pipeline (memory + prompt builder) turns each active episode into prompt token ids, the
generation backend answers all of them in one call, the action is parsed out of ``<action>...</action>``
and the envs step. Episodes are RLlib ``SingleAgentEpisode``s; per step they record (as
``extra_model_outputs``) the prompt and response token ids, the old log-probs, the env's anchor
observation and validity, and in ``custom_data`` their group id.

A vision-language policy (:func:`~rllib_llm.core.vision.is_vision_model`) samples through
:class:`~rllib_llm.core.vision.HFVisionBackend` with each prompt's image (``batch["images"]``, the current
observation's); its steps record the prompt ids with the image placeholder expanded to the image's patch
tokens and ``num_images`` (0 or 1), and the Learner re-reads the image from the episode's observation.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib_llm.columns import (
    GENERATIONS,
    GROUP_ID,
    IMAGES,
    INFO_ACTION_VALID,
    NUM_IMAGES,
    PROMPT_IDS,
    SAMPLING_PARAMS,
    SEED,
    VALID,
)
from rllib_llm.core.group_env_runner import GroupEnvRunner, RolloutCounters, prompt_fields, step_record
from rllib_llm.core.models import ModelSpec
from rllib_llm.core.vision import HFVisionBackend, expand_prompt, is_vision_model
from rllib_llm.envs.registry import make_env
from rllib_llm.generation import GenerationBackend, SamplingParams, make_backend

logger = logging.getLogger(__name__)


class LLMEnvRunner(GroupEnvRunner):
    """EnvRunner for LLM agents (see module docstring). Configured by an :class:`LLMConfig`."""

    def __init__(self, *, config, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self._env_to_module = self.config.build_env_to_module_connector(env=self.env, spaces=self.get_spaces())
        self.vision = is_vision_model(self.module.model)
        self.module.generation_backend = self._backend_for(self.module, self.make_backend)

    @property
    def backend(self) -> GenerationBackend:
        """The module's generation backend (what its forward_exploration samples with); assignable."""
        return self.module.generation_backend

    @backend.setter
    def backend(self, backend: GenerationBackend) -> None:
        self.module.generation_backend = backend

    # --- construction --------------------------------------------------------------------------------

    def _new_env(self) -> gym.Env:
        return make_env(self.config.env, self.config.env_config)

    def make_module(self) -> None:
        """Builds the inference-only module on RLlib's device (:meth:`module_device`), in the model's
        ``inference_dtype``; the generation backend runs wherever the module is."""
        spec = self.config.get_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()
        dtype = ModelSpec.from_any(self.config.llm_model).inference_torch_dtype
        self.module.to(device=self.module_device(), dtype=dtype)

    def make_backend(self) -> GenerationBackend:
        """The configured backend; a vision-language model samples through :class:`HFVisionBackend`.
        Called once after :meth:`make_module` (on the local runner of a run with remote runners, when it
        first generates); override to generate elsewhere (the prompt agent plays an OpenAI-compatible API
        this way)."""
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

    def _modules(self) -> dict[str, Any]:
        return {DEFAULT_MODULE_ID: self.module}

    def _module_state(self, components: Any) -> dict:
        return self.module.get_state(inference_only=True)

    def _module_states(self, weights: dict) -> dict[str, dict]:
        """A MultiRLModule state from the LearnerGroup ({module id: state}), or this module's own state."""
        return weights if DEFAULT_MODULE_ID in weights else {DEFAULT_MODULE_ID: weights}

    # --- sampling ------------------------------------------------------------------------------------

    def _new_episode(self, index: int, seed: int, group_id: str, reset: tuple[Any, dict]):
        observation, info = reset
        env = self.envs[index]
        episode = SingleAgentEpisode(observations=[observation], infos=[info], len_lookback_buffer=0)
        template = self.config.prompt_template or env.prompt_template
        episode.custom_data.update(
            {GROUP_ID: group_id, SEED: seed},
            **prompt_fields(self.config, env, template, getattr(env, "task_description", "")),
        )
        return episode

    def _play(self, episodes: list[SingleAgentEpisode], params: SamplingParams, explore: bool) -> RolloutCounters:
        """Lock-step play: prompts of every active episode (env-to-module pipeline), one generate call,
        the parsed actions to the envs, the step recorded with its ``extra_model_outputs``."""
        counters = RolloutCounters()
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
            if self.vision:
                batch[PROMPT_IDS], batch[IMAGES] = self._image_prompts(batch)
            batch[SAMPLING_PARAMS] = params
            prompts, images = batch[PROMPT_IDS], batch[IMAGES] if self.vision else None
            start = time.perf_counter()
            forward = self.module.forward_exploration if explore else self.module.forward_inference
            outputs = forward(batch)[GENERATIONS]
            counters.generate_seconds += time.perf_counter() - start
            counters.generate_calls += 1
            actions = self._actions([episodes[i] for i in active], outputs, explore)
            for j, (i, prompt_ids, out, action) in enumerate(zip(active, prompts, outputs, actions, strict=True)):
                counters.generated_tokens += len(out.token_ids)
                episode = episodes[i]
                record = step_record(prompt_ids, out, episode)
                result, error = self._env_step(i, episode, action)
                if error is None:
                    observation, reward, terminated, truncated, info = result
                else:
                    observation, reward, terminated, truncated = "", 0.0, False, True
                    info = self._step_failure_info(error)
                valid = bool(info.get(INFO_ACTION_VALID, action is not None)) and action is not None
                last = step == self.config.max_episode_steps - 1
                extra = {**record, VALID: valid}
                if images is not None:
                    extra[NUM_IMAGES] = len(images[j])
                episode.add_env_step(
                    observation,
                    action,
                    float(reward),
                    infos=info,
                    terminated=bool(terminated),
                    truncated=bool(truncated or (last and not terminated)),
                    extra_model_outputs=extra,
                )
                self._episode_callback("on_episode_step", i, episode)
        return counters

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
