"""Multi-agent LLM systems on RLlib's multi-agent API: PettingZoo envs (AEC and parallel), agents mapped to
LLMRLModules by ``policy_mapping_fn``, one batched generate per module per step, and agent-wise group
advantages (Dr. MAS). See notes/multi_agent.md.
"""

from rllib_llm.core.multi_agent_env_runner import LLMMultiAgentEnvRunner
from rllib_llm.envs.multi_agent.pettingzoo_adapter import (
    PettingZooAdapter,
    make_multi_agent_env,
    register_multi_agent_env,
)
from rllib_llm.metrics import rollout_stats
from rllib_llm.multi_agent.algorithm import LLMMultiAgentAlgorithm, MultiAgentGiGPO, MultiAgentGRPO
from rllib_llm.multi_agent.config import (
    AgentToModule,
    MultiAgentGiGPOConfig,
    MultiAgentGRPOConfig,
    MultiAgentLLMConfig,
    llm_module_spec,
)
from rllib_llm.multi_agent.learner_connectors import FlattenAgentSteps, agent_step_columns

__all__ = [
    "AgentToModule",
    "FlattenAgentSteps",
    "LLMMultiAgentAlgorithm",
    "LLMMultiAgentEnvRunner",
    "MultiAgentGRPO",
    "MultiAgentGRPOConfig",
    "MultiAgentGiGPO",
    "MultiAgentGiGPOConfig",
    "MultiAgentLLMConfig",
    "PettingZooAdapter",
    "agent_step_columns",
    "llm_module_spec",
    "make_multi_agent_env",
    "register_multi_agent_env",
    "rollout_stats",
]
