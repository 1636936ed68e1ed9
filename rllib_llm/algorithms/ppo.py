"""PPO with a critic: turn-level GAE over each episode's env steps, clipped value loss.

The critic is a linear value head on the policy LM's last hidden state (``LLMRLModule`` with
``value_head=True``, added automatically for ``advantage_estimator="gae"``); a step's value is the value at
its last prompt token, i.e. of the state the response was generated in. Advantages are whitened over the
batch (``advantage_norm``: "std" whitens, "mean" only centers).
"""

from __future__ import annotations

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.settings import Setting, declare, flag, number

declare(
    __name__,
    Setting("lambda_", 0.95, "GAE's lambda over each episode's env steps.", number(0, 1)),
    Setting("vf_loss_coeff", 0.5, "Weight of the value loss.", number(0)),
    Setting("vf_clip_param", 0.5, "Clip of the value update around the old value (None: unclipped).",
            number(0, optional=True, low_open=True)),
    Setting("value_head_detach", False, "Train the value head on a detached last hidden state (the critic's loss "
            "then leaves the policy LM alone).", flag()),
)


class PPOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or PPO)
        self.advantage_estimator = "gae"


class PPO(LLMAlgorithm):
    config_class = PPOConfig
