"""Tiny models for the generation tests (no Ray needed: these also run on the GPU machine)."""

from __future__ import annotations

import pytest
import torch

from rllib_llm.core.models import build_tiny_model, load_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return load_tokenizer("tiny-random-llama")


@pytest.fixture(scope="session")
def model(tokenizer):
    """Weights large enough that greedy outputs vary token to token (the default init repeats one token)."""
    torch.set_num_threads(1)  # tiny tensors: threads only contend on a shared 2-core box
    return build_tiny_model(tokenizer, initializer_range=0.2).eval()


#: Different lengths, so left padding is exercised.
PROMPTS = [[40 + i for i in range(n)] for n in (3, 7, 1, 12, 5)]
