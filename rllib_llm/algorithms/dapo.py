"""DAPO: GRPO advantages with clip-higher, token-level loss aggregation and dynamic sampling.

The soft overlong penalty is available (``overlong_buffer_len > 0``) but off by default: agent responses
are short and cut at ``</action>``.
"""

from __future__ import annotations

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.dynamic_sampling import DynamicSamplingMixin
from rllib_llm.algorithms.settings import Setting, declare, declare_rule, number

declare(
    __name__,
    Setting("overlong_buffer_len", 0, "DAPO's soft overlong penalty: replies within this many tokens of "
            "max_new_tokens lose reward linearly (0: off).", number(0, integer=True)),
    Setting("overlong_penalty_factor", 1.0, "The largest overlong penalty (at max_new_tokens).", number(0)),
)


def _buffer_shorter_than_replies(config: LLMConfig) -> list[str]:
    max_new_tokens = config.sampling.get("max_new_tokens", 0) if isinstance(config.sampling, dict) else 0
    max_new_tokens = max_new_tokens if isinstance(max_new_tokens, int) else 0
    if isinstance(config.overlong_buffer_len, int) and config.overlong_buffer_len >= max(max_new_tokens, 1):
        return [f"overlong_buffer_len must be < max_new_tokens ({max_new_tokens}), got {config.overlong_buffer_len!r}"]
    return []


declare_rule(__name__, _buffer_shorter_than_replies)


def apply_dapo_defaults(config: LLMConfig) -> None:
    """DAPO's settings on top of any estimator: clip-higher, token-mean loss, dynamic sampling, no KL."""
    config.clip_ratio_low = 0.2
    config.clip_ratio_high = 0.28
    config.loss_agg_mode = "token-mean"
    config.dynamic_sampling = True
    config.kl_coeff = 0.0


class DAPOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or DAPO)
        self.advantage_estimator = "grpo"
        apply_dapo_defaults(self)


class DAPO(DynamicSamplingMixin, LLMAlgorithm):
    config_class = DAPOConfig
