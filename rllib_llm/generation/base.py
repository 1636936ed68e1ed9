"""The generation backend interface: prompts (token ids) in, sampled responses with log-probs out.

The env runner calls :meth:`GenerationBackend.generate` once per environment step with the prompts of all
active envs, so batching is the backend's job. Backends: ``hf`` (transformers, this package) and ``vllm``.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SamplingParams:
    """Sampling settings shared by every backend."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 32
    #: Generation stops after any of these strings (kept in the response).
    stop: list[str] = field(default_factory=lambda: ["</action>"])
    #: Greedy decoding (evaluation); log-probs are still those of the temperature-scaled distribution.
    greedy: bool = False
    seed: int | None = None
    #: Keep generating past end-of-sequence tokens (benchmarks; vLLM's ``ignore_eos``).
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 (use greedy=True for argmax), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SamplingParams:
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"Unknown sampling field(s) {sorted(unknown)}; allowed: {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**values)

    def replace(self, **changes: Any) -> SamplingParams:
        return SamplingParams(**{**asdict(self), **changes})


@dataclass
class GenerationOutput:
    """One response: its token ids, the log-prob of each under the sampling policy, and its text."""

    token_ids: list[int]
    logprobs: list[float]
    text: str
    #: "stop" (stop string), "eos" (end-of-sequence token) or "length" (hit max_new_tokens).
    finish_reason: str


class GenerationBackend(abc.ABC):
    """Generates responses for a batch of prompts; ``update_weights`` receives the Learner's weights."""

    @abc.abstractmethod
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        """One response per prompt, in order."""

    def update_weights(self, state: dict[str, Any]) -> None:  # noqa: B027  (optional hook)
        """Called after the env runner's module got new weights (backends with their own copy reload)."""

    def release_memory(self) -> None:  # noqa: B027  (optional hook)
        """Called when a rollout is over: a backend that holds GPU memory the Learner could use (vLLM's KV
        cache) may free it until the next :meth:`generate` or :meth:`update_weights`."""


def truncate_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """Cuts ``text`` right after the first stop string; returns (text, whether one was found)."""
    cut = [text.index(s) + len(s) for s in stop if s and s in text]
    if not cut:
        return text, False
    return text[: min(cut)], True
