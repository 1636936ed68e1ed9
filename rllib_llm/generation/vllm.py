"""The ``vllm`` backend: vLLM's offline ``LLM`` engine in-process, or a vLLM OpenAI-compatible server.

vLLM is imported lazily (only when an in-process engine is built), so this module imports without it;
``make_backend("vllm", ...)`` without vLLM installed fails with an install hint. The request building
and output parsing are pure functions over plain values, so they are tested without vLLM.

Log-probs. Our contract is the log-prob of each sampled token under softmax(logits / temperature). The
engine is built with ``logprobs_mode="processed_logprobs"`` where the installed vLLM has that option
(>= 0.10.2): log-probs after temperature *and* top-p, i.e. renormalised over the nucleus when
``top_p < 1`` (older vLLM: raw log-probs, temperature 1). Greedy requests are sent as temperature 0,
whose log-probs vLLM reports at temperature 1. The Learner recomputes log-probs anyway; these are the
"old" log-probs of the importance ratio, so keep ``top_p=1`` (the default) for exact PPO/GRPO ratios.

Seeds. vLLM seeds per request; request ``i`` of a batch gets ``seed + i`` so that the identical prompts
of a GRPO group still get different samples.

Weight sync (:meth:`VLLMBackend.update_weights`, called after the env runner's module got new weights):

- LoRA (a peft model): only the adapter moves. It is saved to a new folder and used through a new
  ``LoRARequest`` (vLLM caches adapters by id, so each version gets its own id); the base model in the
  engine is never re-exported. Remote servers load it through ``POST /v1/load_lora_adapter`` (start the
  server with ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and a folder both sides see, ``adapter_dir``).
- Full weights: by CUDA IPC handles when the module is on the GPU (the engine copies from the module's own
  tensors), else pickled CPU copies; ``weight_sync`` picks (:mod:`rllib_llm.generation.vllm_weights`).
  Remote servers cannot receive full weights through the OpenAI API (NotImplementedError).

Colocation (``sleep_between_rollouts=True``, as verl's hybrid engine): the engine is built with vLLM's sleep
mode; when a rollout is over (:meth:`VLLMBackend.release_memory`, called by the EnvRunner) it sleeps, which
frees its KV cache (and, at ``sleep_level`` 1, moves its weights to host memory) while the Learner trains.
A weight sync wakes the weights first; the next ``generate`` wakes the rest.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import os
import tempfile
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rllib_llm.generation.base import GenerationBackend, GenerationOutput, SamplingParams, truncate_at_stop
from rllib_llm.generation.vllm_weights import (
    WEIGHT_SYNC_MODES,
    as_cpu_tensors,
    choose_weight_sync,
    load_engine_weights,
    load_engine_weights_ipc,
    normalize_weight_names,
)
from rllib_llm.log_notices import drop_notices

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install rllib-llm[gpu]  (or: pip install vllm)"


#: vLLM notices a dense model's run cannot act on, dropped at their logger (:func:`drop_notices`):
#: "Failed to import from vllm._moe_C_stable_libtorch" (kernels only mixture-of-experts models use) came 8
#: times per run of a dense model on vLLM 0.24 (issue 46).
VLLM_NOTICES = {"vllm.platforms.cuda": ("Failed to import from vllm._moe_C_stable_libtorch",)}


def import_vllm() -> Any:
    """The vllm module, or an ImportError that says how to install it (its :data:`VLLM_NOTICES` dropped first)."""
    drop_notices(VLLM_NOTICES)
    try:
        import vllm
    except ImportError as e:
        raise ImportError(f"The 'vllm' generation backend needs vLLM, which is not installed: {INSTALL_HINT}") from e
    return vllm


def avoid_missing_flashinfer() -> bool:
    """Picks vLLM's own top-k/top-p sampler when FlashInfer is not installed (True when it did so).

    vLLM 0.24 imports ``flashinfer`` while it builds its sampler unless ``VLLM_USE_FLASHINFER_SAMPLER=0``, so an
    engine on a vLLM without it (a slim or source build) dies at start with ``Engine core initialization
    failed`` and the real error only in the engine process's log: measured on 2026-12-06 in every variant of
    benchmarks/vllm_actor_check.py. The engine process inherits the variable; a value the user set is kept."""
    if "VLLM_USE_FLASHINFER_SAMPLER" in os.environ or importlib.util.find_spec("flashinfer") is not None:
        return False
    os.environ["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
    logger.info("FlashInfer is not installed: vLLM samples with its own top-k/top-p sampler.")
    return True


# --- requests ------------------------------------------------------------------------------------------


#: Attention backends that run only in half precision (vLLM 0.24 refuses them at engine start otherwise).
HALF_PRECISION_ATTENTION = ("FLASH_ATTN", "FLASHINFER")
#: How a float32 engine can be spelled in ``engine_kwargs["dtype"]`` (vLLM takes "float" as float32 too).
FLOAT32_NAMES = ("float32", "float", "torch.float32")


def check_attention_dtype(engine_kwargs: Mapping[str, Any]) -> None:
    """One clear line instead of vLLM's engine-core traceback ("Engine core initialization failed", the cause
    only in the engine's log): a half-precision attention backend with an fp32 engine, which is what an fp32
    module gives (the embedded model loads in fp32) unless ``inference_dtype`` says otherwise."""
    backend = str(engine_kwargs.get("attention_backend") or "").upper()
    if backend in HALF_PRECISION_ATTENTION and str(engine_kwargs.get("dtype")) in FLOAT32_NAMES:
        raise ValueError(f"vLLM's {backend} attention needs a bfloat16 or float16 engine, but the module is float32: "
                         f"set .llm(model={{..., 'inference_dtype': 'bfloat16'}}) or drop attention_backend")


def sampling_kwargs(params: SamplingParams, index: int = 0) -> dict[str, Any]:
    """``vllm.SamplingParams`` keyword arguments for request ``index`` of a batch."""
    kwargs: dict[str, Any] = {
        "temperature": 0.0 if params.greedy else params.temperature,
        "top_p": 1.0 if params.greedy else params.top_p,
        "max_tokens": params.max_new_tokens,
        "stop": [s for s in params.stop if s],
        "include_stop_str_in_output": True,  # our responses keep the stop string
        "logprobs": 0,  # just the sampled token's log-prob
        "ignore_eos": params.ignore_eos,
        "skip_special_tokens": True,
    }
    if params.seed is not None:
        kwargs["seed"] = params.seed + index
    return kwargs


def tokens_prompt(token_ids: Iterable[int]) -> dict[str, list[int]]:
    """A ``vllm.inputs.TokensPrompt`` (a TypedDict, so a plain dict is one)."""
    return {"prompt_token_ids": [int(t) for t in token_ids]}


def completion_request(token_ids: list[int], params: SamplingParams, model: str, index: int = 0) -> dict[str, Any]:
    """The JSON body of one ``POST /v1/completions`` to a vLLM server (token-id prompt, token-id output)."""
    body = sampling_kwargs(params, index)
    body.update(model=model, prompt=[int(t) for t in token_ids], return_tokens_as_token_ids=True)
    return body


# --- outputs -------------------------------------------------------------------------------------------


def map_finish_reason(finish_reason: str | None, stop_reason: int | str | None) -> str:
    """vLLM's (finish_reason, stop_reason) -> ours: "stop" (a stop string), "eos" or "length"."""
    if finish_reason == "length":
        return "length"
    if finish_reason == "stop":
        return "stop" if isinstance(stop_reason, str) else "eos"  # None: eos token; int: a stop token id
    raise RuntimeError(f"vLLM request ended with finish_reason={finish_reason!r} (aborted?)")


