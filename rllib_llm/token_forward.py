"""The token layout the sampler and the Learner share, in one place: what makes learner log-probs equal
sampler log-probs.

Left padding (:func:`left_pad`), positions from the attention mask (:func:`position_ids_from_mask`), the
forward that runs the prompt prefix every row shares once (:func:`prefill_shared_prefix`), log-probs under
softmax(logits / T) (:func:`token_logprobs`) and the Learner's per-token log-probs of the responses
(:func:`response_logprobs`, one row: :func:`one_response_logprobs`). The ``hf`` backend, the vision backend and the RLModule all use these, so a
change of layout cannot make one side drift from the other (tests/core/test_rl_module.py and
tests/core/test_vision.py check the equality).

Memory: the Learner never holds full-vocabulary logits for a whole minibatch. The decoder's last hidden
states go through the LM head in chunks of at most :data:`LOGITS_CHUNK_ELEMENTS` logits
(:func:`logprobs_from_hidden`), each chunk recomputed in the backward pass instead of kept: with Qwen2.5's
152k-token vocabulary, 32 rows of 256 response tokens would otherwise hold 5 GB of float32 logits per copy
(log-softmax, its exp for the entropy and their gradients: tens of GB), as verl and TRL avoid too.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.checkpoint

#: Below this many shared leading prompt tokens, a separate prefix pass is not worth it.
MIN_SHARED_PREFIX = 16


def shared_prefix_length(prompts: list[list[int]]) -> int:
    """Length of the token prefix all prompts share (system prompt, in-context examples): computed once
    and broadcast by the ``hf`` backend's prefill and by the Learner's forward pass."""
    if not prompts:
        return 0
    first, n = prompts[0], min(len(p) for p in prompts)
    for other in prompts[1:]:
        k = 0
        while k < n and other[k] == first[k]:
            k += 1
        n = k
    return n


def forward_signature(model: torch.nn.Module) -> tuple[str, bool]:
    """(name of the cache keyword, whether ``cache_position`` is accepted) of the underlying HF model.

    transformers 5.x before 5.24 (and 4.x) call it ``past_key_values``; 5.24 renamed it ``cache``. An
    unknown keyword would be swallowed by ``**kwargs`` and silently decode without a cache, so ask.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "cache_position" in params


