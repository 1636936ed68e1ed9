"""Learner connector pieces: episodes -> step columns -> reward shaping -> advantages -> a padded token batch.

The pipeline (built by :meth:`LLMConfig.build_learner_connector`, and by the multi-agent config with
:class:`~rllib_llm.multi_agent.learner_connectors.FlattenAgentSteps` first) is
``FlattenSteps -> [InvalidActionPenalty] -> [OverlongPenalty] -> ComputeAdvantages -> [user pieces] ->
[ReferenceLogProbs] -> [ProximalLogProbs] -> StepsToTokenBatch -> NumpyToTensor``. Every piece reads and writes the batch, as RLlib's own learner
connectors do: ``batch[module_id]`` holds the module's *step columns* (one row per env step, in episode
order; names in :mod:`rllib_llm.columns`, section 5) until :class:`StepsToTokenBatch` turns them into the
padded token columns the RLModule's ``forward_train`` and the loss read. A user piece between the advantages
and the token batch sees plain columns, e.g. ``batch[module_id][ADVANTAGES]``.

Reward shaping lives here, in one layer: the invalid-action penalty (``invalid_action_penalty_mode="reward"``)
and DAPO's overlong penalty are added to the ``rewards`` column; episodes keep the env's own rewards.

Anchors arrive as Python objects; they are factorized into dense integer ids exactly once, here, in one
O(n) pass (:func:`~rllib_llm.algorithms.advantages.factorize`), so every estimator works on int arrays.
Estimators that need the model (values for GAE, reference log-probs for REINFORCE++'s KL reward) declare
it when registered; :class:`ComputeAdvantages` then runs those forward passes (no grad) before them.

Vision-language steps (recorded with ``num_images``) also carry the image their prompt showed, re-read from
the episode's observation at that step (the ``images`` step column); the token batch then holds the
``images`` / ``image_sizes`` arrays (:func:`rllib_llm.core.vision.image_columns`), which minibatches slice by row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_llm.algorithms.advantages import (
    factorize_steps,
    uninformative_group_fraction,
)
from rllib_llm.columns import (
    ACTION_LOGP,
    ADVANTAGES,
    AGENT_ID,
    ANCHOR,
    ANCHOR_INDEX,
    ATTENTION_MASK,
    EPISODE_INDEX,
    GROUP_ID,
    GROUP_INDEX,
    IMAGES,
    INPUT_IDS,
    NUM_IMAGES,
    PROMPT,
    PROX_LOGP,
    REF_LOGP,
    RESPONSE,
    RESPONSE_MASK,
    REWARDS,
    VALID,
)
from rllib_llm.core.vision import image_columns
from rllib_llm.metrics import UNINFORMATIVE_GROUP_FRACTION
from rllib_llm.registry import Registry

#: What estimators may need from the model, computed as step columns of these names before they run.
NEED_VALUES = "values"
NEED_REF_LOGP = REF_LOGP  # the Learner's column too (ReferenceLogProbs keeps it)

#: Step columns: {name: one value per step}; numpy arrays, or lists for token ids, anchors and images.
StepColumns = dict[str, Any]


def num_rows(columns: StepColumns) -> int:
    return len(columns[REWARDS])


def step_columns(episodes: list) -> StepColumns:
    """The step columns of RLlib episodes recorded by the LLM EnvRunners (episode, group and anchor ids
    factorized here, over these episodes)."""
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
    columns: StepColumns = {
        REWARDS: np.asarray(rewards, dtype=np.float64),
        EPISODE_INDEX: episode_index,
        GROUP_INDEX: group_index,
        ANCHOR_INDEX: anchor_index,
        ANCHOR: anchors,
        VALID: np.asarray(valid, dtype=bool),
        PROMPT: prompts,
        RESPONSE: responses,
        ACTION_LOGP: old_logp,
    }
    if any(NUM_IMAGES in episode.extra_model_outputs for episode in episodes):
        columns[IMAGES] = [img for episode in episodes for img in step_images(episode)]
    return columns


def step_images(episode: Any) -> list[np.ndarray | None]:
    """The image each step's prompt showed: the observation the step acted on (episodes keep it anyway, so
    the pixels are not stored twice), None where the prompt had no image."""
    if NUM_IMAGES not in episode.extra_model_outputs:
        return [None] * len(episode)
    counts = episode.get_extra_model_outputs(NUM_IMAGES)
    if any(n > 1 for n in counts):
        raise NotImplementedError("Vision-language steps with more than one image are not supported yet.")
    return [episode.get_observations(t)["image"] if n else None for t, n in enumerate(counts)]


def select_rows(columns: StepColumns, rows: np.ndarray) -> StepColumns:
    """The given rows of every column (arrays by fancy indexing, lists by picking)."""
    rows = np.asarray(rows, dtype=np.int64)
    return {
        key: value[rows] if isinstance(value, np.ndarray) else [value[i] for i in rows]
        for key, value in columns.items()
    }


def concat_columns(parts: Sequence[StepColumns]) -> StepColumns:
    """The rows of ``parts`` one after another (the columns every part has)."""
    if len(parts) == 1:
        return dict(parts[0])
    keys = [k for k in parts[0] if all(k in part for part in parts)]
    return {
        key: np.concatenate([part[key] for part in parts])
        if isinstance(parts[0][key], np.ndarray)
        else [value for part in parts for value in part[key]]
        for key in keys
    }


# --- the token batch and no-grad model passes over it -------------------------------------------------


def pad_token_batch(columns: StepColumns, pad_id: int) -> dict[str, np.ndarray]:
    """Left-padded prompts + right-padded responses of the step columns, as the RLModule's forward_train
    expects, with the sampler's log-probs padded alike (plus the image columns of vision-language steps)."""
    prompts, responses, logps = columns[PROMPT], columns[RESPONSE], columns[ACTION_LOGP]
    n = len(prompts)
    width_p = max((len(p) for p in prompts), default=1)
    width_r = max(max((len(r) for r in responses), default=1), 1)
    input_ids = np.full((n, width_p + width_r), pad_id, dtype=np.int64)
    attention_mask = np.zeros((n, width_p + width_r), dtype=np.int64)
    response_mask = np.zeros((n, width_r), dtype=np.float32)
    old_logp = np.zeros((n, width_r), dtype=np.float32)
    for i, (prompt, response, logp) in enumerate(zip(prompts, responses, logps, strict=True)):
        input_ids[i, width_p - len(prompt) : width_p] = prompt
        attention_mask[i, width_p - len(prompt) : width_p] = 1
        input_ids[i, width_p : width_p + len(response)] = response
        attention_mask[i, width_p : width_p + len(response)] = 1
        response_mask[i, : len(response)] = 1.0
        old_logp[i, : len(logp)] = logp
    batch = {INPUT_IDS: input_ids, ATTENTION_MASK: attention_mask, RESPONSE_MASK: response_mask, ACTION_LOGP: old_logp}
    if IMAGES in columns:
        batch.update(image_columns(columns[IMAGES]))
    return batch


