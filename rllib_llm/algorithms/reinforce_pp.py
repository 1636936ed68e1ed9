"""REINFORCE++: batch-whitened discounted token returns, with the KL to the reference in the rewards.

No critic and no group baseline: every response token's return is its step's discounted env return minus
``kl_reward_coeff`` x the KL (``kl_reward_estimator``, of the sampling policy to the reference) summed
over the rest of the response; returns are whitened over all response tokens of the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rllib_llm.algorithms.advantages import discounted_returns, episode_returns, reinforce_pp_advantages
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.learner_connectors import (
    NEED_REF_LOGP,
    StepColumns,
    register_estimator,
    response_mask_and_logp,
)
from rllib_llm.algorithms.losses import KL_ESTIMATORS, kl_penalty
from rllib_llm.algorithms.settings import Setting, choice, declare, number
from rllib_llm.columns import EPISODE_INDEX, REWARDS

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


def reinforce_pp_estimator(columns: StepColumns, config: Any) -> np.ndarray:
    """REINFORCE++: discounted step returns on each step's last token, KL to the reference on every token."""
    mask, old_logp = response_mask_and_logp(columns)
    kl = np.zeros(mask.shape)
    if config.kl_reward_coeff > 0:
        ref_logp = torch.as_tensor(columns[NEED_REF_LOGP])
        kl = kl_penalty(torch.as_tensor(old_logp), ref_logp, config.kl_reward_estimator).numpy()
    if config.row_returns == "episode":
        step_returns = episode_returns(columns[REWARDS], columns[EPISODE_INDEX])[columns[EPISODE_INDEX]]
    else:
        step_returns = discounted_returns(columns[REWARDS], columns[EPISODE_INDEX], config.gamma)
    return reinforce_pp_advantages(step_returns, kl, mask, config.kl_reward_coeff)[0]


def _reinforce_pp_needs(config: Any) -> tuple[str, ...]:
    """The reference's log-probs, only with a KL reward."""
    return (NEED_REF_LOGP,) if config.kl_reward_coeff > 0 else ()


register_estimator("reinforce_pp", reinforce_pp_estimator, needs=_reinforce_pp_needs)


class ReinforcePlusPlusConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or ReinforcePlusPlus)
        self.advantage_estimator = "reinforce_pp"
        self.kl_reward_coeff = 0.001  # verl's default kl_ctrl.kl_coef
        self.kl_reward_estimator = "k1"


class ReinforcePlusPlus(LLMAlgorithm):
    config_class = ReinforcePlusPlusConfig
