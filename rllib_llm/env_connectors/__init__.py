"""Connector pieces of the EnvRunner: env-to-module memory modules and prompt building, and the
module-to-env action parser (:mod:`.actions`) (see each module).

A pipeline is one or more memories followed by the prompt builder, configured like any RLlib connector::

    config.env_runners(
        env_to_module_connector=lambda env, spaces, device: [SlidingWindowMemory(window=5), ChatPromptBuilder()]
    )
"""

from rllib_llm.env_connectors.actions import ParseActions, default_module_to_env
from rllib_llm.env_connectors.memory import (
    FullHistoryMemory,
    KeyEventMemory,
    Memory,
    SlidingWindowMemory,
    Step,
    format_step,
    observation_text,
)
from rllib_llm.env_connectors.prompts import ChatPromptBuilder, TruncatePrompt, encode_chat, fill_template
from rllib_llm.env_connectors.summary import LLMSummarizer, SummaryMemory, extractive_summary
from rllib_llm.env_connectors.templates import (
    ACTION_ONLY_FORMAT,
    TEMPLATES,
    THINK_ACTION_FORMAT,
    PromptTemplate,
    get_template,
    register_template,
)


def default_env_to_module(env=None, spaces=None, device=None) -> list:
    """The default pipeline: sliding-window memory (3 steps) then the chat prompt builder."""
    return [SlidingWindowMemory(window=3), ChatPromptBuilder()]


__all__ = [
    "ACTION_ONLY_FORMAT",
    "TEMPLATES",
    "THINK_ACTION_FORMAT",
    "ChatPromptBuilder",
    "FullHistoryMemory",
    "KeyEventMemory",
    "LLMSummarizer",
    "Memory",
    "ParseActions",
    "PromptTemplate",
    "SlidingWindowMemory",
    "Step",
    "SummaryMemory",
    "TruncatePrompt",
    "default_env_to_module",
    "default_module_to_env",
    "encode_chat",
    "extractive_summary",
    "fill_template",
    "format_step",
    "get_template",
    "observation_text",
    "register_template",
]
