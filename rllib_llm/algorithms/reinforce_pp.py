"""REINFORCE++: batch-whitened discounted token returns, with the KL to the reference in the rewards.

No critic and no group baseline: every response token's return is its step's discounted env return minus
``kl_reward_coeff`` x the KL (``kl_reward_estimator``, of the sampling policy to the reference) summed
over the rest of the response; returns are whitened over all response tokens of the batch.
"""

from __future__ import annotations

from typing import Any

from ray.rllib.utils.from_config import NotProvided

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig

#: What each step row's env return is: its discounted reward-to-go (``gamma``), or the whole episode's
#: undiscounted return on every row (verl-agent's ``compute_reinforce_plus_plus_outcome_advantage`` inputs).
ROW_RETURNS = ("reward_to_go", "episode")


class ReinforcePlusPlusConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or ReinforcePlusPlus)
        self.advantage_estimator = "reinforce_pp"
        self.kl_reward_coeff = 0.001  # verl's default kl_ctrl.kl_coef
        self.kl_reward_estimator = "k1"
        #: Each step row's env return (:data:`ROW_RETURNS`): ``"reward_to_go"`` credits a step with what
        #: followed it (RL's return, the REINFORCE++ paper's per-step form); ``"episode"`` gives every row the
        #: episode's return, as verl-agent does (notes/parity.md).
        self.row_returns = "reward_to_go"

    def training(self, *, row_returns: str = NotProvided, **kwargs: Any) -> ReinforcePlusPlusConfig:
        super().training(**kwargs)
        if row_returns is not NotProvided:
            self.row_returns = row_returns
        return self

    def _algorithm_errors(self) -> list[str]:
        errors = super()._algorithm_errors()
        if self.row_returns not in ROW_RETURNS:
            errors.append(f"row_returns must be one of {ROW_RETURNS}, got {self.row_returns!r}")
        return errors


class ReinforcePlusPlus(LLMAlgorithm):
    config_class = ReinforcePlusPlusConfig
