"""The envs' built-in templates (verl-agent's prompts) under a real instruct model's chat template: Qwen2.5's,
shipped as tests/fixtures/qwen2_5_chat_template.jinja (the tokenizer of Qwen2.5-Coder-0.5B/1.5B-Instruct),
rendered with the byte tokenizer. What a real model read before these templates: a system message asking for
``<action>`` tags above Search's own ``<search>``/``<answer>`` rules, a WebShop example search it copied
verbatim, a reply prefilled with ``<action>`` that left no room to reason."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from rllib_llm.columns import PROMPT_IDS
from rllib_llm.core.models import build_byte_tokenizer
from rllib_llm.env_connectors import ChatPromptBuilder, SlidingWindowMemory
from rllib_llm.envs import make_env
from tests.env_connectors.conftest import add_step, call, new_episode, pipeline

QWEN_TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "qwen2_5_chat_template.jinja"
QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


@pytest.fixture(scope="module")
def qwen():
    tokenizer = build_byte_tokenizer()
    tokenizer.chat_template = QWEN_TEMPLATE.read_text()
    return SimpleNamespace(tokenizer=tokenizer, model=None)


def render(qwen, name: str, env_config: dict | None = None, steps: int = 1) -> list[str]:
    """The whole rendered prompt (system turn included) at reset and after each of ``steps`` steps."""
    env = make_env(name, env_config or {})
    observation, info = env.reset(seed=0)
    episode = new_episode(observation, info, template=name, task=env.task_description)
    pipe = pipeline(SlidingWindowMemory(), ChatPromptBuilder())
    texts = [qwen.tokenizer.decode(call(pipe, qwen, [episode])[PROMPT_IDS][0])]
    for _ in range(steps):
        action = (info.get("available_actions") or ["<think>x</think><search>Bach</search>"])[0]
        observation, reward, _, _, info = env.step(action)
        add_step(episode, observation, action, reward, info)
        texts.append(qwen.tokenizer.decode(call(pipe, qwen, [episode])[PROMPT_IDS][0]))
    return texts


@pytest.mark.parametrize("name", ["Sokoban", "WebShop", "Search"])
def test_the_model_keeps_its_own_system_turn_and_the_user_turn_holds_the_whole_instruction(qwen, name):
    """As verl-agent prompts: no system message of ours (its <action> rule contradicted Search's tags), the
    model's default system turn, then the env's instruction ending in the answer format, then the reply."""
    for text in render(qwen, name):
        assert text.startswith(f"<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\n")
        assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert "<think> </think>" in text


def test_search_asks_for_search_or_answer_tags_and_never_for_action_tags(qwen):
    for text in render(qwen, "Search"):
        assert "<search> your query </search>" in text and "<answer> </answer>" in text
        assert "<action>" not in text


def test_webshop_shows_no_example_action_to_copy(qwen):
    """The 0.5B model searched for the prompt's example ("red t-shirt") instead of its task."""
    first, after_search = render(qwen, "WebShop")
    assert "'search[<your query>]'" in first and "red t-shirt" not in first
    assert "click[" in after_search


def test_sokoban_asks_to_reason_then_act(qwen):
    first = render(qwen, "Sokoban", {"dim_room": (6, 6), "num_boxes": 1, "max_steps": 6}, steps=0)[0]
    assert "Your admissible actions are [up, down, left, right]" in first
    assert "reason step-by-step" in first and "<action> </action>" in first
