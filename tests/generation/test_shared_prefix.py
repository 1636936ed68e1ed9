"""The eager loop prefills the prompt prefix all rows share once; results must not change."""

import torch

from rllib_llm.core.models import TINY_MODEL, load_causal_lm, load_tokenizer
from rllib_llm.generation import SamplingParams, make_backend


def test_shared_prefix_prefill_matches_per_prompt_generation():
    tokenizer = load_tokenizer(TINY_MODEL)
    model = load_causal_lm(TINY_MODEL)
    backend = make_backend("hf", model=model, tokenizer=tokenizer, cuda_graphs=False, static_cache=False)
    shared = list(range(60, 100))
    prompts = [shared + [5, 6, 7], shared + [8], shared + [9, 10, 11, 12]]
    params = SamplingParams(greedy=True, max_new_tokens=6, stop=[])
    batched = backend.generate(prompts, params)
    assert backend.stats["shared_prefix_tokens"] == len(shared)
    for prompt, out in zip(prompts, batched, strict=True):
        alone = backend.generate([prompt], params)[0]
        assert out.token_ids == alone.token_ids
        torch.testing.assert_close(torch.tensor(out.logprobs), torch.tensor(alone.logprobs), rtol=1e-4, atol=1e-4)
