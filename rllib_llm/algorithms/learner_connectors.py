"""Learner connector pieces: episodes -> flat steps -> advantages -> a padded token batch.

The pipeline (built by :meth:`LLMConfig.build_learner_connector`) is
``FlattenSteps -> [OverlongPenalty] -> ComputeAdvantages -> [user pieces] -> StepsToTokenBatch ->
NumpyToTensor``. The pieces pass a :class:`Steps` record through ``shared_data["steps"]``.

Anchors arrive as Python objects; they are factorized into dense integer ids exactly once, here, in one
O(n) pass (:func:`~rllib_llm.algorithms.advantages.factorize`), so every estimator works on int arrays.
Estimators that need the model (values for GAE, reference log-probs for REINFORCE++'s KL reward) declare
it when registered; :class:`ComputeAdvantages` then runs those forward passes (no grad) before them.

Vision-language steps (recorded with ``num_images``) also carry the image their prompt showed, re-read from
the episode's observation at that step (``Steps.images``); the token batch then adds the ``images`` /
``image_sizes`` columns (:func:`rllib_llm.vision.image_columns`), which minibatches slice by row like the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_llm.algorithms.advantages import (
    batch_normalize,
    discounted_returns,
    factorize_steps,
    gae_advantages,
    gigpo_advantages,
    grpo_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
    similarity_step_groups,
    uninformative_group_fraction,
)
from rllib_llm.algorithms.losses import kl_penalty
from rllib_llm.columns import (
    ACTION_LOGP,
    ADVANTAGES,
    ANCHOR,
    ATTENTION_MASK,
    GROUP_ID,
    INPUT_IDS,
    NUM_IMAGES,
    OLD_VALUES,
    PROMPT,
    RESPONSE,
    RESPONSE_MASK,
    VALID,
    VALUE_TARGETS,
)
from rllib_llm.vision import image_columns

STEPS = "steps"
#: Learner metric: the share of episode groups whose advantages are all ~0 (see uninformative_group_fraction).
UNINFORMATIVE_GROUP_FRACTION = "uninformative_group_fraction"
# Extra training columns (per step) written next to the token batch.
# What estimators may need from the model (keys of Steps.extras).
NEED_VALUES = "values"
NEED_REF_LOGP = "ref_logp"


@dataclass
class Steps:
    """Every env step of a batch of episodes, flattened in episode order (the estimators' input)."""

    rewards: np.ndarray
    episode_index: np.ndarray
    group_index: np.ndarray
    anchor_index: np.ndarray
    prompts: list[list[int]]
    responses: list[list[int]]
    old_logp: list[list[float]]
    advantages: np.ndarray | None = None
    #: Intermediate results (model outputs, raw anchors, the padded token batch).
    extras: dict[str, Any] = field(default_factory=dict)
    #: Extra per-step training columns (e.g. value targets) that StepsToTokenBatch adds to the batch.
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    #: Vision-language steps: the image each prompt showed (None: a text-only prompt); None for text runs.
    images: list[np.ndarray | None] | None = None

    def __len__(self) -> int:
        return len(self.rewards)


def flatten_episodes(episodes: list) -> Steps:
    """Builds :class:`Steps` from RLlib episodes recorded by :class:`~rllib_llm.env_runner.LLMEnvRunner`."""
    rewards, anchors, prompts, responses, old_logp, valid = [], [], [], [], [], []
    for episode in episodes:
        rewards.extend(episode.get_rewards())
        anchors.extend(episode.get_extra_model_outputs(ANCHOR))
        prompts.extend(episode.get_extra_model_outputs(PROMPT))
        responses.extend(episode.get_extra_model_outputs(RESPONSE))
        old_logp.extend(episode.get_extra_model_outputs(ACTION_LOGP))
        valid.extend(episode.get_extra_model_outputs(VALID) if VALID in episode.extra_model_outputs else [True] * len(episode))
    episode_index, group_index, anchor_index = factorize_steps(
        [episode.custom_data[GROUP_ID] for episode in episodes], [len(episode) for episode in episodes], anchors
    )
    vision = any(NUM_IMAGES in episode.extra_model_outputs for episode in episodes)
    return Steps(
        rewards=np.asarray(rewards, dtype=np.float64),
        episode_index=episode_index,
        group_index=group_index,
        anchor_index=anchor_index,
        prompts=prompts,
        responses=responses,
        old_logp=old_logp,
        extras={ANCHOR: anchors, VALID: np.asarray(valid, dtype=bool)},
        images=[img for episode in episodes for img in step_images(episode)] if vision else None,
    )


def step_images(episode: Any) -> list[np.ndarray | None]:
    """The image each step's prompt showed: the observation the step acted on (episodes keep it anyway, so
    the pixels are not stored twice), None where the prompt had no image."""
    if NUM_IMAGES not in episode.extra_model_outputs:
        return [None] * len(episode)
    counts = episode.get_extra_model_outputs(NUM_IMAGES)
    if any(n > 1 for n in counts):
        raise NotImplementedError("Vision-language steps with more than one image are not supported yet.")
    return [episode.get_observations(t)["image"] if n else None for t, n in enumerate(counts)]


# --- the token batch and no-grad model passes over it -------------------------------------------------


def pad_token_batch(steps: Steps, pad_id: int) -> dict[str, np.ndarray]:
    """Left-padded prompts + right-padded responses, as the RLModule's forward_train expects (plus the image
    columns of vision-language steps)."""
    n = len(steps)
    width_p = max((len(p) for p in steps.prompts), default=1)
    width_r = max(max((len(r) for r in steps.responses), default=1), 1)
    input_ids = np.full((n, width_p + width_r), pad_id, dtype=np.int64)
    attention_mask = np.zeros((n, width_p + width_r), dtype=np.int64)
    response_mask = np.zeros((n, width_r), dtype=np.float32)
    old_logp = np.zeros((n, width_r), dtype=np.float32)
    for i, (prompt, response, logp) in enumerate(zip(steps.prompts, steps.responses, steps.old_logp, strict=True)):
        input_ids[i, width_p - len(prompt) : width_p] = prompt
        attention_mask[i, width_p - len(prompt) : width_p] = 1
        input_ids[i, width_p : width_p + len(response)] = response
        attention_mask[i, width_p : width_p + len(response)] = 1
        response_mask[i, : len(response)] = 1.0
        old_logp[i, : len(logp)] = logp
    batch = {INPUT_IDS: input_ids, ATTENTION_MASK: attention_mask, RESPONSE_MASK: response_mask, ACTION_LOGP: old_logp}
    if steps.images is not None:
        batch.update(image_columns(steps.images))
    return batch


def token_batch(steps: Steps, pad_id: int) -> dict[str, np.ndarray]:
    """:func:`pad_token_batch`, built once per batch and cached on the steps."""
    if "token_batch" not in steps.extras:
        steps.extras["token_batch"] = pad_token_batch(steps, pad_id)
    return steps.extras["token_batch"]


def _default_module(rl_module: Any) -> Any:
    module = rl_module[DEFAULT_MODULE_ID] if DEFAULT_MODULE_ID in rl_module else rl_module
    return module.unwrapped() if hasattr(module, "unwrapped") else module


def module_pass(module: Any, steps: Steps, fn: Callable[[dict], torch.Tensor], chunk_size: int = 32) -> np.ndarray:
    """``fn`` (a no-grad [B, R] model output) over the token batch in chunks of rows, as float64 numpy."""
    batch = token_batch(steps, module.tokenizer.pad_token_id)
    device = next(module.parameters()).device
    outputs = []
    with torch.no_grad():
        for start in range(0, len(steps), chunk_size):
            chunk = {k: torch.as_tensor(v[start : start + chunk_size], device=device) for k, v in batch.items()}
            outputs.append(fn(chunk).double().cpu().numpy())
    width = batch[RESPONSE_MASK].shape[1]
    return np.concatenate(outputs) if outputs else np.zeros((0, width))


#: What an estimator may need -> how to compute it from (module, steps).
MODULE_OUTPUTS: dict[str, Callable[[Any, Steps], np.ndarray]] = {
    NEED_VALUES: lambda module, steps: module_pass(module, steps, module.values),
    NEED_REF_LOGP: lambda module, steps: module_pass(module, steps, module.reference_logprobs),
}


# --- estimators: fn(steps, config) -> per-step [N] or per-token [N, R] advantages ----------------------


def _step_anchor_ids(steps: Steps, config: Any) -> np.ndarray:
    """Anchor ids for GiGPO's step groups: exact ids, or clusters of similar anchors within each group."""
    if getattr(config, "step_grouping", "exact") == "similarity":
        return similarity_step_groups(steps.group_index, steps.extras[ANCHOR], config.similarity_threshold)
    return steps.anchor_index


def _row_offset(steps: Steps, config: Any) -> np.ndarray | None:
    """verl-agent's invalid-action penalty (``invalid_action_penalty_mode="row"``): minus the penalty on each
    invalid step's own score row; None in "reward" mode (the env runner put it in the step reward)."""
    if getattr(config, "invalid_action_penalty_mode", "reward") != "row":
        return None
    return -config.invalid_action_penalty * (~steps.extras[VALID]).astype(np.float64)


def _grpo(steps: Steps, config: Any) -> np.ndarray:
    return grpo_advantages(
        steps.rewards, steps.episode_index, steps.group_index, config.advantage_norm,
        over_steps=getattr(config, "group_stats_over_steps", False), row_offset=_row_offset(steps, config),
    )


def _gigpo(steps: Steps, config: Any) -> np.ndarray:
    return gigpo_advantages(
        steps.rewards,
        steps.episode_index,
        steps.group_index,
        _step_anchor_ids(steps, config),
        gamma=config.gamma,
        omega=config.step_advantage_weight,
        mode=config.advantage_norm,
        over_steps=getattr(config, "group_stats_over_steps", False),
        across_groups=getattr(config, "step_grouping", "exact") == "exact_across_groups",
        row_offset=_row_offset(steps, config),
    )


def _rloo(steps: Steps, config: Any) -> np.ndarray:
    return rloo_advantages(
        steps.rewards, steps.episode_index, steps.group_index,
        over_steps=getattr(config, "group_stats_over_steps", False), row_offset=_row_offset(steps, config),
    )


def _gae(steps: Steps, config: Any) -> np.ndarray:
    """Turn-level GAE; the step's value is the critic's value at its last prompt token."""
    values = steps.extras[NEED_VALUES][:, 0]
    advantages, targets = gae_advantages(steps.rewards, values, steps.episode_index, config.gamma, config.lambda_)
    steps.columns[OLD_VALUES] = values.astype(np.float32)
    steps.columns[VALUE_TARGETS] = targets.astype(np.float32)
    return batch_normalize(advantages, config.advantage_norm)


def _reinforce_pp(steps: Steps, config: Any) -> np.ndarray:
    """REINFORCE++: discounted step returns on each step's last token, KL to the reference on every token."""
    mask = steps.extras["token_batch"][RESPONSE_MASK]
    kl = np.zeros(mask.shape)
    if config.kl_reward_coeff > 0:
        old_logp = torch.as_tensor(steps.extras["token_batch"][ACTION_LOGP], dtype=torch.float64)
        ref_logp = torch.as_tensor(steps.extras[NEED_REF_LOGP])
        kl = kl_penalty(old_logp, ref_logp, config.kl_reward_estimator).numpy()
    step_returns = discounted_returns(steps.rewards, steps.episode_index, config.gamma)
    return reinforce_pp_advantages(step_returns, kl, mask, config.kl_reward_coeff)[0]


#: Name -> function(steps, config) -> advantages. Register more with :func:`register_estimator`.
ADVANTAGE_ESTIMATORS: dict[str, Callable[[Steps, Any], np.ndarray]] = {
    "grpo": _grpo,
    "gigpo": _gigpo,
    "rloo": _rloo,
    "gae": _gae,
    "reinforce_pp": _reinforce_pp,
}
#: Name -> what the estimator needs from the model (keys of :data:`MODULE_OUTPUTS`), or a function of the
#: config returning them (REINFORCE++ needs the reference only with a KL reward).
ESTIMATOR_NEEDS: dict[str, tuple[str, ...] | Callable[[Any], tuple[str, ...]]] = {
    "gae": (NEED_VALUES,),
    "reinforce_pp": lambda config: (NEED_REF_LOGP,) if config.kl_reward_coeff > 0 else (),
}


def register_estimator(
    name: str, fn: Callable[[Steps, Any], np.ndarray], needs: tuple[str, ...] | Callable[[Any], tuple[str, ...]] = ()
) -> None:
    ADVANTAGE_ESTIMATORS[name] = fn
    ESTIMATOR_NEEDS[name] = needs


def estimator_needs(config: Any) -> tuple[str, ...]:
    needs = ESTIMATOR_NEEDS.get(config.advantage_estimator, ())
    return tuple(needs(config) if callable(needs) else needs)


# --- connector pieces ------------------------------------------------------------------------------------


class FlattenSteps(ConnectorV2):
    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        shared_data[STEPS] = flatten_episodes(episodes)
        return batch


def overlong_penalty(response_lengths: np.ndarray, max_length: int, buffer: int, factor: float = 1.0) -> np.ndarray:
    """DAPO's soft overlong punishment: 0 up to ``max_length - buffer`` tokens, then linearly down to
    ``-factor`` at ``max_length`` (and below, for longer responses)."""
    excess = np.asarray(response_lengths, dtype=np.float64) - (max_length - buffer)
    return -factor * np.clip(excess, 0.0, None) / buffer


class OverlongPenalty(ConnectorV2):
    """Adds :func:`overlong_penalty` of each step's response to its reward, before the advantages."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, config: Any, **kwargs: Any) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.max_length = config.sampling["max_new_tokens"]
        self.buffer = config.overlong_buffer_len
        self.factor = config.overlong_penalty_factor

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        steps: Steps = shared_data[STEPS]
        penalty = overlong_penalty([len(r) for r in steps.responses], self.max_length, self.buffer, self.factor)
        steps.rewards = steps.rewards + penalty
        if metrics is not None and len(steps):
            metrics.log_value("overlong_penalty_mean", float(penalty.mean()), window=1)
        return batch


class ComputeAdvantages(ConnectorV2):
    """Runs the configured advantage estimator over the flat steps (after the model passes it needs)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, config: Any, **kwargs: Any) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        if config.advantage_estimator not in ADVANTAGE_ESTIMATORS:
            raise ValueError(
                f"Unknown advantage_estimator {config.advantage_estimator!r}; choose one of {sorted(ADVANTAGE_ESTIMATORS)}"
            )
        self.config = config
        self.estimator = ADVANTAGE_ESTIMATORS[config.advantage_estimator]
        self.needs = estimator_needs(config)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        steps: Steps = shared_data[STEPS]
        module = _default_module(rl_module)
        token_batch(steps, module.tokenizer.pad_token_id)
        for need in self.needs:
            steps.extras[need] = MODULE_OUTPUTS[need](module, steps)
        steps.advantages = np.asarray(self.estimator(steps, self.config), dtype=np.float32)
        if metrics is not None and len(steps):
            metrics.log_value("advantage_mean", float(steps.advantages.mean()), window=1)
            metrics.log_value("advantage_abs_mean", float(np.abs(steps.advantages).mean()), window=1)
            if steps.advantages.ndim == 1:
                fraction = uninformative_group_fraction(steps.advantages, steps.group_index)
                metrics.log_value(UNINFORMATIVE_GROUP_FRACTION, fraction, window=1)
        return batch


class StepsToTokenBatch(ConnectorV2):
    """Writes the padded token batch plus advantages (and any extra columns) for the default module."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        steps: Steps = shared_data[STEPS]
        columns = dict(token_batch(steps, _default_module(rl_module).tokenizer.pad_token_id))
        columns[ADVANTAGES] = steps.advantages
        columns.update(steps.columns)
        batch[DEFAULT_MODULE_ID] = columns
        return batch
