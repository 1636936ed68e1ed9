"""Learner connector pieces for multi-agent episodes: agent steps -> agent-wise advantages -> module batches.

The pipeline (:meth:`MultiAgentLLMConfig.build_learner_connector`) is
``FlattenAgentSteps -> [OverlongPenalty] -> ComputeAgentAdvantages -> [user pieces] -> StepsToModuleBatches
-> NumpyToTensor``. Every agent's ``SingleAgentEpisode`` inside each ``MultiAgentEpisode`` is one
"episode" of the single-agent estimators, whose functions run unchanged on all steps at once: only the
group index changes. With ``advantage_grouping="agent"`` (Dr. MAS's agent-wise normalization) a group is
(rollout group, agent id), so a solver's returns are normalized among the solver's, a verifier's among
the verifier's, even when both share one LLM; ``"group"`` pools all agents of a rollout group. GiGPO's
step groups are built within these groups, so anchors never mix agents under ``"agent"``.

The advantages are computed once over all modules' steps, then each module gets its rows as
``batch[module_id]`` (the token batch its own tokenizer pads).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.algorithms.advantages import factorize
from rllib_llm.algorithms.learner_connectors import (
    STEPS,
    ComputeAdvantages,
    Steps,
    estimator_needs,
    flatten_episodes,
    token_batch,
)
from rllib_llm.columns import ADVANTAGES, GROUP_ID
from rllib_llm.metrics import agent_episodes

#: Steps.extras key: the module id of every step.
MODULE_IDS = "module_ids"
#: Steps.extras key: the agent id of every step.
AGENT_IDS = "agent_ids"
ADVANTAGE_GROUPINGS = ("agent", "group")


def flatten_agent_episodes(episodes: list, grouping: str = "agent") -> Steps:
    """:class:`Steps` over every agent step; ``group_index`` = factorize((group id, agent id)) per episode
    under ``grouping="agent"``, factorize(group id) under ``"group"``."""
    if grouping not in ADVANTAGE_GROUPINGS:
        raise ValueError(f"advantage_grouping must be one of {ADVANTAGE_GROUPINGS}, got {grouping!r}")
    sa_episodes = agent_episodes(episodes)
    steps = flatten_episodes(sa_episodes)
    keys = [
        (ep.custom_data[GROUP_ID], ep.agent_id) if grouping == "agent" else ep.custom_data[GROUP_ID]
        for ep in sa_episodes
    ]
    steps.group_index = factorize(keys)[steps.episode_index]
    steps.extras[MODULE_IDS] = np.asarray([ep.module_id for ep in sa_episodes], dtype=object)[steps.episode_index]
    steps.extras[AGENT_IDS] = np.asarray([ep.agent_id for ep in sa_episodes], dtype=object)[steps.episode_index]
    return steps


def select_steps(steps: Steps, rows: np.ndarray) -> Steps:
    """The given rows of ``steps`` (arrays, token lists, advantages and extra columns)."""
    rows = np.asarray(rows, dtype=np.int64)

    def pick(values: list) -> list:
        return [values[i] for i in rows]

    return Steps(
        rewards=steps.rewards[rows],
        episode_index=steps.episode_index[rows],
        group_index=steps.group_index[rows],
        anchor_index=steps.anchor_index[rows],
        prompts=pick(steps.prompts),
        responses=pick(steps.responses),
        old_logp=pick(steps.old_logp),
        advantages=None if steps.advantages is None else steps.advantages[rows],
        columns={k: v[rows] for k, v in steps.columns.items()},
    )


class FlattenAgentSteps(ConnectorV2):
    def __init__(
        self, input_observation_space=None, input_action_space=None, *, grouping: str = "agent", **kwargs: Any
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.grouping = grouping

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        shared_data[STEPS] = flatten_agent_episodes(episodes, self.grouping)
        return batch


class ComputeAgentAdvantages(ComputeAdvantages):
    """The configured estimator over all agents' steps at once (estimators that need model outputs, such
    as GAE's values, are refused by the config: each step would need its own module's pass)."""

    def __init__(self, input_observation_space=None, input_action_space=None, *, config: Any, **kwargs: Any) -> None:
        super().__init__(input_observation_space, input_action_space, config=config, **kwargs)
        if estimator_needs(config):
            raise ValueError(
                f"advantage_estimator {config.advantage_estimator!r} needs {estimator_needs(config)} from the model, "
                "which the multi-agent learner connector does not compute; use grpo, gigpo or rloo."
            )

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        steps: Steps = shared_data[STEPS]
        # Some estimators read the response mask (REINFORCE++); masks do not depend on the pad id, and every
        # module later pads its own rows with its own tokenizer's.
        token_batch(steps, pad_id=0)
        steps.advantages = np.asarray(self.estimator(steps, self.config), dtype=np.float32)
        if metrics is not None and len(steps):
            metrics.log_value("advantage_mean", float(steps.advantages.mean()), window=1)
            metrics.log_value("advantage_abs_mean", float(np.abs(steps.advantages).mean()), window=1)
        return batch


class StepsToModuleBatches(ConnectorV2):
    """Writes ``batch[module_id]``: the padded token batch, advantages and extra columns of its steps."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        steps: Steps = shared_data[STEPS]
        module_ids = steps.extras[MODULE_IDS]
        for module_id in dict.fromkeys(module_ids.tolist()):
            if module_id not in rl_module:
                raise ValueError(
                    f"Steps of module {module_id!r}, which the Learner does not have ({list(rl_module.keys())})"
                )
            part = select_steps(steps, np.flatnonzero(module_ids == module_id))
            columns = dict(token_batch(part, rl_module[module_id].unwrapped().tokenizer.pad_token_id))
            columns[ADVANTAGES] = part.advantages
            columns.update(part.columns)
            batch[module_id] = columns
        return batch
