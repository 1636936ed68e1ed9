"""Pre-allocated KV cache and a replayable decode step for the ``hf`` backend.

Why: a small model's decode step on a GPU is bound by host overhead (hundreds of kernel launches issued
from Python), not by the GPU. With every tensor of the step at a fixed address (a static KV cache, static
inputs, an additive attention mask that the step updates itself) the step can be captured once as a CUDA
graph per batch-size bucket and replayed: one launch per token.

Only the transformers *protocol* is relied on, not a particular ``Cache`` class, because that class
changes between releases: the attention layers call ``cache.update(key, value, layer_idx, ...)`` and use
what it returns, and a 4-D ``attention_mask`` reaches attention unchanged (transformers >= 4.53 and 5.x).
Everything else (positions, the write column, the mask) is passed explicitly, so nothing in a captured
step depends on Python-side state.

Layout: prompts are left-padded to width P and written to columns [0, P) of the cache; decode step t
writes column P + t of every row at once (one shared ``cache_position``). Rows past the live batch (a
bucket's padding) compute garbage that is never read back; their mask keeps it finite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from rllib_llm.token_forward import forward_signature

#: Batch sizes the decode step is specialised for (each gets its own CUDA graph).
DEFAULT_BATCH_BUCKETS = (8, 16, 32, 64, 128, 256)
#: Prefill builds a [rows, 1, P, P] mask; rows are prefilled in chunks so it stays under this many elements.
PREFILL_MASK_ELEMENTS = 1 << 27


def batch_bucket(rows: int, buckets: tuple[int, ...]) -> int:
    """The smallest of the (sorted) ``buckets`` that holds ``rows``."""
    for bucket in buckets:
        if bucket >= rows:
            return bucket
    raise ValueError(f"{rows} rows exceed the largest batch bucket {buckets[-1]}")


def make_batch_buckets(max_batch_size: int, buckets: tuple[int, ...] = DEFAULT_BATCH_BUCKETS) -> tuple[int, ...]:
    """``buckets`` below ``max_batch_size``, then ``max_batch_size`` itself, so every batch fits one."""
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    return tuple(sorted({b for b in buckets if 0 < b < max_batch_size} | {max_batch_size}))


def cache_length_bucket(length: int, minimum: int = 128) -> int:
    """``length`` rounded up to 2^k or 1.5 * 2^k: at most 1.5x the columns, and few distinct caches."""
    power = minimum
    while True:
        if power >= length:
            return power
        if power + power // 2 >= length:
            return power + power // 2
        power *= 2


def unsupported_reason(model: torch.nn.Module) -> str | None:
    """Why the static decode loop cannot serve ``model`` (None if it can)."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no transformers config"
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder models are not supported"
    attn = getattr(config, "_attn_implementation", None) or "eager"
    if attn not in ("sdpa", "eager"):
        return f"attention implementation {attn!r} needs its own mask format (supported: sdpa, eager)"
    layer_types = getattr(config, "layer_types", None) or []
    odd = sorted({t for t in layer_types if t != "full_attention"})
    if odd:
        return f"layer types {odd} (sliding-window / linear / hybrid layers) keep their own cache layout"
    return None


def sliding_window(model: torch.nn.Module) -> int | None:
    """The model's sliding window if it uses one (contexts longer than it need the eager loop)."""
    config = getattr(model, "config", None)
    window = getattr(config, "sliding_window", None)
    if window is None or getattr(config, "use_sliding_window", True) is False:
        return None
    return int(window)


