"""GRPO: group-normalized episode return broadcast to every step (no critic)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rllib_llm.algorithms.advantages import grpo_advantages
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.learner_connectors import StepColumns, register_estimator, row_offset
from rllib_llm.columns import EPISODE_INDEX, GROUP_INDEX, REWARDS


def grpo_estimator(columns: StepColumns, config: Any) -> np.ndarray:
    """Each episode's return normalised within its group (``advantage_norm``), on every step row."""
    return grpo_advantages(
        columns[REWARDS], columns[EPISODE_INDEX], columns[GROUP_INDEX], config.advantage_norm,
        over_steps=config.group_stats_over_steps, row_offset=row_offset(columns, config),
    )


register_estimator("grpo", grpo_estimator)


class GRPOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or GRPO)
        self.advantage_estimator = "grpo"


class GRPO(LLMAlgorithm):
    config_class = GRPOConfig
