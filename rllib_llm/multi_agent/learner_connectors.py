"""The multi-agent first piece of the learner pipeline: agent episodes -> each module's step columns.

The pipeline (:meth:`MultiAgentLLMConfig.build_learner_connector`) is the single-agent one with
:class:`FlattenAgentSteps` first: ``FlattenAgentSteps -> [InvalidActionPenalty] -> [OverlongPenalty] ->
ComputeAdvantages -> [user pieces] -> StepsToTokenBatch -> NumpyToTensor``. Every agent's
``SingleAgentEpisode`` inside each ``MultiAgentEpisode`` is one "episode" of the single-agent estimators,
which run unchanged over all modules' rows at once: only the group index changes. With
``advantage_grouping="agent"`` (Dr. MAS's agent-wise normalization) a group is (rollout group, agent id), so
a solver's returns are normalized among the solver's, a verifier's among the verifier's, even when both
share one LLM; ``"group"`` pools all agents of a rollout group. GiGPO's step groups are built within these
groups, so anchors never mix agents under ``"agent"``.

Episode, group and anchor ids are factorized over all agents' steps, then each module gets its rows as
``batch[module_id]`` (which its own tokenizer pads at the end).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.algorithms.advantages import factorize
from rllib_llm.algorithms.learner_connectors import StepColumns, select_rows, step_columns
from rllib_llm.columns import AGENT_ID, EPISODE_INDEX, GROUP_ID, GROUP_INDEX
from rllib_llm.metrics import agent_episodes

ADVANTAGE_GROUPINGS = ("agent", "group")


def agent_step_columns(episodes: list, grouping: str = "agent") -> dict[str, StepColumns]:
    """{module id: step columns} over every agent step; ``group_index`` = factorize((group id, agent id))
    per agent episode under ``grouping="agent"``, factorize(group id) under ``"group"`` (ids are global)."""
    if grouping not in ADVANTAGE_GROUPINGS:
        raise ValueError(f"advantage_grouping must be one of {ADVANTAGE_GROUPINGS}, got {grouping!r}")
    sa_episodes = agent_episodes(episodes)
    # Module by module (stable), so each module's rows are whole episodes in ascending order and the modules'
    # batches, concatenated in order by ComputeAdvantages, are the episode-ordered rows the estimators take.
    order = {module_id: i for i, module_id in enumerate(dict.fromkeys(ep.module_id for ep in sa_episodes))}
    sa_episodes = sorted(sa_episodes, key=lambda ep: order[ep.module_id])
    columns = step_columns(sa_episodes)
    episode_index = columns[EPISODE_INDEX]
    keys = [
        (ep.custom_data[GROUP_ID], ep.agent_id) if grouping == "agent" else ep.custom_data[GROUP_ID]
        for ep in sa_episodes
    ]
    columns[GROUP_INDEX] = factorize(keys)[episode_index]
    columns[AGENT_ID] = np.asarray([ep.agent_id for ep in sa_episodes], dtype=object)[episode_index]
    module_ids = np.asarray([ep.module_id for ep in sa_episodes], dtype=object)[episode_index]
    return {
        module_id: select_rows(columns, np.flatnonzero(module_ids == module_id))
        for module_id in dict.fromkeys(module_ids.tolist())
    }


class FlattenAgentSteps(ConnectorV2):
    """Writes each module's step columns as ``batch[module_id]``."""

    def __init__(
        self, input_observation_space=None, input_action_space=None, *, grouping: str = "agent", **kwargs: Any
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.grouping = grouping

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        batch.update(agent_step_columns(episodes, self.grouping))
        return batch
