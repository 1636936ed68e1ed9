"""The CUDA-graph decode path against the same loop without graphs and against the eager loop (GPU only)."""

from __future__ import annotations

import pytest
import torch

from rllib_llm.core.models import build_tiny_model
from rllib_llm.generation import SamplingParams, make_backend
from tests.generation.conftest import PROMPTS
from tests.generation.test_hf_static import GREEDY, assert_same

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def cuda_model(tokenizer, dtype):
    return build_tiny_model(tokenizer, initializer_range=0.2).to("cuda", dtype).eval()


def backend(model, tokenizer, mode: str, **options):
    flags = {"graph": {"cuda_graphs": True}, "static": {"cuda_graphs": False, "static_cache": True}}
    settings = flags.get(mode, {"static_cache": False})
    made = make_backend("hf", model=model, tokenizer=tokenizer, **{"batch_buckets": (2, 4, 8), **settings, **options})
    assert made.decode_mode() == mode
    return made


def test_auto_mode_picks_graphs_on_cuda(tokenizer):
    assert make_backend("hf", model=cuda_model(tokenizer, torch.float32), tokenizer=tokenizer).decode_mode() == "graph"


def test_graph_replay_equals_the_same_loop_without_graphs_in_bf16(tokenizer):
    model = cuda_model(tokenizer, torch.bfloat16)
    free = backend(model, tokenizer, "static").generate(PROMPTS, GREEDY)
    params = GREEDY.replace(stop=[free[0].text[4:6]])
    graphed = backend(model, tokenizer, "graph", sync_every=2)
    expected = backend(model, tokenizer, "static", sync_every=2).generate(PROMPTS, params)
    assert_same(expected, graphed.generate(PROMPTS, params), atol=1e-6)
    captures = graphed.stats["captures"]
    assert captures >= 1
    assert_same(expected, graphed.generate(PROMPTS, params), atol=1e-6)
    assert graphed.stats["captures"] == captures  # graphs are reused across calls


def test_graph_path_matches_the_eager_loop_for_greedy_in_fp32(tokenizer):
    model = cuda_model(tokenizer, torch.float32)
    expected = backend(model, tokenizer, "eager").generate(PROMPTS * 2, GREEDY)
    assert_same(expected, backend(model, tokenizer, "graph").generate(PROMPTS * 2, GREEDY))


def test_graph_path_sampled_logprobs_match_a_full_forward(tokenizer):
    model = cuda_model(tokenizer, torch.float32)
    params = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=12, stop=[], seed=5)
    made = backend(model, tokenizer, "graph")
    outs = made.generate(PROMPTS, params)
    assert [o.token_ids for o in made.generate(PROMPTS, params)] == [o.token_ids for o in outs]
    for prompt, out in zip(PROMPTS, outs, strict=True):
        ids = torch.tensor([prompt + out.token_ids], device="cuda")
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        logp = torch.log_softmax(logits / params.temperature, -1).gather(-1, ids[0, len(prompt) :, None])[:, 0]
        torch.testing.assert_close(torch.tensor(out.logprobs), logp.cpu(), atol=1e-4, rtol=0)
