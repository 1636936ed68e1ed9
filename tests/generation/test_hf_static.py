"""The static-cache decode loop (the CUDA-graph path without graphs) against the eager loop, on CPU."""

from __future__ import annotations

import logging

import pytest
import torch

from rllib_llm.core.models import apply_lora, build_tiny_model
from rllib_llm.generation import SamplingParams, make_backend
from rllib_llm.generation.hf import HFBackend
from rllib_llm.generation.static import batch_bucket, cache_length_bucket, make_batch_buckets
from tests.generation.conftest import PROMPTS

GREEDY = SamplingParams(greedy=True, max_new_tokens=24, stop=[])


def eager(model, tokenizer, **options) -> HFBackend:
    return make_backend("hf", model=model, tokenizer=tokenizer, static_cache=False, **options)


def static(model, tokenizer, **options) -> HFBackend:
    options = {"batch_buckets": (1, 2, 4), "sync_every": 3, **options}
    return make_backend("hf", model=model, tokenizer=tokenizer, static_cache=True, **options)


def assert_same(expected, actual, atol=1e-4):
    assert [o.token_ids for o in actual] == [o.token_ids for o in expected]
    assert [o.finish_reason for o in actual] == [o.finish_reason for o in expected]
    assert [o.text for o in actual] == [o.text for o in expected]
    for a, b in zip(expected, actual, strict=True):
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=atol, rtol=0)


@pytest.mark.parametrize("sync_every", [1, 3, 8, 100])
def test_static_loop_matches_eager_loop_for_greedy_decoding(model, tokenizer, sync_every):
    expected = eager(model, tokenizer).generate(PROMPTS, GREEDY)
    backend = static(model, tokenizer, sync_every=sync_every)
    assert backend.decode_mode() == "static"
    actual = backend.generate(PROMPTS, GREEDY)
    assert backend.stats["static_batches"] == 1 and backend.stats["eager_batches"] == 0
    assert len({len(o.token_ids) for o in expected}) > 1, "want rows of different lengths (an eos)"
    assert_same(expected, actual)


def test_stop_strings_and_eos_end_rows_at_the_same_token_and_the_batch_shrinks(model, tokenizer):
    free = eager(model, tokenizer).generate(PROMPTS, GREEDY)
    # A stop string that row 0 produces mid-way, and an eos token that row 3 produces mid-way.
    stop = free[0].text[6:8]
    eos_token = free[3].token_ids[9]
    params = GREEDY.replace(stop=[stop])
    reference = eager(model, tokenizer)
    reference.eos_ids.add(eos_token)
    expected = reference.generate(PROMPTS, params)
    assert "stop" in {o.finish_reason for o in expected} and "eos" in {o.finish_reason for o in expected}
    assert expected[0].finish_reason == "stop" and expected[0].text.endswith(stop)
    backend = static(model, tokenizer, batch_buckets=(1, 2, 4, 8), sync_every=2)
    backend.eos_ids.add(eos_token)
    actual = backend.generate(PROMPTS, params)
    assert_same(expected, actual)
    assert backend.stats["compactions"] >= 1  # 5 rows start in bucket 8; finished rows let them move down


def test_ignore_eos_runs_every_row_to_max_new_tokens(model, tokenizer):
    params = GREEDY.replace(ignore_eos=True)
    outs = static(model, tokenizer).generate(PROMPTS, params)
    assert all(len(o.token_ids) == params.max_new_tokens and o.finish_reason == "length" for o in outs)
    assert "eos" in {o.finish_reason for o in static(model, tokenizer).generate(PROMPTS, GREEDY)}
    assert_same(eager(model, tokenizer).generate(PROMPTS, params), outs)


