"""The multi-agent LLM algorithms: LLMAlgorithm's sample -> learn -> sync loop over MultiAgentEpisodes.

``training_step`` is inherited unchanged: the LearnerGroup trains every module that got steps (its
MultiRLModule holds one LLMRLModule per policy) and syncs each one's weights back to the EnvRunners.
Only evaluation differs: its statistics are per agent too.
"""

from __future__ import annotations

from typing import Any

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.multi_agent.config import MultiAgentGiGPOConfig, MultiAgentGRPOConfig, MultiAgentLLMConfig
from rllib_llm.multi_agent.env_runner import rollout_stats


class LLMMultiAgentAlgorithm(LLMAlgorithm):
    """LLMAlgorithm for :class:`~rllib_llm.multi_agent.config.MultiAgentLLMConfig`."""

    config_class = MultiAgentLLMConfig

    def evaluate_seeds(self, seeds: list[int] | None = None, explore: bool = False) -> dict[str, Any]:
        """Held-out seeds, one episode each (greedy by default): the overall rates the CLI prints, plus
        per-agent success, validity, return and length as flat ``agent_<id>/<name>`` numbers (the CLI
        logs every value as one number)."""
        episodes = self.play_held_out(seeds, explore)
        stats = {}
        for key, value in rollout_stats(episodes).items():
            stats.update({f"{key}/{k}": v for k, v in value.items()} if isinstance(value, dict) else {key: value})
        return stats


class MultiAgentGRPO(LLMMultiAgentAlgorithm):
    config_class = MultiAgentGRPOConfig


class MultiAgentGiGPO(LLMMultiAgentAlgorithm):
    config_class = MultiAgentGiGPOConfig
