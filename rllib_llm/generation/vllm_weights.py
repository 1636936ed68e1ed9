"""Moving new weights into an in-process vLLM engine: by CUDA IPC handles, or as pickled CPU copies.

The engine (vLLM's V1 engine core) runs in a process of its own, so weights must cross a process boundary:

- ``cuda_ipc``: the EnvRunner's module already holds the new weights on the GPU. Each tensor travels as a
  CUDA IPC handle (``torch.multiprocessing.reductions.reduce_tensor``, a few hundred bytes), the engine's
  worker opens the same GPU memory (:func:`load_ipc_weights`, run through ``LLM.collective_rpc``) and copies
  it into its own parameters with ``model.load_weights``: no host round trip. Needs the engine on the same
  GPU as the module (colocated, as verl's hybrid engine); measured 0.045 s for 135M parameters against
  1.1-1.5 s for ``pickle`` (``../shared/gpu/vllm/anchor_2026-12-04.md``, ``benchmarks/results/vllm_h200.md``).
- ``pickle``: CPU copies of every tensor, sent with ``LLM.apply_model`` (vLLM >= 0.9; the function and the
  tensors travel pickled, which vLLM allows with ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``) or, on V0 engines,
  loaded directly into ``llm_engine.model_executor.driver_worker.model_runner.model``. Works wherever the
  engine is (another GPU, or the module on the CPU).
- ``auto`` (the default): ``cuda_ipc`` when every tensor is on a CUDA device and the engine has
  ``collective_rpc``, else ``pickle``. A failed IPC load (e.g. the engine on another GPU) falls back to
  ``pickle`` once, with a warning, and stays there.

Either way the prefix cache is reset afterwards: its KV blocks were computed by the old weights.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

WEIGHT_SYNC_MODES = ("auto", "cuda_ipc", "pickle")

#: Position of ``storage_device`` in ``rebuild_cuda_tensor``'s arguments (torch.multiprocessing.reductions).
_STORAGE_DEVICE_ARG = 6


def normalize_weight_names(state: Mapping[str, Any]) -> dict[str, Any]:
    """RLModule state keys -> Hugging Face checkpoint names (what vLLM's ``load_weights`` expects).

    The module keeps the HF model as ``.model``, so its keys read ``model.model.layers...`` and
    ``model.lm_head...``; one leading ``model.`` goes.
    """
    if state and all(k.startswith("model.") for k in state):
        inner = [k[len("model.") :] for k in state]
        if any(k.startswith(("model.", "lm_head.")) for k in inner):
            return {k[len("model.") :]: v for k, v in state.items()}
    return dict(state)


def choose_weight_sync(mode: str, weights: Mapping[str, Any], llm: Any) -> str:
    """The path ``mode`` resolves to for these weights and this engine (see the module docstring)."""
    if mode not in WEIGHT_SYNC_MODES:
        raise ValueError(f"weight_sync must be one of {WEIGHT_SYNC_MODES}, got {mode!r}")
    if mode != "auto":
        return mode
    on_cuda = bool(weights) and all(getattr(getattr(t, "device", None), "type", None) == "cuda" for t in weights.values())
    return "cuda_ipc" if on_cuda and hasattr(llm, "collective_rpc") else "pickle"


# --- pickle ------------------------------------------------------------------------------------------


def as_cpu_tensors(state: Mapping[str, Any]) -> list[tuple[str, Any]]:
    import torch

    return [(name, torch.as_tensor(value).detach().to("cpu")) for name, value in state.items()]


def _load_into(model: Any, weights: list[tuple[str, Any]]) -> None:
    model.load_weights(weights=iter(weights))


def load_engine_weights(llm: Any, weights: list[tuple[str, Any]]) -> str:
    """Loads ``weights`` (CPU tensors) into an in-process vLLM engine's model; returns which path was used.

    Version-guarded: ``LLM.apply_model`` (vLLM >= 0.9, also reaches a V1 engine-core process, the weights
    travel pickled) or the V0 attribute path. Resets the prefix cache afterwards.
    """
    if hasattr(llm, "apply_model"):
        llm.apply_model(functools.partial(_load_into, weights=weights))
        path = "apply_model"
    else:
        executor = getattr(getattr(llm, "llm_engine", None), "model_executor", None)
        worker = getattr(executor, "driver_worker", None)
        runner = getattr(worker, "model_runner", None) or getattr(getattr(worker, "worker", None), "model_runner", None)
        model = getattr(runner, "model", None)
        if model is None:
            raise RuntimeError(
                "Cannot reach the model inside this vLLM engine to load weights (no LLM.apply_model and no "
                "llm_engine.model_executor.driver_worker.model_runner.model). Upgrade vLLM (>= 0.9) or use LoRA."
            )
        _load_into(model, weights)
        path = "driver_worker.model_runner.model"
    if hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()
    return path


# --- CUDA IPC ----------------------------------------------------------------------------------------


def cuda_ipc_handles(weights: Mapping[str, Any]) -> tuple[list[tuple[str, tuple]], list[Any]]:
    """(name, ``rebuild_cuda_tensor`` arguments) per tensor, and the contiguous tensors the handles point
    at: the caller keeps those alive until the engine has copied them."""
    from torch.multiprocessing.reductions import reduce_tensor

    handles, keep = [], []
    for name, tensor in weights.items():
        tensor = tensor.detach().contiguous()
        keep.append(tensor)
        handles.append((name, tuple(reduce_tensor(tensor)[1])))
    return handles, keep


def load_ipc_weights(worker: Any, handles: list[tuple[str, tuple]]) -> int:
    """Runs inside each vLLM worker (``LLM.collective_rpc``): opens the sender's GPU tensors from their IPC
    handles on this worker's device and loads them into the engine's model; returns the tensor count."""
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    device = torch.cuda.current_device()
    weights = []
    for name, args in handles:
        args = list(args)
        args[_STORAGE_DEVICE_ARG] = device
        weights.append((name, rebuild_cuda_tensor(*args)))
    worker.get_model().load_weights(weights=weights)
    torch.cuda.synchronize()
    return len(weights)


def load_engine_weights_ipc(llm: Any, weights: Mapping[str, Any]) -> str:
    """Loads CUDA ``weights`` into the engine by IPC handles (:func:`load_ipc_weights` on every worker);
    resets the prefix cache. Raises what the engine raised (the caller may fall back to ``pickle``)."""
    import torch

    torch.cuda.synchronize()  # the handles must point at finished writes
    handles, keep = cuda_ipc_handles(weights)
    counts = llm.collective_rpc(load_ipc_weights, args=(handles,))
    del keep  # the workers have copied the tensors (collective_rpc returns after every worker did)
    if any(int(c) != len(handles) for c in counts):
        raise RuntimeError(f"vLLM workers loaded {counts} tensors over CUDA IPC, expected {len(handles)} each")
    if hasattr(llm, "reset_prefix_cache"):
        llm.reset_prefix_cache()
    return "cuda_ipc"