def learner_module(rl_module: Any, module_id: str) -> Any:
    """The LLMRLModule of ``module_id`` in the Learner's MultiRLModule (unwrapped from DDP)."""
    if module_id not in rl_module:
        raise ValueError(f"Steps of module {module_id!r}, which the Learner does not have ({list(rl_module.keys())})")
    module = rl_module[module_id]
    return module.unwrapped() if hasattr(module, "unwrapped") else module


def module_pass(
    module: Any, columns: StepColumns, fn: Callable[[dict], torch.Tensor], chunk_size: int | None = 32
) -> np.ndarray:
    """``fn`` (a no-grad [B, R] model output) over the steps' token batch in chunks of ``chunk_size`` rows
    (None: one pass), as float64, with the module in eval mode: these columns (reference, proximal, value
    estimates) are the policy's numbers, not one dropout sample of them (``lora_dropout > 0`` would make every
    pass differ; TRL's ``disable_dropout`` exists for the same reason). The module's mode is restored after."""
    batch = pad_token_batch(columns, module.tokenizer.pad_token_id)
    device = next(module.parameters()).device
    outputs = []
    rows = num_rows(columns)
    chunk_size = chunk_size or max(rows, 1)
    training = module.training
    module.train(False)
    try:
        with torch.no_grad():
            for start in range(0, rows, chunk_size):
                chunk = {k: torch.as_tensor(v[start : start + chunk_size], device=device) for k, v in batch.items()}
                outputs.append(fn(chunk).double().cpu().numpy())
    finally:
        module.train(training)
    width = batch[RESPONSE_MASK].shape[1]
    return np.concatenate(outputs) if outputs else np.zeros((0, width))


#: What an estimator may need -> how to compute it from (module, step columns, rows per pass).
MODULE_OUTPUTS: dict[str, Callable[[Any, StepColumns, int | None], np.ndarray]] = {
    NEED_VALUES: lambda module, columns, rows: module_pass(module, columns, module.values, rows),
    NEED_REF_LOGP: lambda module, columns, rows: module_pass(module, columns, module.reference_logprobs, rows),
}


# --- estimators: fn(step columns, config) -> per-step [N] or per-token [N, R] advantages -----------------