def _logprob_value(entry: Any) -> float:
    return float(entry.logprob if hasattr(entry, "logprob") else entry)


def parse_request_output(output: Any, stop: list[str]) -> GenerationOutput:
    """A ``vllm.RequestOutput`` (its first completion) -> GenerationOutput."""
    completion = output.outputs[0]
    token_ids = [int(t) for t in completion.token_ids]
    if completion.logprobs is None:
        raise ValueError("vLLM returned no log-probs; requests must set logprobs=0")
    logprobs = [_logprob_value(step[tok]) for step, tok in zip(completion.logprobs, token_ids, strict=True)]
    text, _ = truncate_at_stop(completion.text, stop)
    return GenerationOutput(
        token_ids=token_ids,
        logprobs=logprobs,
        text=text,
        finish_reason=map_finish_reason(completion.finish_reason, getattr(completion, "stop_reason", None)),
    )


def parse_completion_choice(choice: Mapping[str, Any], stop: list[str]) -> GenerationOutput:
    """One choice of a vLLM server's completion response (``return_tokens_as_token_ids``) -> GenerationOutput."""
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens")
    if tokens is None:
        raise ValueError("the server returned no log-probs; is it a vLLM OpenAI-compatible server?")
    token_ids = []
    for token in tokens:
        if not str(token).startswith("token_id:"):
            raise ValueError(f"expected tokens like 'token_id:123' (vLLM's return_tokens_as_token_ids), got {token!r}")
        token_ids.append(int(str(token).split(":", 1)[1]))
    text, _ = truncate_at_stop(choice.get("text", ""), stop)
    return GenerationOutput(
        token_ids=token_ids,
        logprobs=[float(x) for x in logprobs["token_logprobs"]],
        text=text,
        finish_reason=map_finish_reason(choice.get("finish_reason"), choice.get("stop_reason")),
    )


