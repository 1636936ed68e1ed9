"""Generation backends (see :mod:`rllib_llm.generation.base`)."""

from __future__ import annotations

from typing import Any

from rllib_llm.generation.base import GenerationBackend, GenerationOutput, SamplingParams, truncate_at_stop
from rllib_llm.registry import Registry

#: Name -> GenerationBackend class (``.generation(backend=NAME)``); imported when first used (vLLM is optional).
BACKENDS = Registry("generation backend", {
    "hf": "rllib_llm.generation.hf:HFBackend",
    "vllm": "rllib_llm.generation.vllm:VLLMBackend",
})


def register_backend(name: str, backend: type[GenerationBackend] | str) -> None:
    """Adds a generation backend: a GenerationBackend class (``cls(model=..., tokenizer=..., **options)``) or
    its ``"module:Class"`` path."""
    BACKENDS.register(name, backend)


def make_backend(name: str, *, model: Any, tokenizer: Any, **options: Any) -> GenerationBackend:
    """Builds the backend called ``name`` around ``model`` (the env runner's RLModule's HF model)."""
    return BACKENDS.lookup(name)(model=model, tokenizer=tokenizer, **options)


__all__ = [
    "BACKENDS",
    "GenerationBackend",
    "GenerationOutput",
    "SamplingParams",
    "make_backend",
    "register_backend",
    "truncate_at_stop",
]