def row_offset(columns: StepColumns, config: Any) -> np.ndarray | None:
    """verl-agent's invalid-action penalty (``invalid_action_penalty_mode="row"``): minus the penalty on each
    invalid step's own score row; None in "reward" mode (:class:`InvalidActionPenalty` put it in the reward)."""
    if getattr(config, "invalid_action_penalty_mode", "reward") != "row":
        return None
    return -config.invalid_action_penalty * (~columns[VALID]).astype(np.float64)


def response_mask_and_logp(columns: StepColumns) -> tuple[np.ndarray, np.ndarray]:
    """The [N, R] response-token mask and the sampler's log-probs on it (float64)."""
    token = pad_token_batch({k: columns[k] for k in (PROMPT, RESPONSE, ACTION_LOGP)}, pad_id=0)
    return token[RESPONSE_MASK].astype(np.float64), token[ACTION_LOGP].astype(np.float64)


#: Name -> function(step columns, config) -> advantages. Register more with :func:`register_estimator`.
#: Each algorithm module registers its own (grpo.py, gigpo.py, rloo.py, ppo.py's "gae", reinforce_pp.py).
ADVANTAGE_ESTIMATORS = Registry("advantage estimator")
#: Name -> what the estimator needs from the model (keys of :data:`MODULE_OUTPUTS`), or a function of the
#: config returning them (REINFORCE++ needs the reference only with a KL reward).
ESTIMATOR_NEEDS: dict[str, tuple[str, ...] | Callable[[Any], tuple[str, ...]]] = {}


def register_estimator(
    name: str,
    fn: Callable[[StepColumns, Any], np.ndarray],
    needs: tuple[str, ...] | Callable[[Any], tuple[str, ...]] = (),
) -> None:
    """Adds an advantage estimator: ``fn(step_columns, config)`` returns one advantage per row ([N]) or per
    response token ([N, R]); it may add per-row training columns to ``step_columns`` (as GAE adds the value
    targets). ``needs`` names model outputs (:data:`MODULE_OUTPUTS`) it reads as columns."""
    ADVANTAGE_ESTIMATORS.register(name, fn)
    ESTIMATOR_NEEDS[name] = needs


def estimator_needs(config: Any) -> tuple[str, ...]:
    needs = ESTIMATOR_NEEDS.get(config.advantage_estimator, ())
    return tuple(needs(config) if callable(needs) else needs)


# --- connector pieces ------------------------------------------------------------------------------------


class FlattenSteps(ConnectorV2):
    """Writes the step columns of all (single-agent) episodes as ``batch[DEFAULT_MODULE_ID]``."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        batch[DEFAULT_MODULE_ID] = step_columns(episodes)
        return batch


class InvalidActionPenalty(ConnectorV2):
    """Subtracts ``invalid_action_penalty`` from the reward of every step whose response did not parse to
    an action the env accepted (``invalid_action_penalty_mode="reward"``; the "row" mode is the estimator's
    row offset instead)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, config: Any, **kwargs: Any) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.penalty = config.invalid_action_penalty

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        for columns in batch.values():
            columns[REWARDS] = columns[REWARDS] - self.penalty * (~columns[VALID]).astype(np.float64)
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
        penalties = []
        for columns in batch.values():
            penalty = overlong_penalty([len(r) for r in columns[RESPONSE]], self.max_length, self.buffer, self.factor)
            columns[REWARDS] = columns[REWARDS] + penalty
            penalties.append(penalty)
        if metrics is not None and sum(len(p) for p in penalties):
            metrics.log_value("overlong_penalty_mean", float(np.concatenate(penalties).mean()), window=1)
        return batch


def shaping_connectors(config: Any) -> list[ConnectorV2]:
    """The reward-shaping pieces ``config`` asks for, in order (both configs' pipelines use this)."""
    pieces: list[ConnectorV2] = []
    if config.invalid_action_penalty_mode == "reward" and config.invalid_action_penalty:
        pieces.append(InvalidActionPenalty(config=config))
    if config.overlong_buffer_len > 0:
        pieces.append(OverlongPenalty(config=config))
    return pieces