class StaticKV:
    """KV buffers [max_rows, heads, length, head_dim] per layer plus the decode step's static inputs.

    One per cache length; every batch bucket of that length uses the leading rows of the same buffers,
    so shrinking the batch (dropping finished rows) is an in-place row gather.
    """

    def __init__(self, max_rows: int, length: int, dtype: torch.dtype, device: torch.device) -> None:
        self.max_rows, self.length, self.dtype, self.device = max_rows, length, dtype, device
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.min_value = torch.finfo(dtype).min
        #: Additive mask: 0 where a key may be attended to, ``finfo.min`` elsewhere (works for sdpa and eager).
        self.mask = torch.full((max_rows, 1, 1, length), self.min_value, dtype=dtype, device=device)
        self.input_ids = torch.zeros((max_rows, 1), dtype=torch.long, device=device)
        self.position_ids = torch.zeros((max_rows, 1), dtype=torch.long, device=device)
        self.cache_position = torch.zeros((1,), dtype=torch.long, device=device)
        #: batch bucket -> (graph, its logits output); filled by :class:`StaticDecoder`.
        self.graphs: dict[int, tuple[Any, torch.Tensor]] = {}

    def ensure_layer(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> None:
        """Allocates layer buffers on first use, shaped after what the model actually produces."""
        while len(self.keys) <= layer:
            index = len(self.keys)
            if index != layer:
                raise RuntimeError(f"cache layers must be filled in order; got layer {layer} before {index}")
            shape_k = (self.max_rows, key.shape[1], self.length, key.shape[-1])
            shape_v = (self.max_rows, value.shape[1], self.length, value.shape[-1])
            self.keys.append(torch.zeros(shape_k, dtype=key.dtype, device=self.device))
            self.values.append(torch.zeros(shape_v, dtype=value.dtype, device=self.device))

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in [*self.keys, *self.values])

    def reset(self, attention_mask: torch.Tensor, last_positions: torch.Tensor) -> None:
        """Prepares decoding after a prompt of width P: prompt columns from ``attention_mask`` [n, P]."""
        rows, width = attention_mask.shape
        self.mask.fill_(self.min_value)
        self.mask[:rows, 0, 0, :width].masked_fill_(attention_mask.bool(), 0.0)
        self.position_ids.zero_()
        self.position_ids[:rows, 0] = last_positions
        self.cache_position.fill_(width - 1)

    def gather_rows(self, index: torch.Tensor) -> None:
        """Moves rows ``index`` to the front (in place), for a smaller batch bucket."""
        count = index.numel()
        for buffer in [*self.keys, *self.values, self.mask, self.position_ids]:
            buffer[:count] = buffer.index_select(0, index)


class PrefillCache:
    """The transformers cache protocol for prefill: writes rows [start, stop) and columns [0, P) of a
    :class:`StaticKV` and attends over just the prompt's keys/values."""

    is_compileable = False

    def __init__(self, kv: StaticKV, start: int, stop: int) -> None:
        self.kv, self.start, self.stop = kv, start, stop

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any):
        self.kv.ensure_layer(layer_idx, key_states, value_states)
        width = key_states.shape[2]
        self.kv.keys[layer_idx][self.start : self.stop, :, :width] = key_states
        self.kv.values[layer_idx][self.start : self.stop, :, :width] = value_states
        return key_states, value_states

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0  # only consulted when positions are not given; they always are here


class DecodeCache:
    """The transformers cache protocol for one decode step: writes column ``cache_position`` of the given
    per-layer buffers and attends over all their columns (the mask hides unwritten ones)."""

    is_compileable = False

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], cache_position: torch.Tensor) -> None:
        self.keys, self.values, self.cache_position = keys, values, cache_position

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any):
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys.index_copy_(2, self.cache_position, key_states)
        values.index_copy_(2, self.cache_position, value_states)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.keys[0].shape[2]


def decode_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """sdpa for a single query token that never repeats the KV heads.

    transformers' sdpa path copies every KV head ``heads / kv_heads`` times when a mask is given (the
    whole cache, each layer, each step). With one query token the query heads sharing a KV head can
    instead attend as a block of ``heads / kv_heads`` query rows: same result, no copies.
    Anything else (prefill, extra attention features) goes to transformers' own sdpa function.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, heads, q_len, dim = query.shape
    groups = key.shape[1]
    special = dropout or any(kwargs.get(k) is not None for k in ("softcap", "sliding_window", "s_aux"))
    if q_len != 1 or heads == groups or attention_mask is None or attention_mask.shape[1] != 1 or special:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    grouped = query.reshape(batch, groups, heads // groups, dim)
    out = torch.nn.functional.scaled_dot_product_attention(grouped, key, value, attn_mask=attention_mask, scale=scaling)
    return out.reshape(batch, 1, heads, dim), None


DECODE_ATTENTION = "rllib_llm_decode"


@contextmanager
def decode_attention_for(model: torch.nn.Module) -> Iterator[None]:
    """Routes ``model``'s sdpa attention through :func:`decode_attention` for the duration.

    Set on the config only while a decode step runs (or is captured), so the model behaves as before
    everywhere else.
    """
    config = model.config
    if getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    from transformers import AttentionInterface

    if DECODE_ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(DECODE_ATTENTION, decode_attention)
    config._attn_implementation = DECODE_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"


def prefill_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive causal mask [n, 1, P, P] over a left-padded prompt.

    Each position may always see itself, so padding rows never have an all-masked softmax (which would
    put NaN keys/values into the cache and poison real rows through 0 * NaN).
    """
    width = attention_mask.shape[1]
    device = attention_mask.device
    causal = torch.ones((width, width), dtype=torch.bool, device=device).tril()
    allowed = causal[None] & attention_mask.bool()[:, None, :]
    allowed |= torch.eye(width, dtype=torch.bool, device=device)[None]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[:, None]


