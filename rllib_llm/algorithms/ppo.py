"""PPO with a critic: turn-level GAE over each episode's env steps, clipped value loss.

The critic is a linear value head on the policy LM's last hidden state (``LLMRLModule`` with
``value_head=True``, added automatically for ``advantage_estimator="gae"``); a step's value is the value at
its last prompt token, i.e. of the state the response was generated in. Advantages are whitened over the
batch (``advantage_norm``: "std" whitens, "mean" only centers).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rllib_llm.algorithms.advantages import batch_normalize, gae_advantages
from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.learner_connectors import NEED_VALUES, StepColumns, register_estimator
from rllib_llm.algorithms.settings import Setting, declare, flag, number
from rllib_llm.columns import EPISODE_INDEX, OLD_VALUES, REWARDS, VALUE_TARGETS

declare(
    __name__,
    Setting("lambda_", 0.95, "GAE's lambda over each episode's env steps.", number(0, 1)),
    Setting("vf_loss_coeff", 0.5, "Weight of the value loss.", number(0)),
    Setting("vf_clip_param", 0.5, "Clip of the value update around the old value (None: unclipped).",
            number(0, optional=True, low_open=True)),
    Setting("value_head_detach", False, "Train the value head on a detached last hidden state (the critic's loss "
            "then leaves the policy LM alone).", flag()),
)


def gae_estimator(columns: StepColumns, config: Any) -> np.ndarray:
    """Turn-level GAE; the step's value is the critic's value at its last prompt token. Writes the critic's
    values and targets as the ``vf_preds`` / ``value_targets`` columns the value loss reads."""
    values = columns[NEED_VALUES][:, 0]
    advantages, targets = gae_advantages(columns[REWARDS], values, columns[EPISODE_INDEX], config.gamma, config.lambda_)
    columns[OLD_VALUES] = values.astype(np.float32)
    columns[VALUE_TARGETS] = targets.astype(np.float32)
    return batch_normalize(advantages, config.advantage_norm)


register_estimator("gae", gae_estimator, needs=(NEED_VALUES,))


class PPOConfig(LLMConfig):
    def __init__(self, algo_class=None) -> None:
        super().__init__(algo_class=algo_class or PPO)
        self.advantage_estimator = "gae"


class PPO(LLMAlgorithm):
    config_class = PPOConfig
