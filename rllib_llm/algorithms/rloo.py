"""RLOO: each episode's return minus the mean return of the other episodes of its group, PPO-clipped."""

from __future__ import annotations

from typing import Any

import numpy as np

from rllib_llm.algorithms.advantages import rloo_advantages
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.learner_connectors import StepColumns, register_estimator, row_offset
from rllib_llm.columns import EPISODE_INDEX, GROUP_INDEX, REWARDS


def rloo_estimator(columns: StepColumns, config: Any) -> np.ndarray:
    """Each episode's return minus the mean return of the rest of its group."""
    return rloo_advantages(
        columns[REWARDS], columns[EPISODE_INDEX], columns[GROUP_INDEX],
        over_steps=config.group_stats_over_steps, row_offset=row_offset(columns, config),
    )


register_estimator("rloo", rloo_estimator)


class RLOOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or RLOO)
        self.advantage_estimator = "rloo"


class RLOO(LLMAlgorithm):
    config_class = RLOOConfig
