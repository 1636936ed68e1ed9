"""Generation backends that stand in for a model in tests: scripted replies, real token ids, no model.

Each answers a ``generate(prompts, params)`` call as a :class:`~rllib_llm.generation.GenerationBackend`
does (token ids, per-token log-probs, text, finish reason), records the calls, and ignores weight syncs (the base class's hooks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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