def base_weights(state: Mapping[str, Any]) -> dict[str, Any]:
    """A state dict without peft's LoRA layers: adapter tensors dropped, ``.base_layer.`` names restored
    (a plain model's state passes through)."""
    return {k.replace(".base_layer.", "."): v for k, v in state.items() if ".lora_" not in k}


def _is_peft(model: Any) -> bool:
    return model is not None and hasattr(model, "peft_config") and hasattr(model, "save_pretrained")


# --- the backend ---------------------------------------------------------------------------------------


class VLLMBackend(GenerationBackend):
    """Generation with vLLM: in-process ``vllm.LLM`` (default) or a remote server (``base_url``).

    Options: ``model_path`` (what the engine loads; default: the model's own ``name_or_path``, else the
    model is saved to a temp folder), ``base_url`` (e.g. ``http://host:8000/v1``: use that server),
    ``served_model`` (its model name; default: the first it lists), ``api_key``, ``concurrency``
    (parallel HTTP requests), ``adapter_dir`` (where LoRA versions are written), ``engine_kwargs``
    (passed to ``vllm.LLM``, overriding the defaults below), ``gpu_memory_utilization``, ``weight_sync``
    (``auto``/``cuda_ipc``/``pickle``: how full weights reach the engine), ``sleep_between_rollouts`` and
    ``sleep_level`` (free the engine's GPU memory while the Learner trains; see the module docstring).

    After each :meth:`update_weights`, ``last_sync`` says how (``"lora"``, ``"cuda_ipc"``, ``"pickle"``, ...).
    """

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        model_path: str | None = None,
        base_url: str | None = None,
        served_model: str | None = None,
        api_key: str | None = None,
        concurrency: int = 32,
        adapter_dir: str | None = None,
        gpu_memory_utilization: float = 0.5,
        engine_kwargs: dict[str, Any] | None = None,
        timeout_s: float = 600.0,
        weight_sync: str = "auto",
        sleep_between_rollouts: bool = False,
        sleep_level: int = 1,
    ) -> None:
        if weight_sync not in WEIGHT_SYNC_MODES:
            raise ValueError(f"weight_sync must be one of {WEIGHT_SYNC_MODES}, got {weight_sync!r}")
        if sleep_level not in (1, 2):
            raise ValueError(f"sleep_level must be 1 (weights to host memory) or 2 (weights dropped), got {sleep_level!r}")
        if sleep_between_rollouts and sleep_level == 2 and (_is_peft(model) or model is None):
            raise ValueError("sleep_level=2 drops the engine's weights, which need the full model (model=, no "
                             "LoRA) to be sent again: use sleep_level=1")
        self.weight_sync = weight_sync
        self.sleep_between_rollouts = sleep_between_rollouts and not base_url
        self.sleep_level = sleep_level
        self.last_sync: str | None = None
        self._asleep: set[str] = set()  # the engine's sleeping parts: "weights", "kv_cache"
        self.model = model
        self.tokenizer = tokenizer
        self.base_url = base_url.rstrip("/") if base_url else None
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.lora = _is_peft(model)
        self.adapter_dir = Path(adapter_dir) if adapter_dir else None
        self.version = 0
        #: The adapter the in-process engine generates with (a ``LoRARequest``; None until the first LoRA sync).
        self.lora_request: Any = None
        self._lora_name: str | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        if self.base_url:
            self.llm = None
            self.served_model = served_model or self._first_served_model()
            return
        vllm = import_vllm()
        path = model_path or self._export_model()
        kwargs: dict[str, Any] = {"model": path, "gpu_memory_utilization": gpu_memory_utilization}
        dtype = _model_dtype(model)
        if dtype:
            kwargs["dtype"] = dtype
        if _engine_has_field(vllm, "logprobs_mode"):
            kwargs["logprobs_mode"] = "processed_logprobs"
        else:
            logger.warning("This vLLM has no logprobs_mode: log-probs are raw (temperature 1).")
        if self.lora:
            kwargs.update(enable_lora=True, max_lora_rank=_lora_rank(model), max_loras=2)
        if self.sleep_between_rollouts:
            kwargs["enable_sleep_mode"] = True
        kwargs.update(engine_kwargs or {})
        check_attention_dtype(kwargs)
        avoid_missing_flashinfer()
        self.llm = vllm.LLM(**kwargs)
        self.served_model = None

    # --- setup helpers -----------------------------------------------------------------------------------

    def _export_model(self) -> str:
        """A folder or hub id vLLM can load the (base) model from: the model's own, if it has one vLLM reads
        (a folder with config.json, or "org/model"); else the model saved to a temp folder (a GGUF-loaded or
        in-memory model). A peft model's base is saved without its adapter layers (vLLM applies the
        adapters as LoRA requests)."""
        base = self.model.get_base_model() if _is_peft(self.model) else self.model
        if base is None:
            raise ValueError("The vllm backend needs model= (the HF model) or model_path=")
        name = str(getattr(base.config, "_name_or_path", "") or "")
        folder = Path(name).expanduser()
        if (folder / "config.json").is_file() or (not folder.exists() and not name.startswith((".", "/", "~"))
                                                 and name.count("/") == 1):
            return name
        self._tmp = tempfile.TemporaryDirectory(prefix="rllib_llm_vllm_")
        base.save_pretrained(self._tmp.name, state_dict=base_weights(base.state_dict()))
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(self._tmp.name)
        return self._tmp.name

    def _http(self, path: str, body: dict[str, Any] | None = None) -> Any:
        assert self.base_url is not None
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310  (user-given URL)
            payload = response.read()
        return json.loads(payload) if payload.strip().startswith((b"{", b"[")) else payload.decode()

    def _first_served_model(self) -> str:
        models = self._http("/models").get("data", [])
        if not models:
            raise RuntimeError(f"The server at {self.base_url} lists no models")
        return models[0]["id"]

    # --- generation --------------------------------------------------------------------------------------

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        if not prompts:
            return []
        if self.llm is None:
            return self._generate_remote(prompts, params)
        vllm = import_vllm()
        self._wake_up()
        # One SamplingParams for the batch; one per request only for per-request seeds (seed + index).
        sampling = (vllm.SamplingParams(**sampling_kwargs(params)) if params.seed is None
                    else [vllm.SamplingParams(**sampling_kwargs(params, i)) for i in range(len(prompts))])
        outputs = self.llm.generate(
            [tokens_prompt(p) for p in prompts], sampling, use_tqdm=False, lora_request=self.lora_request
        )
        return [parse_request_output(out, params.stop) for out in outputs]

    def _generate_remote(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        model = self._lora_name or self.served_model
        assert model is not None

        def one(index: int) -> GenerationOutput:
            body = completion_request(prompts[index], params, model, index)
            return parse_completion_choice(self._http("/completions", body)["choices"][0], params.stop)

        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(prompts)))) as pool:
            return list(pool.map(one, range(len(prompts))))

    # --- weights -----------------------------------------------------------------------------------------

    def update_weights(self, state: dict[str, Any]) -> None:
        self.version += 1
        if self.lora:
            self._update_lora()
            self.last_sync = "lora"
        elif self.llm is None:
            raise NotImplementedError(
                "A remote vLLM server cannot receive full weights through the OpenAI API; train with LoRA "
                "(adapters are loaded with /v1/load_lora_adapter) or use the in-process engine."
            )
        else:
            self._wake_up(["weights"], reload=False)
            # The local HF model already holds the new weights, under exactly the checkpoint names.
            source = dict(self.model.state_dict()) if self.model is not None else normalize_weight_names(state)
            self.last_sync = self._load_full_weights(source)
            logger.debug("Loaded %d tensors into vLLM via %s (version %d)", len(source), self.last_sync, self.version)

    def _load_full_weights(self, source: dict[str, Any]) -> str:
        if choose_weight_sync(self.weight_sync, source, self.llm) == "cuda_ipc":
            try:
                return load_engine_weights_ipc(self.llm, source)
            except Exception as e:  # noqa: BLE001  (documented fallback: the engine on another GPU, an old vLLM)
                if self.weight_sync == "cuda_ipc":
                    raise
                logger.warning("vLLM weight sync by CUDA IPC failed (%s: %s); using pickled CPU copies from now on.",
                               type(e).__name__, e)
                self.weight_sync = "pickle"
        return load_engine_weights(self.llm, as_cpu_tensors(source))

    # --- colocation (sleep mode) -------------------------------------------------------------------------

    def release_memory(self) -> None:
        """Puts the engine to sleep after a rollout when ``sleep_between_rollouts`` (else nothing)."""
        if not self.sleep_between_rollouts or self.llm is None or self._asleep:
            return
        self.llm.sleep(level=self.sleep_level)
        self._asleep = {"weights", "kv_cache"}

    def _wake_up(self, tags: list[str] | None = None, reload: bool = True) -> None:
        """Wakes the sleeping parts among ``tags`` (all when None). Weights that slept at level 2 were
        dropped: unless a sync follows (``reload=False``), they are loaded again from the local model."""
        wanted = set(self._asleep) if tags is None else self._asleep & set(tags)
        if not wanted or self.llm is None:
            return
        self.llm.wake_up(tags=sorted(wanted))
        self._asleep -= wanted
        if "weights" in wanted and self.sleep_level == 2 and reload:
            self._load_full_weights(dict(self.model.state_dict()))

    def _update_lora(self) -> None:
        root = self.adapter_dir or Path(self._adapter_tmp())
        folder = root / f"policy-v{self.version}"
        self.model.save_pretrained(str(folder))  # the module already holds the new adapter weights
        name = f"policy-v{self.version}"
        if self.llm is None:
            self._http("/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
            self._lora_name = name
            return
        import_vllm()
        from vllm.lora.request import LoRARequest

        self.lora_request = LoRARequest(name, self.version, str(folder))

    def _adapter_tmp(self) -> str:
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="rllib_llm_vllm_")
        return self._tmp.name


def _engine_has_field(vllm: Any, name: str) -> bool:
    engine_args = getattr(vllm, "EngineArgs", None)
    return dataclasses.is_dataclass(engine_args) and name in {f.name for f in dataclasses.fields(engine_args)}


def _model_dtype(model: Any) -> str | None:
    if model is None:
        return None
    try:
        import torch

        dtype = next(model.parameters()).dtype
    except (StopIteration, AttributeError):
        return None
    return {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}.get(dtype)


def _lora_rank(model: Any) -> int:
    config = next(iter(model.peft_config.values()))
    rank = int(getattr(config, "r", 8))
    return max(8, 1 << (rank - 1).bit_length())  # vLLM accepts ranks 8, 16, 32, ...
