"""Prompt tokens per step over a long episode: sliding-window memory against full-history concatenation.

    python benchmarks/context_growth.py                              # Sokoban, 50 steps, SmolLM2 tokenizer
    python benchmarks/context_growth.py --env NumberLine --size 100
    python benchmarks/context_growth.py --model tiny-random-llama    # byte tokenizer, no model files

Why: step-independent rollouts are the point of the memory modules. Full-history concatenation (what
RAGEN and Search-R1 do) makes the step-t prompt grow linearly with t, so an episode costs O(T^2) prompt
tokens; a sliding window keeps it flat. This measures both with the real pipeline: an LLMEnvRunner plays
the episodes and its env-to-module connectors ([memory, ChatPromptBuilder]) build every prompt, but the
generation backend is scripted (a random admissible action that does not end the episode, tried on a copy of
the env), so every episode lasts the full ``--size`` steps and no model is run. The prompt builder's token
budget is lifted so the full history is measured uncut; ``first_step_over_budget`` says from which step
the default 2048-token budget would start dropping lines. The full-history column lists only the actions:
a real concatenated dialogue also holds every response's reasoning, so it grows faster still.
Writes benchmarks/results/context_growth.json and .png.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: `benchmarks._common` importable

from benchmarks._common import (  # noqa: E402
    load_average,
    output_argument,
    print_table,
    resolve_size,
    save_plot,
    size_argument,
    write_results,
)
from rllib_llm.algorithms import GiGPOConfig  # noqa: E402
from rllib_llm.columns import PROMPT
from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
from rllib_llm.env_connectors import ChatPromptBuilder, FullHistoryMemory, Memory, SlidingWindowMemory  # noqa: E402
from rllib_llm.generation import GenerationBackend, GenerationOutput, SamplingParams  # noqa: E402

NAME = "context_growth"
PRESETS = {"small": {"steps": 50}, "medium": {"steps": 100}, "large": {"steps": 200}}
ENV_CONFIGS: dict[str, dict[str, Any]] = {
    "Sokoban": {"dim_room": (6, 6), "num_boxes": 1},
    "NumberLine": {"max_position": 5},
}
#: The prompt builder's default budget (ChatPromptBuilder(max_prompt_tokens=2048)).
DEFAULT_BUDGET = 2048
UNLIMITED = 10**9
WINDOW = 3  # the default pipeline's window (rllib_llm.env_connectors.default_env_to_module)
MEMORIES: dict[str, Callable[[], Memory]] = {
    "sliding_window": lambda: SlidingWindowMemory(window=WINDOW),
    "full_history": lambda: FullHistoryMemory(),
}


class LookaheadBackend(GenerationBackend):
    """Scripted policy: for env i's prompt, a random admissible action that does not end env i's episode.

    The env runner asks for one response per active env, in env order; every env stays active (no action
    ends an episode early), so prompt i belongs to ``runner.envs[i]``.
    """

    def __init__(self, runner: LLMEnvRunner, actions: list[str], seed: int) -> None:
        self.runner, self.actions, self.rng = runner, list(actions), random.Random(seed)
        self.tokenizer = runner.module.tokenizer

    def choose(self, env: Any) -> str:
        options = self.rng.sample(self.actions, len(self.actions))
        for action in options:
            _, _, terminated, _, _ = copy.deepcopy(env).step(action)
            if not terminated:
                return action
        return options[0]

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        outputs = []
        for env in self.runner.envs[: len(prompts)]:
            text = f"<action>{self.choose(env)}</action>"
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            outputs.append(GenerationOutput(token_ids=ids, logprobs=[0.0] * len(ids), text=text, finish_reason="stop"))
        return outputs


def prompt_lengths(memory: str, env: str, steps: int, model: str, seeds: list[int]) -> np.ndarray:
    """Prompt tokens of every step, [episode, step], with ``memory`` before the chat prompt builder."""
    make_memory = MEMORIES[memory]
    config = (
        GiGPOConfig()
        .environment(env, env_config={**ENV_CONFIGS.get(env, {}), "max_steps": steps})
        .env_runners(env_to_module_connector=lambda *_: [make_memory(), ChatPromptBuilder(max_prompt_tokens=UNLIMITED)])
        .llm(model=model)
        .group_rollouts(group_size=1, num_groups=len(seeds), max_episode_steps=steps)
        .debugging(seed=0)
    )
    runner = LLMEnvRunner(config=config)
    try:
        actions = runner.envs[0].reset(seed=seeds[0])[1].get("available_actions")
        if not actions:
            raise SystemExit(f"{env} lists no available_actions in its info; the scripted policy needs them")
        runner.backend = LookaheadBackend(runner, actions, seed=0)
        episodes = runner.sample(seeds=seeds, group_size=1)
        lengths = [[len(p) for p in ep.get_extra_model_outputs(PROMPT)] for ep in episodes]
        short = [len(x) for x in lengths if len(x) != steps]
        if short:
            raise RuntimeError(f"episodes of {short} steps, not {steps}: the scripted policy ended some early")
        return np.array(lengths)
    finally:
        runner.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    size_argument(parser, "episode length in steps")
    parser.add_argument("--env", default="Sokoban", help="Sokoban (default) or NumberLine, or any env alias")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="whose tokenizer counts the tokens")
    parser.add_argument("--episodes", type=int, default=4, help="episodes (seeds) averaged per step")
    output_argument(parser, NAME)
    args = parser.parse_args(argv)
    steps = resolve_size(args.size, PRESETS, "steps")["steps"]
    seeds = list(range(args.episodes))
    means = {name: prompt_lengths(name, args.env, steps, args.model, seeds).mean(axis=0) for name in MEMORIES}
    window, full = means["sliding_window"], means["full_history"]
    rows = [
        {
            "step": t + 1,
            "sliding_window_tokens": float(window[t]),
            "full_history_tokens": float(full[t]),
            "ratio": float(full[t] / window[t]),
        }
        for t in range(steps)
    ]
    over = [r["step"] for r in rows if r["full_history_tokens"] > DEFAULT_BUDGET]
    summary = {
        "env": args.env,
        "tokenizer": args.model,
        "steps": steps,
        "ratio_at_last_step": rows[-1]["ratio"],
        "sliding_window_total_tokens": float(window.sum()),
        "full_history_total_tokens": float(full.sum()),
        "total_ratio": float(full.sum() / window.sum()),
        "first_step_over_budget": over[0] if over else None,
        "load_avg": load_average(),
    }
    shown = sorted({1, 2, WINDOW + 1, *range(10, steps + 1, 10), steps})
    print(f"Prompt tokens per step, {args.env}, {args.model} tokenizer, mean of {args.episodes} episodes:")
    print_table(
        [r for r in rows if r["step"] in shown],
        ["step", ("sliding_window_tokens", ".1f"), ("full_history_tokens", ".1f"), ("ratio", ".2f")],
    )
    budget = f"passes the default {DEFAULT_BUDGET}-token budget at step {over[0]}" if over else "stays in budget"
    print(
        f"At step {steps}: full history {full[-1]:.0f} tokens vs sliding window {window[-1]:.0f} "
        f"({summary['ratio_at_last_step']:.1f}x); whole episode {summary['total_ratio']:.1f}x the prompt tokens; "
        f"full history {budget}."
    )
    write_results(args.output, NAME, args, rows, summary=summary)
    x = [r["step"] for r in rows]
    save_plot(
        args.output.with_suffix(".png"),
        [
            {
                "xlabel": "step",
                "ylabel": "prompt tokens",
                "lines": [
                    {"label": f"sliding window ({WINDOW} steps)", "x": x, "y": window},
                    {"label": "full history (actions only)", "x": x, "y": full},
                ],
            }
        ],
        title=f"{args.env}, {args.model} tokenizer",
    )
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    main()