class StaticDecoder:
    """Runs prefill into a :class:`StaticKV` and decode steps on it, eagerly or as replayed CUDA graphs."""

    def __init__(self, model: torch.nn.Module, use_graphs: bool, compile: bool = False, warmup_steps: int = 2) -> None:
        self.model = model
        self.use_graphs = use_graphs
        self.warmup_steps = warmup_steps + (2 if compile else 0)  # compiling (and recompiling once) warms up
        self.cache_kw, self.pass_cache_position = forward_signature(model)
        self._pool = torch.cuda.graph_pool_handle() if use_graphs else None
        self.captures = 0
        # torch.compile fuses the many small kernels of each layer (norms, rotary, activations); the graph
        # then replays the fused kernels. Only the decode step is compiled: prefill shapes vary.
        self._decode_forward = (
            torch.compile(self._decode_forward_eager, dynamic=True) if compile else self._decode_forward_eager
        )

    def _forward(self, cache: PrefillCache | DecodeCache, **inputs: Any) -> torch.Tensor:
        if not self.pass_cache_position:
            inputs.pop("cache_position", None)
        out = self.model(**inputs, **{self.cache_kw: cache}, use_cache=True)
        return out.logits[:, -1]

    def _decode_forward_eager(
        self,
        input_ids: torch.Tensor,
        mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache_position: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
    ) -> torch.Tensor:
        return self._forward(
            DecodeCache(keys, values, cache_position),
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=position_ids,
            cache_position=cache_position,
        )

    def prefill(self, kv: StaticKV, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor):
        """Logits [n, vocab] of each prompt's last token; writes the prompts to the cache rows [0, n)."""
        rows, width = input_ids.shape
        chunk = max(1, PREFILL_MASK_ELEMENTS // (width * width))
        cache_position = torch.arange(width, device=input_ids.device)
        logits = []
        for start in range(0, rows, chunk):
            stop = min(rows, start + chunk)
            logits.append(
                self._forward(
                    PrefillCache(kv, start, stop),
                    input_ids=input_ids[start:stop],
                    attention_mask=prefill_mask(attention_mask[start:stop], kv.dtype),
                    position_ids=position_ids[start:stop],
                    cache_position=cache_position,
                    logits_to_keep=1,
                )
            )
        return torch.cat(logits) if len(logits) > 1 else logits[0]

    def _decode_step(self, kv: StaticKV, bucket: int) -> torch.Tensor:
        """One token for rows [0, bucket): unmask the write column, run the model (captured as a whole)."""
        kv.mask[:bucket].index_fill_(-1, kv.cache_position, 0.0)
        with decode_attention_for(self.model):
            return self._decode_forward(
                kv.input_ids[:bucket],
                kv.mask[:bucket],
                kv.position_ids[:bucket],
                kv.cache_position,
                [k[:bucket] for k in kv.keys],
                [v[:bucket] for v in kv.values],
            )

    def step(self, kv: StaticKV, bucket: int) -> torch.Tensor:
        """Advances every row one position and returns the next-token logits [bucket, vocab].

        The inputs of this step (``kv.input_ids``) must be set by the caller beforehand.
        """
        kv.position_ids[:bucket].add_(1)
        kv.cache_position.add_(1)
        if not self.use_graphs:
            return self._decode_step(kv, bucket)
        if bucket not in kv.graphs:
            kv.graphs[bucket] = self._capture(kv, bucket)
        graph, logits = kv.graphs[bucket]
        graph.replay()
        return logits

    def _capture(self, kv: StaticKV, bucket: int) -> tuple[Any, torch.Tensor]:
        """Captures the decode step for ``bucket`` rows at the current inputs.

        Warm-up runs (allocator, cuBLAS and attention-kernel selection) happen on a side stream, as
        CUDA graph capture requires. They write the same cache column with the same inputs as the replay
        that follows, so they change nothing.
        """
        device = kv.device
        stream = torch.cuda.Stream(device=device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(self.warmup_steps):
                self._decode_step(kv, bucket)
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            logits = self._decode_step(kv, bucket)
        self.captures += 1
        return graph, logits
