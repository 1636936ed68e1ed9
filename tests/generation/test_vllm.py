"""The vllm backend without vLLM: request building and output parsing as pure functions, and the backend
wired to a fake ``vllm`` module (engine construction, generation, weight and LoRA sync, remote server)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rllib_llm.core.models import apply_lora, build_tiny_model
from rllib_llm.generation import SamplingParams, make_backend
from rllib_llm.generation import vllm as vllm_backend
from rllib_llm.generation.vllm import (
    check_attention_dtype,
    completion_request,
    map_finish_reason,
    parse_completion_choice,
    parse_request_output,
    sampling_kwargs,
    tokens_prompt,
)
from rllib_llm.generation.vllm_weights import choose_weight_sync, load_engine_weights, normalize_weight_names
from tests.fake_backends import FakeEngineModel, completion, install_fake_vllm


@pytest.mark.parametrize("dtype", ["float32", "float", torch.float32])
def test_half_precision_attention_with_a_float32_engine_is_one_clear_error(dtype):
    with pytest.raises(ValueError, match="needs a bfloat16 or float16 engine"):
        check_attention_dtype({"attention_backend": "flash_attn", "dtype": dtype})


@pytest.mark.parametrize("kwargs", [{"attention_backend": "FLASH_ATTN", "dtype": "bfloat16"},
                                    {"attention_backend": "TRITON_ATTN", "dtype": "float32"}, {"dtype": "float"}])
def test_attention_check_passes_engines_that_can_start(kwargs):
    check_attention_dtype(kwargs)


def test_sampling_kwargs_map_every_field_and_seed_each_request():
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=12, stop=["</a>", ""], seed=10)
    kwargs = sampling_kwargs(params, index=3)
    assert kwargs == {
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 12,
        "stop": ["</a>"],
        "include_stop_str_in_output": True,
        "logprobs": 0,
        "ignore_eos": False,
        "skip_special_tokens": True,
        "seed": 13,
    }
    greedy = sampling_kwargs(params.replace(greedy=True, seed=None, ignore_eos=True))
    assert (greedy["temperature"], greedy["top_p"], greedy["ignore_eos"], "seed" in greedy) == (0.0, 1.0, True, False)
    assert tokens_prompt([1, 2]) == {"prompt_token_ids": [1, 2]}


def test_request_output_parsing_and_finish_reasons():
    stop = ["</a>"]
    out = parse_request_output(SimpleNamespace(outputs=[completion([5, 6, 7], "x</a>y", "stop", "</a>")]), stop)
    assert (out.token_ids, out.logprobs, out.text, out.finish_reason) == (
        [5, 6, 7],
        [-0.5, -1.0, -1.5],
        "x</a>",
        "stop",
    )
    assert (
        parse_request_output(SimpleNamespace(outputs=[completion([5], "x", "stop", None)]), stop).finish_reason == "eos"
    )
    assert map_finish_reason("stop", 42) == "eos"  # a stop token id
    assert map_finish_reason("length", None) == "length"
    with pytest.raises(RuntimeError, match="abort"):
        map_finish_reason("abort", None)
    with pytest.raises(ValueError, match="no log-probs"):
        parse_request_output(SimpleNamespace(outputs=[completion([5], "x", logprobs=False)]), stop)


def test_server_request_and_choice_parsing():
    params = SamplingParams(max_new_tokens=4, stop=["</a>"], seed=1)
    body = completion_request([3, 4], params, "policy", index=2)
    assert body["prompt"] == [3, 4] and body["model"] == "policy" and body["seed"] == 3
    assert body["return_tokens_as_token_ids"] is True and body["logprobs"] == 0
    choice = {
        "text": "ok</a>!",
        "finish_reason": "stop",
        "stop_reason": "</a>",
        "logprobs": {"tokens": ["token_id:7", "token_id:8"], "token_logprobs": [-0.1, -0.2]},
    }
    out = parse_completion_choice(choice, params.stop)
    assert (out.token_ids, out.logprobs, out.text, out.finish_reason) == ([7, 8], [-0.1, -0.2], "ok</a>", "stop")
    with pytest.raises(ValueError, match="token_id"):
        parse_completion_choice({**choice, "logprobs": {"tokens": ["ok"], "token_logprobs": [0.0]}}, [])


def test_rl_module_weight_names_become_checkpoint_names():
    state = {"model.model.layers.0.mlp.up_proj.weight": 1, "model.lm_head.weight": 2}
    assert normalize_weight_names(state) == {"model.layers.0.mlp.up_proj.weight": 1, "lm_head.weight": 2}
    plain = {"model.layers.0.mlp.up_proj.weight": 1, "lm_head.weight": 2}
    assert normalize_weight_names(plain) == plain


def test_missing_vllm_fails_with_an_install_hint(monkeypatch, model, tokenizer):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match=r"pip install rllib-llm\[gpu\]"):
        make_backend("vllm", model=model, tokenizer=tokenizer)


@pytest.fixture
def fake_vllm(monkeypatch):
    return install_fake_vllm(monkeypatch)


def test_in_process_engine_generation_and_full_weight_sync(fake_vllm, tokenizer):
    model = build_tiny_model(tokenizer)
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, engine_kwargs={"max_model_len": 512})
    llm = backend.llm
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs" and llm.kwargs["dtype"] == "float32"
    assert llm.kwargs["max_model_len"] == 512 and "enable_lora" not in llm.kwargs
    assert (Path(llm.kwargs["model"]) / "config.json").is_file()  # the unnamed tiny model was exported
    outs = backend.generate([[1, 2, 3], [4, 5]], SamplingParams(max_new_tokens=3, seed=7))
    assert [o.token_ids for o in outs] == [[3], [5]]
    assert [s["seed"] for s in llm.calls[0]["sampling"]] == [7, 8]
    backend.generate([[1, 2, 3], [4, 5]], SamplingParams(max_new_tokens=3))  # no seed: one SamplingParams
    assert llm.calls[1]["sampling"]["max_tokens"] == 3 and "seed" not in llm.calls[1]["sampling"]
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)
    backend.update_weights({})
    loaded = dict(llm.engine_model.loaded)
    assert set(loaded) == set(model.state_dict()) and llm.prefix_resets == 1
    torch.testing.assert_close(loaded["lm_head.weight"], model.lm_head.weight.detach())


def test_v0_engines_are_reached_through_the_driver_worker():
    engine_model = FakeEngineModel()
    runner = SimpleNamespace(model=engine_model)
    llm = SimpleNamespace(
        llm_engine=SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)))
    )
    assert load_engine_weights(llm, [("w", torch.ones(1))]) == "driver_worker.model_runner.model"
    assert [n for n, _ in engine_model.loaded] == ["w"]
    with pytest.raises(RuntimeError, match="Cannot reach the model"):
        load_engine_weights(SimpleNamespace(), [])


def test_lora_models_sync_adapters_as_new_lora_requests(fake_vllm, tokenizer, tmp_path):
    model = apply_lora(build_tiny_model(tokenizer), {"r": 4, "lora_alpha": 8})
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, adapter_dir=str(tmp_path))
    assert backend.llm.kwargs["enable_lora"] is True and backend.llm.kwargs["max_lora_rank"] == 8
    from safetensors import safe_open

    exported = Path(backend.llm.kwargs["model"])  # the base without peft's layers, under checkpoint names
    with safe_open(str(next(exported.glob("*.safetensors"))), "pt") as f:
        names = set(f.keys())
    assert names and not any("lora_" in n or "base_layer" in n for n in names)
    assert "model.layers.0.self_attn.q_proj.weight" in names
    backend.generate([[1]], SamplingParams())
    assert backend.llm.calls[-1]["lora"] is None
    for version in (1, 2):
        backend.update_weights({})
        backend.generate([[1]], SamplingParams())
        request = backend.llm.calls[-1]["lora"]
        assert (request.name, request.id) == (f"policy-v{version}", version)
        assert json.loads((Path(request.path) / "adapter_config.json").read_text())["r"] == 4
    assert backend.llm.engine_model.loaded == []  # no full-weight traffic with LoRA


def test_remote_server_requests_and_weight_rules(monkeypatch, tokenizer):
    requests: list[tuple[str, dict | None]] = []

    def fake_http(self, path, body=None):
        requests.append((path, body))
        if path == "/models":
            return {"data": [{"id": "served"}]}
        if path == "/completions":
            last = body["prompt"][-1]
            return {
                "choices": [
                    {
                        "text": "t",
                        "finish_reason": "length",
                        "logprobs": {"tokens": [f"token_id:{last}"], "token_logprobs": [-1.0]},
                    }
                ]
            }
        return "ok"

    monkeypatch.setattr("rllib_llm.generation.vllm.VLLMBackend._http", fake_http)
    monkeypatch.setitem(sys.modules, "vllm", None)  # a remote engine needs no vLLM here
    backend = make_backend("vllm", model=None, tokenizer=tokenizer, base_url="http://server:8000/v1/")
    outs = backend.generate([[1, 2], [3]], SamplingParams(seed=0))
    assert [o.token_ids for o in outs] == [[2], [3]]
    bodies = sorted((b for p, b in requests if p == "/completions"), key=lambda b: b["seed"])
    assert [(b["model"], b["seed"]) for b in bodies] == [("served", 0), ("served", 1)]
    with pytest.raises(NotImplementedError, match="LoRA"):
        backend.update_weights({"w": torch.ones(1)})


def test_remote_lora_versions_are_loaded_by_the_server(monkeypatch, tokenizer, tmp_path):
    requests: list[tuple[str, dict | None]] = []

    def fake_http(self, path, body=None):
        requests.append((path, body))
        if path == "/completions":
            return {
                "choices": [{"text": "", "finish_reason": "length", "logprobs": {"tokens": [], "token_logprobs": []}}]
            }
        return {"data": [{"id": "base"}]} if path == "/models" else "ok"

    monkeypatch.setattr("rllib_llm.generation.vllm.VLLMBackend._http", fake_http)
    model = apply_lora(build_tiny_model(tokenizer), {"r": 4, "lora_alpha": 8})
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, base_url="http://s/v1", adapter_dir=str(tmp_path))
    backend.update_weights({})
    backend.generate([[1]], SamplingParams())
    load = next(b for p, b in requests if p == "/load_lora_adapter")
    assert load["lora_name"] == "policy-v1" and (Path(load["lora_path"]) / "adapter_config.json").is_file()
    assert requests[-1][1]["model"] == "policy-v1"


# --- weight sync paths and colocation (sleep mode) ---------------------------------------------------------


def test_weight_sync_choice():
    on_cuda = {"w": SimpleNamespace(device=SimpleNamespace(type="cuda"))}
    engine, old_engine = SimpleNamespace(collective_rpc=None), SimpleNamespace()
    assert choose_weight_sync("auto", on_cuda, engine) == "cuda_ipc"
    assert choose_weight_sync("auto", on_cuda, old_engine) == "pickle"  # no collective_rpc
    assert choose_weight_sync("auto", {"w": torch.ones(1)}, engine) == "pickle"  # CPU tensors
    assert choose_weight_sync("auto", {}, engine) == "pickle"
    assert choose_weight_sync("pickle", on_cuda, engine) == "pickle"
    with pytest.raises(ValueError, match="weight_sync must be one of"):
        choose_weight_sync("nccl", on_cuda, engine)


def test_full_weight_sync_uses_cuda_ipc_and_falls_back_to_pickle_once(fake_vllm, tokenizer, monkeypatch, caplog):
    model = build_tiny_model(tokenizer)
    ipc_calls = []

    def ipc(llm, weights):
        ipc_calls.append(set(weights))
        return "cuda_ipc"

    monkeypatch.setattr(vllm_backend, "load_engine_weights_ipc", ipc)
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, weight_sync="cuda_ipc")
    backend.update_weights({})
    assert backend.last_sync == "cuda_ipc" and ipc_calls == [set(model.state_dict())]
    assert backend.llm.engine_model.loaded == []  # nothing pickled

    def broken(llm, weights):
        raise RuntimeError("invalid device pointer")

    monkeypatch.setattr(vllm_backend, "load_engine_weights_ipc", broken)
    with pytest.raises(RuntimeError, match="invalid device pointer"):  # asked for IPC explicitly: no fallback
        backend.update_weights({})
    monkeypatch.setattr(vllm_backend, "choose_weight_sync", lambda mode, weights, llm: "cuda_ipc" if mode == "auto" else mode)
    auto = make_backend("vllm", model=model, tokenizer=tokenizer)
    with caplog.at_level("WARNING"):
        auto.update_weights({})
    assert auto.last_sync == "apply_model" and auto.weight_sync == "pickle"
    assert "CUDA IPC failed" in caplog.text and set(dict(auto.llm.engine_model.loaded)) == set(model.state_dict())
    with pytest.raises(ValueError, match="weight_sync must be one of"):
        make_backend("vllm", model=model, tokenizer=tokenizer, weight_sync="nccl")


def test_sleep_between_rollouts_frees_the_engine_and_wakes_what_each_call_needs(fake_vllm, tokenizer):
    model = build_tiny_model(tokenizer)
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, weight_sync="pickle", sleep_between_rollouts=True)
    llm = backend.llm
    assert llm.kwargs["enable_sleep_mode"] is True
    backend.generate([[1]], SamplingParams())
    assert llm.events == []  # awake from the start
    backend.release_memory()
    backend.release_memory()  # already asleep: once
    assert llm.events == [("sleep", 1)]
    backend.update_weights({})  # the weights wake for the sync, the KV cache stays freed
    assert llm.events[-1] == ("wake_up", ("weights",)) and len(llm.engine_model.loaded) > 0
    backend.generate([[1]], SamplingParams())
    backend.generate([[1]], SamplingParams())
    assert llm.events[1:] == [("wake_up", ("weights",)), ("wake_up", ("kv_cache",))]
    backend.release_memory()
    backend.generate([[1]], SamplingParams())  # no sync in between: everything wakes at once
    assert llm.events[-2:] == [("sleep", 1), ("wake_up", ("kv_cache", "weights"))]
    assert "enable_sleep_mode" not in make_backend("vllm", model=model, tokenizer=tokenizer).llm.kwargs


def test_level_2_sleep_reloads_dropped_weights_unless_a_sync_brings_them(fake_vllm, tokenizer):
    model = build_tiny_model(tokenizer)
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, weight_sync="pickle",
                           sleep_between_rollouts=True, sleep_level=2)
    llm = backend.llm
    backend.release_memory()
    backend.generate([[1]], SamplingParams())  # weights were dropped: loaded again from the local model
    assert llm.events == [("sleep", 2), ("wake_up", ("kv_cache", "weights"))]
    assert set(dict(llm.engine_model.loaded)) == set(model.state_dict())
    loaded = len(llm.engine_model.loaded)
    backend.release_memory()
    backend.update_weights({})  # the sync brings the weights: loaded once, not twice
    backend.generate([[1]], SamplingParams())
    assert len(llm.engine_model.loaded) == 2 * loaded
    lora = apply_lora(build_tiny_model(tokenizer), {"r": 4, "lora_alpha": 8})
    with pytest.raises(ValueError, match="sleep_level=2 drops"):
        make_backend("vllm", model=lora, tokenizer=tokenizer, sleep_between_rollouts=True, sleep_level=2)


def test_an_engine_without_flashinfer_samples_with_vllms_own_sampler(fake_vllm, tokenizer, monkeypatch):
    """vLLM 0.24 dies at engine start on a build without FlashInfer unless VLLM_USE_FLASHINFER_SAMPLER=0
    (benchmarks/vllm_actor_check.py); the backend sets it before the engine starts, and keeps a user's value."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "flashinfer" else real_find_spec(name, *a))
    monkeypatch.delenv("VLLM_USE_FLASHINFER_SAMPLER", raising=False)
    seen = {}
    engine = fake_vllm.LLM

    def starting_engine(**kwargs):
        seen["flag"] = os.environ.get("VLLM_USE_FLASHINFER_SAMPLER")
        return engine(**kwargs)

    monkeypatch.setattr(fake_vllm, "LLM", starting_engine)
    make_backend("vllm", model=build_tiny_model(tokenizer), tokenizer=tokenizer)
    assert seen["flag"] == "0"
    monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "1")
    assert vllm_backend.avoid_missing_flashinfer() is False and os.environ["VLLM_USE_FLASHINFER_SAMPLER"] == "1"


