"""The ``hf`` backend: batched sampling with a transformers model and its KV cache.

A hand-written decode loop rather than ``model.generate`` so that it (1) returns the log-prob of every
sampled token under the temperature-scaled policy, exactly what the Learner recomputes, (2) stops each
row at its stop string or end-of-sequence token, and (3) uses the same left-padded position ids as the
Learner's forward pass.

Two loops share the sampling and stopping code:

- ``eager``: a DynamicCache, one host sync per token, finished rows dropped at once. Works for any
  causal LM; the fallback.
- ``static`` (:mod:`rllib_llm.generation.static`): a pre-allocated cache and batch buckets, so that on
  CUDA the decode step is a replayed CUDA graph. Sampling and log-probs stay on the device; the host
  looks at the sampled tokens every ``sync_every`` steps (one step behind, so the GPU never waits for the
  stop-string check) and moves the live rows into a smaller bucket when enough have finished.

``cuda_graphs="auto"`` (the default) uses graphs on CUDA when the model supports the static loop, and
falls back to the eager loop (with a warning) if capture or the static step fails.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

import torch

from rllib_llm.generation.base import (
    GenerationBackend,
    GenerationOutput,
    SamplingParams,
    truncate_at_stop,
)
from rllib_llm.generation.static import (
    DEFAULT_BATCH_BUCKETS,
    StaticDecoder,
    StaticKV,
    batch_bucket,
    cache_length_bucket,
    make_batch_buckets,
    sliding_window,
    unsupported_reason,
)
from rllib_llm.token_forward import (
    MIN_SHARED_PREFIX,
    forward_signature,
    left_pad,
    position_ids_from_mask,
    prefill_shared_prefix,
    shared_prefix_length,
)

logger = logging.getLogger(__name__)

_AUTO = "auto"


def sample_next(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples one token per row; returns (tokens, their log-probs under softmax(logits / temperature))."""
    logprobs = torch.log_softmax(logits.float() / params.temperature, dim=-1)
    if params.greedy:
        tokens = logprobs.argmax(-1)
    else:
        probs = logprobs.exp()
        if params.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            outside = sorted_probs.cumsum(-1) - sorted_probs > params.top_p
            sorted_probs = sorted_probs.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


class _Responses:
    """Per-prompt tokens and log-probs, fed in chunks; applies eos and stop strings in token order.

    Both loops feed it, so they stop rows at exactly the same token.
    """

    def __init__(self, count: int, tokenizer: Any, eos_ids: set[int], params: SamplingParams) -> None:
        self.tokenizer = tokenizer
        self.eos_ids = set() if params.ignore_eos else eos_ids
        self.stop = [s for s in params.stop if s]
        self.tail = max((len(s) for s in self.stop), default=0) + 2  # tokens >= 1 char each, plus slack
        self.tokens: list[list[int]] = [[] for _ in range(count)]
        self.logprobs: list[list[float]] = [[] for _ in range(count)]
        self.reasons: list[str | None] = [None] * count

    def done(self, row: int) -> bool:
        return self.reasons[row] is not None

    def _has_stop(self, tokens: list[int]) -> bool:
        return truncate_at_stop(self.tokenizer.decode(tokens), self.stop)[1]

    def feed(self, row: int, tokens: list[int], logprobs: list[float]) -> bool:
        """Appends new tokens of ``row`` up to its first eos/stop; returns whether the row is finished."""
        if self.done(row):
            return True
        eos_at = next((i for i, tok in enumerate(tokens) if tok in self.eos_ids), None)
        usable = len(tokens) if eos_at is None else eos_at  # tokens that may complete a stop string
        mine = self.tokens[row]
        end, reason = len(tokens), None
        if self.stop and usable:
            start = len(mine)
            mine.extend(tokens[:usable])
            # One decode of the whole new stretch rules out a stop in the common case; only on a hit
            # is the exact token found, with the same per-token window the eager loop uses.
            if self._has_stop(mine[max(0, start + 1 - self.tail) :]):
                windows = (mine[max(0, start + i + 1 - self.tail) : start + i + 1] for i in range(usable))
                hit = next((i + 1 for i, window in enumerate(windows) if self._has_stop(window)), None)
                if hit is not None:  # None: only the joined stretch decodes to a stop (the eager loop agrees)
                    end, reason = hit, "stop"
            del mine[start:]
        if reason is None and eos_at is not None:
            end, reason = eos_at + 1, "eos"
        mine.extend(tokens[:end])
        self.logprobs[row].extend(logprobs[:end])
        self.reasons[row] = reason
        return reason is not None

    def outputs(self, stop: list[str]) -> list[GenerationOutput]:
        results = []
        for ids, lps, reason in zip(self.tokens, self.logprobs, self.reasons, strict=True):
            text, _ = truncate_at_stop(self.tokenizer.decode(ids, skip_special_tokens=True), stop)
            results.append(GenerationOutput(token_ids=ids, logprobs=lps, text=text, finish_reason=reason or "length"))
        return results


