"""Multi-agent LLM environments (PettingZoo): tic-tac-toe (competitive) and 24 Points solver/verifier
(cooperative). See :mod:`.base` for the contract."""

from rllib_llm.envs.multi_agent.base import TextAECEnv, agent_prompt_template, agent_task_description, text_space
from rllib_llm.envs.multi_agent.points24 import Points24SolverVerifierEnv
from rllib_llm.envs.multi_agent.tictactoe import TicTacToeEnv

__all__ = [
    "Points24SolverVerifierEnv",
    "TextAECEnv",
    "TicTacToeEnv",
    "agent_prompt_template",
    "agent_task_description",
    "text_space",
]
