"""The multi-agent LLM algorithms: LLMAlgorithm's sample -> learn -> sync loop over MultiAgentEpisodes.

``training_step`` is inherited unchanged: the LearnerGroup trains every module that got steps (its
MultiRLModule holds one LLMRLModule per policy) and syncs each one's weights back to the EnvRunners.
Evaluation is the base class's too: :func:`~rllib_llm.metrics.rollout_stats` adds per-agent numbers for
multi-agent episodes.
"""

from __future__ import annotations

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.multi_agent.config import MultiAgentGiGPOConfig, MultiAgentGRPOConfig, MultiAgentLLMConfig


class LLMMultiAgentAlgorithm(LLMAlgorithm):
    """LLMAlgorithm for :class:`~rllib_llm.multi_agent.config.MultiAgentLLMConfig`."""

    config_class = MultiAgentLLMConfig


class MultiAgentGRPO(LLMMultiAgentAlgorithm):
    config_class = MultiAgentGRPOConfig


class MultiAgentGiGPO(LLMMultiAgentAlgorithm):
    config_class = MultiAgentGiGPOConfig