def _tri_state(name: str, value: bool | str) -> bool | str:
    if value is True or value is False or value == _AUTO:
        return value
    raise ValueError(f"{name} must be True, False or 'auto', got {value!r}")


class HFBackend(GenerationBackend):
    """Samples from a transformers causal LM in batches of at most ``max_batch_size`` prompts.

    Options (all keyword, through ``make_backend("hf", ..., **options)``):

    - ``cuda_graphs``: ``"auto"`` (graphs on CUDA when the model supports them, else the eager loop),
      True (required: error if impossible), False (never).
    - ``static_cache``: ``"auto"`` (the static loop exactly when graphs are used), True (the static loop
      even without graphs, e.g. on CPU: what the tests compare against the eager loop), False (eager loop).
    - ``batch_buckets``: batch sizes graphs are captured for; ``max_batch_size`` is always one.
    - ``sync_every``: decode steps between host looks at the sampled tokens (stop/eos checks).
    - ``max_static_caches``: how many cache lengths keep their buffers and graphs (least recently used
      are freed).
    - ``compile``: ``torch.compile`` the decode step before capturing it (fewer, fused kernels; costs
      compile time on the first batches). Experimental, off by default.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 64,
        *,
        cuda_graphs: bool | str = _AUTO,
        static_cache: bool | str = _AUTO,
        batch_buckets: tuple[int, ...] | list[int] = DEFAULT_BATCH_BUCKETS,
        sync_every: int = 8,
        max_static_caches: int = 4,
        compile: bool = False,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.cuda_graphs = _tri_state("cuda_graphs", cuda_graphs)
        self.static_cache = _tri_state("static_cache", static_cache)
        if self.cuda_graphs is True and self.static_cache is False:
            raise ValueError("cuda_graphs=True needs the static cache; drop static_cache=False")
        if sync_every < 1 or max_static_caches < 1:
            raise ValueError(f"sync_every and max_static_caches must be >= 1, got {sync_every}, {max_static_caches}")
        self.batch_buckets = make_batch_buckets(max_batch_size, tuple(batch_buckets))
        self.sync_every = sync_every
        self.max_static_caches = max_static_caches
        self.compile = compile
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos = eos if isinstance(eos, list) else [eos]
        self.eos_ids = {t for t in [*eos, tokenizer.eos_token_id] if t is not None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(self.eos_ids))
        self.cache_kw = forward_signature(model)[0]
        self._caches: OrderedDict[int, StaticKV] = OrderedDict()
        self._decoder: StaticDecoder | None = None
        self._weights_key: tuple | None = None
        self._static_failed: str | None = None  # why "auto" gave up on the static loop
        #: Counters for tests and benchmarks.
        self.stats = {
            "static_batches": 0,
            "eager_batches": 0,
            "compactions": 0,
            "captures": 0,
            "syncs": 0,
            "shared_prefix_tokens": 0,
        }

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # --- mode selection ------------------------------------------------------------------------------

    def decode_mode(self, device: torch.device | None = None) -> str:
        """``"graph"``, ``"static"`` or ``"eager"``: the loop the next batch on ``device`` would use."""
        device = device or self.device
        on_cuda = device.type == "cuda"
        if self.cuda_graphs is True and not on_cuda:
            raise ValueError(f"cuda_graphs=True needs a CUDA model, this one is on {device}")
        forced = self.cuda_graphs is True or self.static_cache is True
        reason = unsupported_reason(self.model)
        if reason and forced:
            raise ValueError(f"The static decode loop cannot serve this model: {reason}")
        if reason or self._static_failed:
            return "eager"
        graphs = on_cuda and self.cuda_graphs is not False and self.static_cache is not False
        if graphs:
            return "graph"
        return "static" if self.static_cache is True else "eager"

    # --- generation ----------------------------------------------------------------------------------

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[GenerationOutput]:
        if not prompts:
            return []
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(params.seed)
        outputs: list[GenerationOutput] = []
        for start in range(0, len(prompts), self.max_batch_size):
            outputs.extend(self._generate_batch(prompts[start : start + self.max_batch_size], params, generator))
        return outputs

    @torch.no_grad()
    def _generate_batch(
        self, prompts: list[list[int]], params: SamplingParams, generator: torch.Generator | None
    ) -> list[GenerationOutput]:
        was_training = self.model.training
        if was_training:  # a mode switch walks every submodule (ms with LoRA): only when there is one to make
            self.model.eval()
        try:
            mode = self.decode_mode()
            width = max(len(p) for p in prompts)
            window = sliding_window(self.model)
            if mode != "eager" and window is not None and width + params.max_new_tokens > window:
                mode = "eager"  # the static cache has no sliding window
            if mode == "eager":
                self.stats["eager_batches"] += 1
                return self._decode_eager(prompts, params, generator)
            try:
                outputs = self._decode_static(prompts, params, generator, use_graphs=mode == "graph")
                self.stats["static_batches"] += 1
                return outputs
            except Exception as e:  # noqa: BLE001  (auto mode: any failure means "use the fallback")
                if self.cuda_graphs is True or self.static_cache is True:
                    raise
                self._static_failed = f"{type(e).__name__}: {e}"
                self._drop_static()
                logger.warning("Static/CUDA-graph decoding failed (%s); using the eager loop from now on.", e)
                self.stats["eager_batches"] += 1
                return self._decode_eager(prompts, params, generator)
        finally:
            if was_training:
                self.model.train()

    def _decode_eager(
        self, prompts: list[list[int]], params: SamplingParams, generator: torch.Generator | None
    ) -> list[GenerationOutput]:
        from transformers import DynamicCache

        cache = DynamicCache()
        out, attention_mask, position_ids = self._prefill_eager(prompts, cache)
        responses = _Responses(len(prompts), self.tokenizer, self.eos_ids, params)
        rows = list(range(len(prompts)))  # original index of each row still in the batch
        logits = out.logits[:, -1]
        positions = position_ids[:, -1]
        for step in range(params.max_new_tokens):
            next_tokens, next_logprobs = sample_next(logits, params, generator)
            keep = [
                batch_row
                for batch_row, (row, tok, lp) in enumerate(
                    zip(rows, next_tokens.tolist(), next_logprobs.tolist(), strict=True)
                )
                if not responses.feed(row, [tok], [lp])
            ]
            if not keep or step + 1 >= params.max_new_tokens:
                break
            if len(keep) < len(rows):
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                attention_mask, positions, next_tokens = attention_mask[index], positions[index], next_tokens[index]
                rows = [rows[i] for i in keep]
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(rows), 1))], dim=-1)
            positions = positions + 1
            out = self.model(
                input_ids=next_tokens[:, None],
                attention_mask=attention_mask,
                position_ids=positions[:, None],
                use_cache=True,
                **{self.cache_kw: cache},
            )
            logits = out.logits[:, -1]
        return responses.outputs(params.stop)

    def _prefill_eager(self, prompts: list[list[int]], cache: Any) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """Prefill into ``cache``; returns (model output, attention mask, position ids).

        The prefix every prompt shares (an agent prompt is mostly system prompt and examples) runs once and
        its cache is broadcast; the rest is left-padded after it. Masked pads in the middle and positions
        from the mask keep the result equal to a plain left-padded prefill.
        """
        prefix = shared_prefix_length(prompts) if len(prompts) > 1 else 0
        prefix = min(prefix, min(len(p) for p in prompts) - 1)  # every row keeps a token to prefill
        if prefix >= MIN_SHARED_PREFIX:
            input_ids, attention_mask, position_ids = prefill_shared_prefix(
                self.model, prompts, prefix, self.pad_id, self.device, cache, self.cache_kw
            )
            self.stats["shared_prefix_tokens"] += prefix
        else:
            input_ids, attention_mask = left_pad(prompts, self.pad_id, self.device)
            position_ids = position_ids_from_mask(attention_mask)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,
            **{self.cache_kw: cache},
        )
        return out, attention_mask, position_ids

    # --- static / CUDA-graph loop --------------------------------------------------------------------

    def _drop_static(self) -> None:
        self._caches.clear()
        self._decoder = None
        self._weights_key = None

    def _static_cache(self, length: int, use_graphs: bool) -> tuple[StaticDecoder, StaticKV]:
        """The decoder and the cache buffers for ``length`` columns (created or reused, LRU-evicted)."""
        param = next(self.model.parameters())
        # Graphs hold raw pointers to the weights: anything that re-allocates them (``.to()``, a
        # ``load_state_dict(assign=True)``) invalidates every capture. In-place weight syncs keep them.
        key = (use_graphs, param.device, param.dtype, tuple(p.data_ptr() for p in self.model.parameters()))
        if key != self._weights_key:
            self._drop_static()
            self._weights_key = key
            self._decoder = StaticDecoder(self.model, use_graphs=use_graphs, compile=self.compile)
        if length in self._caches:
            self._caches.move_to_end(length)
        else:
            while len(self._caches) >= self.max_static_caches:
                self._caches.popitem(last=False)
            dtype = self.model.get_input_embeddings().weight.dtype
            self._caches[length] = StaticKV(self.batch_buckets[-1], length, dtype, param.device)
        assert self._decoder is not None
        return self._decoder, self._caches[length]

    def _decode_static(
        self, prompts: list[list[int]], params: SamplingParams, generator: torch.Generator | None, use_graphs: bool
    ) -> list[GenerationOutput]:
        device = self.device
        input_ids, attention_mask = left_pad(prompts, self.pad_id, device)
        position_ids = position_ids_from_mask(attention_mask)
        width, steps = input_ids.shape[1], params.max_new_tokens
        decoder, kv = self._static_cache(cache_length_bucket(width + steps - 1), use_graphs)
        captures_before = decoder.captures
        kv.reset(attention_mask, position_ids[:, -1])
        logits = decoder.prefill(kv, input_ids, attention_mask, position_ids)

        responses = _Responses(len(prompts), self.tokenizer, self.eos_ids, params)
        rows = list(range(len(prompts)))  # original index of each live row, in cache-row order
        bucket = batch_bucket(len(rows), self.batch_buckets)
        token_buf = torch.empty((len(rows), steps), dtype=torch.long, device=device)
        logp_buf = torch.empty((len(rows), steps), dtype=torch.float32, device=device)
        pending: _Chunk | None = None
        chunk_start = 0
        for step in range(steps):
            live = len(rows)
            tokens, logprobs = sample_next(logits[:live], params, generator)
            token_buf[:live, step] = tokens
            logp_buf[:live, step] = logprobs
            last = step + 1 == steps
            if step + 1 - chunk_start >= self.sync_every or last:
                chunk = _Chunk(rows, token_buf[:live, chunk_start : step + 1], logp_buf[:live, chunk_start : step + 1])
                chunk_start = step + 1
                if pending is not None:
                    pending.feed(responses)  # the previous chunk: the GPU is busy with this one meanwhile
                    self.stats["syncs"] += 1
                pending = chunk
                keep = [i for i, row in enumerate(rows) if not responses.done(row)]
                if not keep:
                    break
                if len(keep) < live and batch_bucket(len(keep), self.batch_buckets) < bucket:
                    index = torch.tensor(keep, device=device)
                    kv.gather_rows(index)
                    tokens = tokens[index]
                    rows = [rows[i] for i in keep]
                    bucket = batch_bucket(len(rows), self.batch_buckets)
                    self.stats["compactions"] += 1
            if last:
                break
            kv.input_ids[: len(rows), 0] = tokens
            logits = decoder.step(kv, bucket)
        if pending is not None:
            pending.feed(responses)
            self.stats["syncs"] += 1
        self.stats["captures"] += decoder.captures - captures_before
        return responses.outputs(params.stop)


class _Chunk:
    """Sampled tokens/log-probs of some steps, copied to the host without blocking the device."""

    def __init__(self, rows: list[int], tokens: torch.Tensor, logprobs: torch.Tensor) -> None:
        self.rows = rows
        self.event = None
        if tokens.is_cuda:
            self.tokens = tokens.to("cpu", non_blocking=True)
            self.logprobs = logprobs.to("cpu", non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.tokens, self.logprobs = tokens.clone(), logprobs.clone()

    def feed(self, responses: _Responses) -> None:
        if self.event is not None:
            self.event.synchronize()
        for row, toks, lps in zip(self.rows, self.tokens.tolist(), self.logprobs.tolist(), strict=True):
            responses.feed(row, toks, lps)
