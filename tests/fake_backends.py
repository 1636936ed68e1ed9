"""Generation backends that stand in for a model in tests: scripted replies, real token ids, no model.

Each answers a ``generate(prompts, params)`` call as a :class:`~rllib_llm.generation.GenerationBackend`
does (token ids, per-token log-probs, text, finish reason), records the calls, and ignores weight syncs (the base class's hooks).
:func:`install_fake_vllm` puts a fake ``vllm`` package in place, so the real ``vllm`` backend runs without it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

from rllib_llm.generation import GenerationBackend, GenerationOutput


class PolicyBackend(GenerationBackend):
    """Answers each prompt with ``policy(prompt_text)``; ``calls`` holds the size of every generate call."""

    def __init__(self, tokenizer: Any, policy: Callable[[str], str]) -> None:
        self.tokenizer, self.policy, self.calls = tokenizer, policy, []

    def reply(self, prompt: Any, index: int) -> str:
        return self.policy(self.tokenizer.decode(prompt))

    def generate(self, prompts: Sequence[Any], params: Any) -> list[GenerationOutput]:
        self.calls.append(len(prompts))
        out = []
        for index, prompt in enumerate(prompts):
            text = self.reply(prompt, index)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append(GenerationOutput(token_ids=ids, logprobs=[-1.0] * len(ids), text=text, finish_reason="stop"))
        return out


class ScriptedBackend(PolicyBackend):
    """Answers the i-th prompt of every generate call with ``responses[i % len(responses)]``."""

    def __init__(self, tokenizer: Any, responses: Sequence[str]) -> None:
        super().__init__(tokenizer, policy=lambda text: "")
        self.responses = list(responses)

    def reply(self, prompt: Any, index: int) -> str:
        return self.responses[index % len(self.responses)]


# --- a fake vllm package -------------------------------------------------------------------------------


def completion(token_ids, text, finish_reason="length", stop_reason=None, logprobs=True):
    steps = [
        {tok: SimpleNamespace(logprob=-0.5 * (i + 1)), 999: SimpleNamespace(logprob=-9.0)}
        for i, tok in enumerate(token_ids)
    ]
    return SimpleNamespace(
        token_ids=token_ids,
        text=text,
        logprobs=steps if logprobs else None,
        finish_reason=finish_reason,
        stop_reason=stop_reason,
    )


class FakeEngineModel:
    def __init__(self) -> None:
        self.loaded: list[tuple[str, torch.Tensor]] = []

    def load_weights(self, weights):
        self.loaded.extend(weights)


class FakeLLM:
    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.calls: list[dict] = []
        self.engine_model = FakeEngineModel()
        self.prefix_resets = 0
        self.events: list[tuple] = []

    def generate(self, prompts, sampling, use_tqdm, lora_request):
        self.calls.append({"prompts": prompts, "sampling": sampling, "lora": lora_request})
        return [SimpleNamespace(outputs=[completion(p["prompt_token_ids"][-1:], "t")]) for p in prompts]

    def apply_model(self, func):
        return [func(self.engine_model)]

    def reset_prefix_cache(self):
        self.prefix_resets += 1

    def sleep(self, level):
        self.events.append(("sleep", level))

    def wake_up(self, tags=None):
        self.events.append(("wake_up", tuple(tags)))


@dataclass
class FakeEngineArgs:
    model: str = ""
    logprobs_mode: str = "raw_logprobs"


def install_fake_vllm(monkeypatch: Any) -> types.ModuleType:
    """A ``vllm`` package of fakes in ``sys.modules`` (``LLM`` answers each prompt with its last token and
    records generate calls, weight loads, prefix-cache resets and sleep/wake events); returns the module."""
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = lambda **kw: kw
    module.EngineArgs = FakeEngineArgs
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = lambda name, int_id, path: SimpleNamespace(name=name, id=int_id, path=path)
    for name, mod in (("vllm", module), ("vllm.lora", lora), ("vllm.lora.request", request)):
        monkeypatch.setitem(sys.modules, name, mod)
    return module