class ComputeAdvantages(ConnectorV2):
    """Runs the configured advantage estimator over every module's steps at once (the rows of all modules
    one after another, so a group that spans modules is normalized as one) and writes each module's
    ``advantages`` column, plus any per-row column the estimator added. Model outputs the estimator needs
    are computed first, which takes a single module, and kept as columns (``ref_logp`` reaches the Learner)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, config: Any, **kwargs: Any) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.config = config
        self.estimator = ADVANTAGE_ESTIMATORS.lookup(config.advantage_estimator)  # unknown: one line, closest names
        self.needs = estimator_needs(config)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        module_ids = list(batch)
        if self.needs and len(module_ids) > 1:
            raise ValueError(
                f"advantage_estimator {self.config.advantage_estimator!r} needs {self.needs} from the model, "
                "which takes one module's pass per step; with several modules use grpo, gigpo or rloo."
            )
        columns = concat_columns([batch[m] for m in module_ids])
        if np.any(np.diff(columns[EPISODE_INDEX]) < 0):
            raise ValueError("Step columns must hold whole episodes in ascending episode_index order (module by module).")
        before = set(columns)
        for need in self.needs:
            columns[need] = MODULE_OUTPUTS[need](learner_module(rl_module, module_ids[0]), columns, self.config.logprob_rows)
        advantages = np.asarray(self.estimator(columns, self.config), dtype=np.float32)
        added = {k: columns[k] for k in set(columns) - before}
        bounds = np.cumsum([0] + [num_rows(batch[m]) for m in module_ids])
        for module_id, lo, hi in zip(module_ids, bounds[:-1], bounds[1:], strict=True):
            batch[module_id][ADVANTAGES] = advantages[lo:hi]
            batch[module_id].update({k: v[lo:hi] for k, v in added.items()})
        if metrics is not None and len(advantages):
            metrics.log_value("advantage_mean", float(advantages.mean()), window=1)
            metrics.log_value("advantage_abs_mean", float(np.abs(advantages).mean()), window=1)
            if advantages.ndim == 1:
                fraction = uninformative_group_fraction(advantages, columns[GROUP_INDEX])
                metrics.log_value(UNINFORMATIVE_GROUP_FRACTION, fraction, window=1)
        return batch


class NoGradLogProbs(ConnectorV2):
    """Base of the pieces that write a log-prob column from no-grad passes of the Learner's module, in passes
    of ``logprob_batch_size`` rows (``LLMConfig.logprob_rows``)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, config: Any, **kwargs: Any) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.rows = config.logprob_rows


class ReferenceLogProbs(NoGradLogProbs):
    """KL to the reference (``kl_coeff > 0``): writes each module's ``ref_logp`` column, the response tokens'
    log-probs under the frozen reference policy, once per training batch in passes of ``logprob_batch_size``
    rows (verl's ``compute_ref_log_prob``), not once per minibatch and epoch inside the loss. A column an
    earlier piece wrote (REINFORCE++'s KL reward needs the same numbers) is kept."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        for module_id, columns in batch.items():
            if REF_LOGP not in columns:
                columns[REF_LOGP] = MODULE_OUTPUTS[REF_LOGP](learner_module(rl_module, module_id), columns, self.rows)
            columns[REF_LOGP] = np.asarray(columns[REF_LOGP], dtype=np.float32)
        return batch


class ProximalLogProbs(NoGradLogProbs):
    """Asynchronous rollouts: writes each module's ``prox_logp`` column, the response tokens' log-probs under
    the Learner's policy as it is before this update (no grad), the proximal policy of the decoupled PPO
    objective (:func:`~rllib_llm.algorithms.losses.behaviour_weights`). The recorded ``action_logp`` stay the
    behaviour policy's: the loss weighs each token by their truncated ratio."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        for module_id, columns in batch.items():
            module = learner_module(rl_module, module_id)
            logp = module_pass(module, columns, lambda chunk, m=module: m.logprobs(chunk)[0], self.rows)
            columns[PROX_LOGP] = logp.astype(np.float32)
        return batch


#: Step columns that only serve the pieces before the token batch (the Learner never reads them).
STEP_BOOKKEEPING = frozenset(
    {REWARDS, EPISODE_INDEX, GROUP_INDEX, ANCHOR_INDEX, ANCHOR, VALID, PROMPT, RESPONSE, IMAGES, AGENT_ID,
     NEED_VALUES}
)


def training_columns(columns: StepColumns, pad_id: int) -> dict[str, np.ndarray]:
    """A module's step columns as the Learner takes them: the padded token batch, then every other per-row
    numeric column (advantages, value targets, a user piece's own); :data:`STEP_BOOKKEEPING` stops here."""
    out = pad_token_batch(columns, pad_id)
    width = out[RESPONSE_MASK].shape[1]
    for key, value in columns.items():
        if key in out or key in STEP_BOOKKEEPING:
            continue
        if not isinstance(value, np.ndarray) or value.dtype == object:
            raise ValueError(f"Learner column {key!r} must be a numeric numpy array (one row per step), got {type(value).__name__}")
        out[key] = value[:, :width] if key == ADVANTAGES and value.ndim == 2 else value
    return out


class StepsToTokenBatch(ConnectorV2):
    """Turns every module's step columns into its token batch (:func:`training_columns`), padded with the
    module's own tokenizer's pad id."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        for module_id in list(batch):
            pad_id = learner_module(rl_module, module_id).tokenizer.pad_token_id
            batch[module_id] = training_columns(batch[module_id], pad_id)
        return batch
