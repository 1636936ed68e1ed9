"""REINFORCE++: batch-whitened discounted token returns, with the KL to the reference in the rewards.

No critic and no group baseline: every response token's return is its step's discounted env return minus
``kl_reward_coeff`` x the KL (``kl_reward_estimator``, of the sampling policy to the reference) summed
over the rest of the response; returns are whitened over all response tokens of the batch.
"""

from __future__ import annotations

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.losses import KL_ESTIMATORS
from rllib_llm.algorithms.settings import Setting, choice, declare, number

#: What each step row's env return is: its discounted reward-to-go (``gamma``), or the whole episode's
#: undiscounted return on every row (verl-agent's ``compute_reinforce_plus_plus_outcome_advantage`` inputs).
ROW_RETURNS = ("reward_to_go", "episode")

declare(
    __name__,
    Setting("kl_reward_coeff", 0.0, "KL to the reference folded into the token rewards (REINFORCE++): its "
            "weight.", number(0)),
    Setting("kl_reward_estimator", "k1", "The estimator of that KL.", choice(KL_ESTIMATORS)),
    Setting("row_returns", "reward_to_go", "Each step row's env return: 'reward_to_go' credits a step with what "
            "followed it (RL's return, the REINFORCE++ paper's per-step form); 'episode' gives every row the "
            "episode's return, as verl-agent does (notes/parity.md).", choice(ROW_RETURNS)),
)


class ReinforcePlusPlusConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or ReinforcePlusPlus)
        self.advantage_estimator = "reinforce_pp"
        self.kl_reward_coeff = 0.001  # verl's default kl_ctrl.kl_coef
        self.kl_reward_estimator = "k1"


class ReinforcePlusPlus(LLMAlgorithm):
    config_class = ReinforcePlusPlusConfig