def test_flash_attention_with_an_fp32_engine_is_a_one_line_error(fake_vllm, tokenizer):
    """On the GPU (2026-12-06) this combination died inside vLLM's engine core ("dtype not supported")."""
    model = build_tiny_model(tokenizer)  # fp32
    with pytest.raises(ValueError, match="inference_dtype"):
        make_backend("vllm", model=model, tokenizer=tokenizer, engine_kwargs={"attention_backend": "FLASH_ATTN"})
    backend = make_backend("vllm", model=model.to(torch.bfloat16), tokenizer=tokenizer,
                           engine_kwargs={"attention_backend": "FLASH_ATTN"})
    assert backend.llm.kwargs["dtype"] == "bfloat16"
    make_backend("vllm", model=model.float(), tokenizer=tokenizer, engine_kwargs={"attention_backend": "TRITON_ATTN"})


def test_the_lora_swap_measurement_times_each_sync_of_new_adapters(fake_vllm, tokenizer, tmp_path):
    """benchmarks/vllm_gpu.py's ``lora`` section on the fake engine: every sync moves new adapter weights (only
    the LoRA B matrices are perturbed) and is a new LoRA request the next generate uses."""
    from benchmarks.vllm_gpu import lora_swaps

    model = apply_lora(build_tiny_model(tokenizer), {"r": 4, "lora_alpha": 8})
    base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_B" not in n}
    backend = make_backend("vllm", model=model, tokenizer=tokenizer, adapter_dir=str(tmp_path))
    before = [p.detach().clone() for n, p in model.named_parameters() if "lora_B" in n]
    rows = lora_swaps(backend, model, [[1, 2], [3]], repeats=2)
    assert [sorted(r) for r in rows] == [["first_generate_s", "steady_generate_s", "swap_s", "sync_s"]] * 2
    assert all(r["sync_s"] > 0 and r["swap_s"] == pytest.approx(r["sync_s"] + r["first_generate_s"] - r["steady_generate_s"])
               for r in rows)
    assert [c["lora"].id for c in backend.llm.calls[1:]] == [1, 1, 2, 2]  # warm-up on the base, then each version
    after = [p.detach() for n, p in model.named_parameters() if "lora_B" in n]
    assert all(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    assert all(torch.equal(p.detach(), base[n]) for n, p in model.named_parameters() if "lora_B" not in n)


def test_vllms_moe_kernel_notice_is_dropped_at_its_logger_and_other_records_pass(caplog):
    """A dense model's run logged "Failed to import from vllm._moe_C_stable_libtorch" 8 times (issue 46);
    import_vllm installs the filter before vLLM is imported, whether or not it is installed."""
    import logging

    from rllib_llm.generation.vllm import import_vllm

    try:
        import_vllm()
    except ImportError:
        pass  # no vLLM here: the filter is installed all the same
    cuda = logging.getLogger("vllm.platforms.cuda")
    with caplog.at_level(logging.WARNING):
        cuda.warning("Failed to import from vllm._moe_C_stable_libtorch: ModuleNotFoundError(...)")
        cuda.warning("Failed to import from vllm._C with ImportError(...)")  # a real problem: kept
    assert [r.getMessage() for r in caplog.records] == ["Failed to import from vllm._C with ImportError(...)"]
    filters = len(cuda.filters)
    try:
        import_vllm()
    except ImportError:
        pass
    assert len(cuda.filters) == filters  # installed once
