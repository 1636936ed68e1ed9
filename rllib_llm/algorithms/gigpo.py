"""GiGPO: GRPO's episode-level advantage plus a step-level advantage over anchor-state groups.

``step_grouping="similarity"`` (with ``similarity_threshold``) pools near-identical anchor states, for envs
whose observations rarely repeat exactly (e.g. search).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rllib_llm.algorithms.advantages import STEP_GROUPINGS, gigpo_advantages, similarity_step_groups
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.learner_connectors import StepColumns, register_estimator, row_offset
from rllib_llm.algorithms.settings import Setting, choice, declare, number
from rllib_llm.columns import ANCHOR, ANCHOR_INDEX, EPISODE_INDEX, GROUP_INDEX, REWARDS

declare(
    __name__,
    Setting("step_advantage_weight", 1.0, "Weight of the step-level advantage added to the episode-level one "
            "(GiGPO's omega, Eq. 7).", number(0)),
    Setting("step_grouping", "exact", "GiGPO step groups: 'exact' anchors within an episode group (the paper's), "
            "'similarity' (str() ratio >= similarity_threshold, verl-agent's), or 'exact_across_groups' (identical "
            "anchors of all groups).", choice(STEP_GROUPINGS)),
    Setting("similarity_threshold", 0.9, "The anchor similarity from which two states share a step group "
            "(step_grouping='similarity').", number(0, 1, low_open=True)),
)


def step_anchor_ids(columns: StepColumns, config: Any) -> np.ndarray:
    """Anchor ids for GiGPO's step groups: exact ids, or clusters of similar anchors within each group."""
    if config.step_grouping == "similarity":
        return similarity_step_groups(columns[GROUP_INDEX], columns[ANCHOR], config.similarity_threshold)
    return columns[ANCHOR_INDEX]


def gigpo_estimator(columns: StepColumns, config: Any) -> np.ndarray:
    """The episode-level group advantage plus ``step_advantage_weight`` x the step-level one over anchor-state
    groups (advantages.gigpo_advantages, the paper's Eq. 7)."""
    return gigpo_advantages(
        columns[REWARDS],
        columns[EPISODE_INDEX],
        columns[GROUP_INDEX],
        step_anchor_ids(columns, config),
        gamma=config.gamma,
        omega=config.step_advantage_weight,
        mode=config.advantage_norm,
        over_steps=config.group_stats_over_steps,
        across_groups=config.step_grouping == "exact_across_groups",
        row_offset=row_offset(columns, config),
    )


register_estimator("gigpo", gigpo_estimator)


class GiGPOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or GiGPO)
        self.advantage_estimator = "gigpo"


class GiGPO(LLMAlgorithm):
    config_class = GiGPOConfig
