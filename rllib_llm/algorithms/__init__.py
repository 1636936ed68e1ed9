"""Algorithms: advantage estimators, losses, the Learner and the Algorithm configs.

Every algorithm is an ``XConfig(LLMConfig)`` + ``X(LLMAlgorithm)`` pair sharing one rollout path (the
LLM EnvRunner), one Learner and one learner-connector pipeline. Each algorithm's module owns what is its
own: the settings it reads (declared with :func:`~rllib_llm.algorithms.settings.declare`), its advantage
estimator (``register_estimator``) and its config defaults, so any mix is one config away (e.g.
``GRPOConfig().training(policy_loss="gspo")``) and a new algorithm is one module (notes/ARCHITECTURE.md,
"Adding things"). Importing this package imports every algorithm module, so every setting and estimator
is registered before a config is built.
"""

from rllib_llm.algorithms.algorithm import LLMAlgorithm
from rllib_llm.algorithms.config import LLMConfig
from rllib_llm.algorithms.dapo import DAPO, DAPOConfig
from rllib_llm.algorithms.dynamic_gigpo import DynamicGiGPO, DynamicGiGPOConfig
from rllib_llm.algorithms.dynamic_sampling import DynamicSamplingMixin
from rllib_llm.algorithms.gigpo import GiGPO, GiGPOConfig
from rllib_llm.algorithms.grpo import GRPO, GRPOConfig
from rllib_llm.algorithms.gspo import GSPO, GSPOConfig
from rllib_llm.algorithms.ppo import PPO, PPOConfig
from rllib_llm.algorithms.reinforce_pp import ReinforcePlusPlus, ReinforcePlusPlusConfig
from rllib_llm.algorithms.rloo import RLOO, RLOOConfig

#: Algorithm name -> config class, for tools that pick an algorithm by name.
ALGORITHMS = {
    "grpo": GRPOConfig,
    "gigpo": GiGPOConfig,
    "dynamic_gigpo": DynamicGiGPOConfig,
    "rloo": RLOOConfig,
    "reinforce_pp": ReinforcePlusPlusConfig,
    "ppo": PPOConfig,
    "dapo": DAPOConfig,
    "gspo": GSPOConfig,
}

__all__ = [
    "ALGORITHMS",
    "DAPO",
    "DAPOConfig",
    "DynamicGiGPO",
    "DynamicGiGPOConfig",
    "DynamicSamplingMixin",
    "GRPO",
    "GRPOConfig",
    "GSPO",
    "GSPOConfig",
    "GiGPO",
    "GiGPOConfig",
    "LLMAlgorithm",
    "LLMConfig",
    "PPO",
    "PPOConfig",
    "RLOO",
    "RLOOConfig",
    "ReinforcePlusPlus",
    "ReinforcePlusPlusConfig",
]