def left_pad(prompts: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pads token lists into (input_ids, attention_mask)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        if prompt:
            ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[row, width - len(prompt) :] = 1
    return ids.to(device), mask.to(device)


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that start at 0 on each row's first real token (left padding gets 0)."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / T) at ``tokens``; float32 whatever the model dtype (as the text paths do)."""
    return torch.log_softmax(logits.float() / temperature, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)


#: Logits of one chunk of :func:`logprobs_from_hidden` (float32: 256 MiB per copy): ~440 tokens of a
#: 152k vocabulary, the whole batch of a small test model.
LOGITS_CHUNK_ELEMENTS = 1 << 26


def logits_logprobs(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of ``tokens`` under softmax(logits / T) (and the entropies, or an empty tensor): the same
    float32 log-softmax as the sampler's (:func:`token_logprobs`)."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else logp.new_empty(0)
    return logp, entropy


def _chunk_logprobs(
    head: torch.nn.Module, temperature: float, with_entropy: bool, hidden: torch.Tensor, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, H] hidden states -> :func:`logits_logprobs` of their logits (one chunk)."""
    return logits_logprobs(head(hidden), tokens, temperature, with_entropy)


def logprobs_from_hidden(
    hidden: torch.Tensor,
    head: torch.nn.Module,
    tokens: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk_elements: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [B, T] (and entropies) of ``tokens`` [B, T] from the hidden states [B, T, H] that the LM
    ``head`` maps to logits, in chunks of at most ``chunk_elements`` logits (default
    :data:`LOGITS_CHUNK_ELEMENTS`). With gradients, each chunk is
    checkpointed: the backward pass recomputes its logits (one extra head matmul per chunk) instead of
    keeping every chunk's, so peak memory is one chunk's logits whatever the batch."""
    rows, width, size = hidden.shape
    vocab = head.weight.shape[0] if hasattr(head, "weight") else head(hidden[:1, :1]).shape[-1]
    flat_hidden, flat_tokens = hidden.reshape(rows * width, size), tokens.reshape(rows * width)
    step = max(1, (chunk_elements or LOGITS_CHUNK_ELEMENTS) // max(vocab, 1))
    recompute = torch.is_grad_enabled() and hidden.requires_grad
    pieces = []
    for start in range(0, rows * width, step):
        args = (head, temperature, with_entropy, flat_hidden[start : start + step], flat_tokens[start : start + step])
        if recompute:
            pieces.append(torch.utils.checkpoint.checkpoint(_chunk_logprobs, *args, use_reentrant=False))
        else:
            pieces.append(_chunk_logprobs(*args))
    logp = torch.cat([p[0] for p in pieces]).reshape(rows, width)
    entropy = torch.cat([p[1] for p in pieces]).reshape(rows, width) if with_entropy else None
    return logp, entropy


def chunked_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(decoder, LM head) of a causal LM whose logits are exactly ``head(decoder(...).last_hidden_state)``,
    so :func:`response_logprobs` can run the head in chunks; None for models that post-process their logits
    (Gemma's soft-capping, Cohere's logit scale) or take images, which keep the one-pass path."""
    config = getattr(model, "config", None)
    get_decoder = getattr(model, "get_decoder", None)
    if config is None or get_decoder is None or getattr(config, "vision_config", None) is not None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(text, "final_logit_softcapping", None) or getattr(text, "logit_scale", 1.0) not in (1, 1.0, None):
        return None
    try:
        decoder, head = get_decoder(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    if decoder is None or head is None or decoder is model:
        return None
    return decoder, head


def prefill_shared_prefix(
    model: torch.nn.Module,
    prompts: list[list[int]],
    prefix: int,
    pad_id: int,
    device: torch.device,
    cache: Any,
    cache_kw: str,
    suffix: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Runs the ``prefix`` tokens every prompt shares once (batch 1) into ``cache`` and broadcasts it to the
    batch; returns what the rows feed after it: (ids, attention mask over prefix + ids, position ids).

    The rows' remainders are left-padded after the prefix (``suffix``: (ids, mask) appended to them, e.g. the
    responses). Masked pads in the middle leave attention unchanged and positions come from the mask, so a
    forward over these inputs equals the plain left-padded one: the sampler (hf prefill) and the Learner
    (:func:`response_logprobs`) both go through here.
    """
    rows = len(prompts)
    model(input_ids=torch.tensor([prompts[0][:prefix]], device=device), use_cache=True, logits_to_keep=1,
          **{cache_kw: cache})  # fmt: skip
    cache.batch_repeat_interleave(rows)
    ids, mask = left_pad([p[prefix:] for p in prompts], pad_id, device)
    if suffix is not None:
        ids, mask = torch.cat([ids, suffix[0]], dim=1), torch.cat([mask, suffix[1].to(mask.dtype)], dim=1)
    full_mask = torch.cat([mask.new_ones((rows, prefix)), mask], dim=1)
    return ids, full_mask, position_ids_from_mask(full_mask)[:, prefix:]


def shares_prefix(setting: bool | None, device: torch.device) -> bool:
    """Whether a Learner pass runs the rows' shared prompt prefix once (``shared_prefix_forward``): as set, or
    by default on a CPU, where FLOPs bound it, and not on an accelerator, where a small model's pass is bound
    by kernel launches and the prefix split doubles the model calls."""
    return device.type == "cpu" if setting is None else bool(setting)


def _row_prompts(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int) -> list[list[int]]:
    ids, mask = input_ids[:, :prompt_width].tolist(), attention_mask[:, :prompt_width].tolist()
    return [[t for t, m in zip(row, row_mask, strict=True) if m] for row, row_mask in zip(ids, mask, strict=True)]


@dataclass
class ResponsePass:
    """What the Learner's pass over a token batch gives: log-probs [B, R] of the response tokens, their
    entropies (or None) and, on the chunked path, the last hidden states [B, R + 1, H] at the kept positions
    (the LM head's input: what a value head reads; None on the one-pass path)."""

    logp: torch.Tensor
    entropy: torch.Tensor | None
    hidden: torch.Tensor | None = None


def response_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_len: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    share_prefix: bool = True,
    vision: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [B, R] of the last ``response_len`` tokens under softmax(logits / temperature) (and their
    entropies with ``with_entropy``): :func:`response_pass` without the hidden states."""
    out = response_pass(model, input_ids, attention_mask, response_len, temperature, with_entropy, share_prefix, vision)
    return out.logp, out.entropy


def response_pass(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_len: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    share_prefix: bool = True,
    vision: dict[str, torch.Tensor] | None = None,
) -> ResponsePass:
    """The Learner's forward over a token batch (see :func:`response_logprobs`).

    Only the last R + 1 positions reach the LM head, so memory does not scale with prompt x vocab, and
    they reach it in chunks (:func:`logprobs_from_hidden`) when the model's logits are its head's output
    (:func:`chunked_head`). With ``share_prefix``, the prompt prefix every row shares (system prompt,
    examples: most of a short agent prompt) runs once and its KV cache is broadcast to the batch; gradients
    still flow through it. ``vision`` (a VL model's ``pixel_values`` / ``image_grid_thw``, ``{}`` for text
    rows): one plain pass, positions left to the model (its 3-D rotary index), no shared prefix.
    """
    prefix = 0
    if share_prefix and vision is None and input_ids.shape[0] > 1:
        prompts = _row_prompts(input_ids, attention_mask, input_ids.shape[1] - response_len)
        # Every row keeps a prompt token after the prefix: its logit predicts the first response token.
        prefix = min(shared_prefix_length(prompts), min(len(p) for p in prompts) - 1)
    parts = chunked_head(model) if vision is None else None
    targets = input_ids[:, -response_len:]
    if parts is not None:
        decoder, head = parts
        if prefix >= MIN_SHARED_PREFIX:
            hidden = _forward_with_shared_prefix(model, input_ids, attention_mask, response_len, prompts, prefix,
                                                 decoder=decoder).last_hidden_state  # fmt: skip
        else:
            hidden = decoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids_from_mask(attention_mask),
                use_cache=False,
            ).last_hidden_state
        hidden = hidden[:, -(response_len + 1) :]
        logp, entropy = logprobs_from_hidden(hidden[:, :-1], head, targets, temperature, with_entropy)
        return ResponsePass(logp, entropy, hidden)
    if prefix >= MIN_SHARED_PREFIX:
        out = _forward_with_shared_prefix(model, input_ids, attention_mask, response_len, prompts, prefix)
    elif vision is not None:
        out = model(
            input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=response_len + 1, use_cache=False,
            **vision,
        )  # fmt: skip
    else:
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            logits_to_keep=response_len + 1,
            use_cache=False,
        )
    logp, entropy = logits_logprobs(out.logits[:, :-1], targets, temperature, with_entropy)
    return ResponsePass(logp, entropy if with_entropy else None)


def one_response_logprobs(
    model: torch.nn.Module, prompt: list[int], response: list[int], temperature: float = 1.0
) -> torch.Tensor:
    """Log-probs [R] of one ``response`` after ``prompt`` through :func:`response_logprobs` (the Learner's
    path), on the model's device: what a check of sampler log-probs against the Learner's compares with."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + response], device=device)
    logp, _ = response_logprobs(model, ids, torch.ones_like(ids), len(response), temperature)
    return logp[0]


def _forward_with_shared_prefix(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_len: int,
    prompts: list[list[int]],
    prefix: int,
    decoder: torch.nn.Module | None = None,
):
    """The forward pass of ``response_logprobs`` as prefix (batch 1, cached) + per-row remainder; the
    remainder through ``decoder`` (its hidden states, for the chunked head) or the whole model (logits).

    The remainders are left-padded after the prefix; masked pads in the middle leave attention unchanged
    and positions come from the mask, so the log-probs equal those of the plain left-padded pass.
    """
    from transformers import DynamicCache

    cache = DynamicCache()
    # "cache" from transformers 5.24 on, "past_key_values" before: a wrong name is swallowed by **kwargs
    # and the remainder would run without the prefix.
    cache_kw = forward_signature(model)[0]
    ids, full_mask, positions = prefill_shared_prefix(
        model, prompts, prefix, int(input_ids[0, 0]), input_ids.device, cache, cache_kw,
        suffix=(input_ids[:, -response_len:], attention_mask[:, -response_len:]),
    )  # fmt: skip
    if decoder is not None:
        return decoder(input_ids=ids, attention_mask=full_mask, position_ids=positions, use_cache=True,
                       **{forward_signature(decoder)[0]: cache})  # fmt: skip
    return model(
        input_ids=ids,
        attention_mask=full_mask,
        position_ids=positions,
        use_cache=True,
        **{cache_kw: cache},
        logits_to_keep=response_len + 1,
    )
