"""A generation backend built on first use.

With remote EnvRunners, the local EnvRunner in the driver samples nothing in lock-step training and only
evaluates in asynchronous training, yet it builds its module and backend like every runner. For ``hf`` that
costs nothing beyond the module; for ``vllm`` it is a second engine per run on the card (its KV cache, its
CUDA graphs, a start that can fail while other engines size their caches: notes/vllm.md).
:class:`DeferredBackend` builds the backend the first time it has to generate; weight syncs before that only
mark it out of date, and the first build is brought up to the module's weights (``update_weights`` with the
module's current state: a LoRA adapter, say, which an engine exported from the base model would not hold).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rllib_llm.generation.base import GenerationBackend, GenerationOutput, SamplingParams


class DeferredBackend(GenerationBackend):
    """``build()`` makes the real backend at the first :meth:`generate` (or the first attribute read it does
    not have itself); ``module_state()`` gives the weights to sync it to if syncs arrived before that."""

    def __init__(self, build: Callable[[], GenerationBackend], module_state: Callable[[], dict[str, Any]]) -> None:
        self._build = build
        self._module_state = module_state
        self._backend: GenerationBackend | None = None
        self._synced_before_build = False

    @property
    def built(self) -> bool:
        return self._backend is not None

    @property
    def backend(self) -> GenerationBackend:
        """The real backend, built now if it was not yet."""
        if self._backend is None:
            self._backend = self._build()
            if self._synced_before_build:
                self._backend.update_weights(self._module_state())
        return self._backend

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        return self.backend.generate(prompts, params)

    def update_weights(self, state: dict[str, Any]) -> None:
        if self._backend is None:
            self._synced_before_build = True
        else:
            self._backend.update_weights(state)

    def release_memory(self) -> None:
        if self._backend is not None:
            self._backend.release_memory()

    def __getattr__(self, name: str) -> Any:  # the real backend's own attributes (last_sync, llm, ...)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.backend, name)