def test_sampled_logprobs_are_those_of_a_full_forward_under_temperature(model, tokenizer):
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=10, stop=[], seed=3)
    backend = static(model, tokenizer)
    outs = backend.generate(PROMPTS, params)
    assert [o.token_ids for o in backend.generate(PROMPTS, params)] == [o.token_ids for o in outs]  # seeded
    for prompt, out in zip(PROMPTS, outs, strict=True):
        ids = torch.tensor([prompt + out.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
        logp = torch.log_softmax(logits / params.temperature, -1)[
            torch.arange(len(out.token_ids)), ids[0, len(prompt) :]
        ]
        torch.testing.assert_close(torch.tensor(out.logprobs), logp, atol=1e-4, rtol=0)


def test_batches_larger_than_max_batch_size_and_single_token_responses(model, tokenizer):
    prompts = PROMPTS * 3
    for params in (GREEDY, GREEDY.replace(max_new_tokens=1)):
        expected = eager(model, tokenizer, max_batch_size=4).generate(prompts, params)
        assert_same(expected, static(model, tokenizer, max_batch_size=4).generate(prompts, params))


def test_lora_wrapped_model_passes_its_cache_through(tokenizer):
    model = apply_lora(build_tiny_model(tokenizer, initializer_range=0.2), {"r": 4, "lora_alpha": 8})
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.1)  # non-zero adapters, so they matter
    expected = eager(model, tokenizer).generate(PROMPTS, GREEDY)
    assert_same(expected, static(model, tokenizer).generate(PROMPTS, GREEDY))


def test_in_place_weight_updates_are_seen_and_reallocated_weights_reset_the_cache(tokenizer):
    model = build_tiny_model(tokenizer, initializer_range=0.2).eval()
    backend = static(model, tokenizer)
    before = backend.generate(PROMPTS, GREEDY)
    kv = next(iter(backend._caches.values()))
    with torch.no_grad():
        for param in model.parameters():
            param.mul_(1.5)  # an in-place sync, like RLModule.set_state
    after = backend.generate(PROMPTS, GREEDY)
    assert next(iter(backend._caches.values())) is kv
    assert [o.token_ids for o in after] != [o.token_ids for o in before]
    assert_same(eager(model, tokenizer).generate(PROMPTS, GREEDY), after)
    model.load_state_dict({k: v.clone() for k, v in model.state_dict().items()}, assign=True)
    backend.generate(PROMPTS, GREEDY)
    assert next(iter(backend._caches.values())) is not kv


def test_decode_mode_selection_and_option_errors(model, tokenizer):
    assert make_backend("hf", model=model, tokenizer=tokenizer).decode_mode() == "eager"  # auto on CPU
    assert static(model, tokenizer).decode_mode() == "static"
    with pytest.raises(ValueError, match="needs a CUDA model"):
        make_backend("hf", model=model, tokenizer=tokenizer, cuda_graphs=True).decode_mode()
    with pytest.raises(ValueError, match="needs the static cache"):
        make_backend("hf", model=model, tokenizer=tokenizer, cuda_graphs=True, static_cache=False)
    with pytest.raises(ValueError, match="cuda_graphs must be"):
        make_backend("hf", model=model, tokenizer=tokenizer, cuda_graphs="yes")


def test_unsupported_models_use_the_eager_loop_or_fail_when_forced(tokenizer):
    model = build_tiny_model(tokenizer)
    model.config.layer_types = ["sliding_attention", "full_attention"]
    with pytest.raises(ValueError, match="sliding_attention"):
        static(model, tokenizer).decode_mode()
    auto = make_backend("hf", model=model, tokenizer=tokenizer)
    auto.cuda_graphs = auto.static_cache = "auto"
    assert auto.decode_mode() == "eager"


def test_auto_mode_falls_back_to_the_eager_loop_when_the_static_loop_fails(model, tokenizer, monkeypatch, caplog):
    backend = make_backend("hf", model=model, tokenizer=tokenizer)
    monkeypatch.setattr(backend, "decode_mode", lambda device=None: "eager" if backend._static_failed else "static")

    def broken(*args, **kwargs):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr("rllib_llm.generation.static.StaticDecoder.prefill", broken)
    with caplog.at_level(logging.WARNING):
        outs = backend.generate(PROMPTS, GREEDY)
    assert "eager loop" in caplog.text and "capturing" in backend._static_failed
    assert backend.stats == {**backend.stats, "eager_batches": 1, "static_batches": 0}
    assert_same(eager(model, tokenizer).generate(PROMPTS, GREEDY), outs)
    forced = static(model, tokenizer)
    with pytest.raises(RuntimeError, match="capturing"):
        forced.generate(PROMPTS, GREEDY)


def test_buckets():
    assert [cache_length_bucket(n) for n in (1, 128, 129, 192, 193, 256, 257, 385, 1000)] == [
        128,
        128,
        192,
        192,
        256,
        256,
        384,
        512,
        1024,
    ]
    assert make_batch_buckets(64) == (8, 16, 32, 64)
    assert make_batch_buckets(100, (8, 128)) == (8, 100)
    assert batch_bucket(9, (8, 16)) == 16
    with pytest.raises(ValueError, match="exceed"):
        batch_bucket(17, (8, 16))


@pytest.mark.slow
def test_compiled_decode_step_matches_the_eager_loop(model, tokenizer):
    """torch.compile of the decode step (minutes on 2 CPU cores: inductor builds C++ kernels)."""
    backend = static(model, tokenizer, compile=True, batch_buckets=(2, 4, 8))
    expected = eager(model, tokenizer).generate(PROMPTS, GREEDY)
    assert_same(expected, backend.generate(PROMPTS, GREEDY))
    assert_same(expected[:3], backend.generate(PROMPTS[:3], GREEDY))  # another bucket: no wrong reuse
