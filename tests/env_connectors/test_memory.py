"""Each built-in memory on a hand-written episode, with the rendered text checked by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rllib_llm.columns import HISTORY_LENGTH, MEMORY
from rllib_llm.env_connectors import (
    FullHistoryMemory,
    KeyEventMemory,
    LLMSummarizer,
    Memory,
    SlidingWindowMemory,
    SummaryMemory,
    extractive_summary,
)
from rllib_llm.generation import GenerationOutput
from tests.env_connectors.conftest import add_step, call, new_episode, pipeline

# (next observation, action, env reward, info); step 2 is invalid (None), step 3 rewarded, step 4 a milestone.
STEPS = [
    ("o1", "+", 0.0, {}),
    ("o2", None, 0.0, {}),
    ("o3", "-", 1.0, {}),
    ("o4", "+", 0.0, {"milestone": "found key"}),
    ("o5", "+", 0.0, {}),
]


def run(memories, module, steps=STEPS):
    """Plays ``steps`` calling the pipeline before every step and after the last, like the env runner."""
    pipe = pipeline(*memories)
    episode = new_episode("o0")
    for observation, action, reward, info in steps:
        call(pipe, module, [episode])
        add_step(episode, observation, action, reward, info)
    return call(pipe, module, [episode]), episode


def test_sliding_window_keeps_last_k(module):
    batch, _ = run([SlidingWindowMemory(window=2)], module)
    assert batch[MEMORY] == [
        "Your last 2 step(s):\n"
        "[Step 4] observation: o3 | action: + | milestone: found key\n"
        "[Step 5] observation: o4 | action: +\n"
    ]
    assert batch[HISTORY_LENGTH] == [2]


def test_sliding_window_zero_and_first_step(module):
    assert run([SlidingWindowMemory(window=0)], module)[0][MEMORY] == [""]
    assert run([SlidingWindowMemory()], module, steps=[])[0][MEMORY] == [""]
    with pytest.raises(ValueError, match="window"):
        SlidingWindowMemory(window=-1)


def test_full_history_keeps_everything(module):
    batch, _ = run([FullHistoryMemory()], module)
    assert batch[MEMORY] == [
        "All 5 previous step(s):\n"
        "[Step 1] observation: o0 | action: +\n"
        "[Step 2] observation: o1 | action: (invalid)\n"
        "[Step 3] observation: o2 | action: -\n"
        "[Step 4] observation: o3 | action: + | milestone: found key\n"
        "[Step 5] observation: o4 | action: +\n"
    ]
    assert batch[HISTORY_LENGTH] == [5]


def test_full_history_with_responses(module):
    batch, _ = run([FullHistoryMemory(include_responses=True)], module, steps=STEPS[:1])
    assert batch[MEMORY] == ["All 1 previous step(s):\n[Step 1] observation: o0 | response: <action>+</action>\n"]


def test_key_events_reward_and_milestone_not_penalty(module):
    batch, _ = run([KeyEventMemory()], module)
    assert batch[MEMORY] == [
        "Key events so far:\n"
        "[Step 3] observation: o2 | action: - | reward: 1\n"
        "[Step 4] observation: o3 | action: + | reward: 0 | milestone: found key\n"
    ]
    assert batch[HISTORY_LENGTH] == [2]


def test_key_events_predicate_and_bound(module):
    invalid = KeyEventMemory(predicate=lambda step: step.action is None)
    assert [line[:8] for line in run([invalid], module)[0][MEMORY][0].splitlines()[1:]] == [
        "[Step 2]",
        "[Step 3]",
        "[Step 4]",
    ]
    only = KeyEventMemory(predicate=lambda step: step.action is None, replace_default=True)
    assert run([only], module)[0][MEMORY] == [
        "Key events so far:\n[Step 2] observation: o1 | action: (invalid) | reward: 0\n"
    ]
    small = [(obs, act, -0.1, info) for obs, act, _, info in STEPS]  # a per-step penalty, as in Sokoban
    assert run([KeyEventMemory()], module, steps=small)[0][HISTORY_LENGTH] == [5]
    assert run([KeyEventMemory(min_abs_reward=0.5)], module, steps=small)[0][HISTORY_LENGTH] == [1]  # the milestone
    latest = KeyEventMemory(max_events=1)
    assert run([latest], module)[0][MEMORY][0].splitlines()[1].startswith("[Step 4]")
    with pytest.raises(ValueError):
        KeyEventMemory(replace_default=True)


def test_summary_memory_extractive_every_m_steps(module):
    batch, _ = run([SummaryMemory(every=2, max_summary_tokens=200, summarizer=extractive_summary)], module)
    assert batch[MEMORY] == [
        "Your memory:\n"
        "Summary of steps 1-4: Steps 1-2: actions +, (invalid). Steps 3-4: actions -, +. Rewards: 1 at step 3. "
        "Milestones: found key.\n"
        "[Step 5] observation: o4 | action: +\n"
    ]
    assert batch[HISTORY_LENGTH] == [5]


def test_summary_memory_calls_summarizer_with_steps_and_previous(module):
    calls = []

    def summarizer(steps, previous):
        calls.append(([s.t for s in steps], previous))
        return f"summary{len(calls)}"

    batch, _ = run([SummaryMemory(every=2, summarizer=summarizer)], module)
    assert calls == [([0, 1], ""), ([2, 3], "summary1")]
    assert batch[MEMORY][0].startswith("Your memory:\nSummary of steps 1-4: summary2\n")


def test_summary_is_bounded_in_tokens(module, tokenizer):
    memory = SummaryMemory(every=1, max_summary_tokens=10, summarizer=lambda steps, previous: "word " * 100 + "END")
    batch, _ = run([memory], module, steps=STEPS[:1])
    summary = batch[MEMORY][0].splitlines()[1].removeprefix("Summary of steps 1-1: ")
    assert summary.startswith("...") and summary.endswith("END")  # the tail (newest facts) is kept
    assert len(tokenizer(summary.removeprefix("..."), add_special_tokens=False)["input_ids"]) == 10


def test_default_llm_summarizer_falls_back_without_model(module):
    batch, _ = run([SummaryMemory(every=5, max_summary_tokens=200)], module)  # module.model is None
    assert "Summary of steps 1-5: Steps 1-5: actions +, (invalid), -, +, +." in batch[MEMORY][0]


class ScriptedBackend:
    """Records the prompts of each generate call and answers with a fixed text."""

    def __init__(self, text):
        self.text, self.calls = text, []

    def generate(self, prompts, params):
        self.calls.append((prompts, params))
        return [GenerationOutput(token_ids=[1], logprobs=[0.0], text=self.text, finish_reason="eos") for _ in prompts]


def test_llm_summarizer_prompts_the_policy_once_for_all_due_episodes(tokenizer, monkeypatch):
    backend = ScriptedBackend("  The agent pressed + once.  ")
    monkeypatch.setattr(LLMSummarizer, "_backend_for", lambda self, model, tok: backend)
    module = SimpleNamespace(tokenizer=tokenizer, model=object())
    pipe = pipeline(SummaryMemory(every=1))
    episodes = [new_episode("o0"), new_episode("p0")]
    for episode in episodes:
        add_step(episode, "o1", "+")
    batch = call(pipe, module, episodes)
    assert len(backend.calls) == 1 and len(backend.calls[0][0]) == 2
    prompt = tokenizer.decode(backend.calls[0][0][1])
    assert "Previous summary: (none)" in prompt and "[Step 1] observation: p0 | action: + | reward: 0" in prompt
    assert backend.calls[0][1].greedy
    assert batch[MEMORY] == ["Your memory:\nSummary of steps 1-1: The agent pressed + once.\n"] * 2


def test_llm_summarizer_runs_the_tiny_model_within_the_bound(tokenizer, tiny_module):
    module = tiny_module
    memory = SummaryMemory(every=2, max_summary_tokens=6)
    summary = run([memory], module)[0][MEMORY][0].splitlines()[1].removeprefix("Summary of steps 1-4: ")
    assert memory.summarizer._backend.model is module.model  # generated with the module's own model
    assert summary and len(tokenizer(summary.removeprefix("..."), add_special_tokens=False)["input_ids"]) <= 6


def test_memories_compose_in_pipeline_order(module):
    batch, _ = run([KeyEventMemory(), SlidingWindowMemory(window=1)], module)
    assert batch[MEMORY] == [
        "Key events so far:\n"
        "[Step 3] observation: o2 | action: - | reward: 1\n"
        "[Step 4] observation: o3 | action: + | reward: 0 | milestone: found key\n"
        "Your last 1 step(s):\n"
        "[Step 5] observation: o4 | action: +\n"
    ]
    assert batch[HISTORY_LENGTH] == [2]


def test_state_is_per_episode_and_fresh_for_a_new_episode(module):
    pipe = pipeline(SlidingWindowMemory(window=3))
    old, new = new_episode("a0"), new_episode("b0")
    add_step(old, "a1", "+")
    batch = call(pipe, module, [old, new])
    assert batch[MEMORY] == ["Your last 1 step(s):\n[Step 1] observation: a0 | action: +\n", ""]
    add_step(new, "b1", "-")
    batch = call(pipe, module, [old, new])
    assert "a0" not in batch[MEMORY][1] and "b0 | action: -" in batch[MEMORY][1]
    assert batch[MEMORY][0] == "Your last 1 step(s):\n[Step 1] observation: a0 | action: +\n"  # fed once


class CountingMemory(Memory):
    """A minimal user memory: only update and render."""

    def update(self, state, observation, action, reward, info):
        return [*state, action]

    def render(self, state):
        return f"{len(state)} actions so far, last: {state[-1]}\n" if state else ""


def test_user_memory_with_update_and_render_only(module):
    batch, _ = run([CountingMemory()], module)
    assert batch[MEMORY] == ["5 actions so far, last: +\n"]
    assert batch[HISTORY_LENGTH] == [5]


def test_memory_without_update_says_what_to_implement(module):
    class Broken(Memory):
        def render(self, state):
            return ""

    with pytest.raises(NotImplementedError, match="update"):
        run([Broken()], module)
