"""The token budget: over-long prompts are cut (oldest memory first) with a warning, never an error."""

from __future__ import annotations

import logging

import pytest
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rllib_llm.columns import PROMPT_IDS, PROMPT_TEXT
from rllib_llm.env_connectors import ChatPromptBuilder, FullHistoryMemory, TruncatePrompt
from rllib_llm.env_connectors.prompts import OMITTED, truncate_ids
from rllib_llm.metrics import NUM_PROMPTS_TRUNCATED
from tests.env_connectors.conftest import add_step, call, new_episode, pipeline

LOGGER = "rllib_llm.env_connectors.prompts"
GENERATION_PROMPT = "<|im_start|>assistant\n"


def long_episode(steps: int = 10, **kwargs):
    episode = new_episode("obs-0 " + "x" * 40, template="{memory}NOW: {current_observation}", **kwargs)
    for t in range(1, steps + 1):
        add_step(episode, f"obs-{t} " + "x" * 40, "+")
    return episode


def prompt_len(module, episode, budget: int = 100_000) -> int:
    return len(
        call(pipeline(FullHistoryMemory(), ChatPromptBuilder(max_prompt_tokens=budget)), module, [episode])[PROMPT_IDS][
            0
        ]
    )


def test_oldest_memory_lines_go_first(module, tokenizer, caplog):
    episode = long_episode()
    budget = prompt_len(module, episode) - 150  # each history line is ~80 tokens; the marker costs 26
    pipe = pipeline(FullHistoryMemory(), ChatPromptBuilder(max_prompt_tokens=budget))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        batch = call(pipe, module, [episode])
    ids, text = batch[PROMPT_IDS][0], batch[PROMPT_TEXT][0]
    assert budget - 70 < len(ids) <= budget  # dropped whole lines, no more than needed
    assert text.startswith(OMITTED + "[Step 3] observation: obs-2") and "[Step 10] observation: obs-9" in text
    assert text.endswith("NOW: obs-10 " + "x" * 40)
    assert "dropped the 3 oldest memory line(s)" in caplog.text  # the header and steps 1-2: 2 would not fit


def test_observation_alone_over_budget_keeps_head_and_generation_prompt(module, tokenizer, caplog):
    episode = new_episode("y" * 500, template="{current_observation}", few_shot=[("shot", "<action>+</action>")])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ids = call(pipeline(ChatPromptBuilder(max_prompt_tokens=64)), module, [episode])[PROMPT_IDS][0]
    decoded = tokenizer.decode(ids)
    assert len(ids) == 64
    assert decoded.startswith("<|im_start|>system\n") and decoded.endswith("y<|im_end|>\n" + GENERATION_PROMPT)
    assert "cut" in caplog.text and "from its middle" in caplog.text


def test_few_shot_dropped_before_cutting(module, tokenizer):
    episode = new_episode("obs", template="{current_observation}", few_shot=[("z" * 300, "<action>+</action>")])
    ids = call(pipeline(ChatPromptBuilder(max_prompt_tokens=200)), module, [episode])[PROMPT_IDS][0]
    assert (
        len(ids) <= 200
        and "z" not in tokenizer.decode(ids)
        and tokenizer.decode(ids).endswith("obs<|im_end|>\n" + GENERATION_PROMPT)
    )


def test_warns_once_then_counts_in_metrics(module, caplog):
    metrics = MetricsLogger()
    pipe = pipeline(FullHistoryMemory(), ChatPromptBuilder(max_prompt_tokens=200))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            call(pipe, module, [long_episode(), long_episode()], metrics=metrics)
    assert len([r for r in caplog.records if r.name == LOGGER]) == 1
    assert metrics.peek(NUM_PROMPTS_TRUNCATED) == 6


def test_fitting_prompt_is_untouched(module, caplog):
    episode = long_episode(2)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        n = prompt_len(module, episode, budget=prompt_len(module, episode))
    assert n == prompt_len(module, episode) and not caplog.records


def test_truncate_prompt_connector_after_any_builder(module, caplog):
    batch = {PROMPT_IDS: [list(range(100)), [1, 2, 3]]}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = TruncatePrompt(max_prompt_tokens=20)(rl_module=module, batch=batch, episodes=[None, None])
    assert out[PROMPT_IDS] == [list(range(5)) + list(range(85, 100)), [1, 2, 3]]
    assert "cut 80 tokens" in caplog.text


def test_truncate_ids_and_bad_budget():
    assert truncate_ids(list(range(10)), 10) == list(range(10))
    assert truncate_ids(list(range(10)), 4, head_fraction=0.5) == [0, 1, 8, 9]
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        ChatPromptBuilder(max_prompt_tokens=8)


def test_a_batch_of_prompts_is_encoded_in_one_call_and_equals_building_each_alone(module, tokenizer, monkeypatch):
    """``build_all``: every fitting prompt from one batched tokenizer call, the same ids as ``build`` one by one;
    a prompt over the budget still gets ``build``'s cuts."""
    from rllib_llm.env_connectors import prompts

    episodes = [long_episode(steps) for steps in (1, 3, 10)]
    for episode in episodes:
        episode.custom_data[prompts.RESPONSE_PREFIX_KEY] = "<action>"
    memory = ["line\n" * n for n in (1, 3, 10)]
    lengths = [1, 3, 10]
    budget = len(ChatPromptBuilder().build(tokenizer, episodes[1], memory[1], 3)[0])  # the 10-step one is longer
    builder = ChatPromptBuilder(max_prompt_tokens=budget)
    alone = [ChatPromptBuilder(max_prompt_tokens=budget).build(tokenizer, e, m, n)
             for e, m, n in zip(episodes, memory, lengths, strict=True)]
    calls = []
    encode = prompts.encode_texts
    monkeypatch.setattr(prompts, "encode_texts", lambda tok, texts: calls.append(len(texts)) or encode(tok, texts))
    together = builder.build_all(tokenizer, episodes, memory, lengths)
    assert together == alone
    assert len(ChatPromptBuilder().build(tokenizer, episodes[2], memory[2], 10)[0]) > budget  # so it was cut
    assert calls[0] == 3  # one call for all three; the over-long one is re-encoded by build's cuts
    assert builder.budget.count == 1
