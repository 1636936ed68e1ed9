"""GiGPO: GRPO's episode-level advantage plus a step-level advantage over anchor-state groups.

``step_grouping="similarity"`` (with ``similarity_threshold``) pools near-identical anchor states, for envs
whose observations rarely repeat exactly (e.g. search).
"""

from __future__ import annotations

from rllib_llm.algorithms.advantages import STEP_GROUPINGS
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.settings import Setting, choice, declare, number

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


class GiGPOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or GiGPO)
        self.advantage_estimator = "gigpo"


class GiGPO(LLMAlgorithm):
    config_class = GiGPOConfig
