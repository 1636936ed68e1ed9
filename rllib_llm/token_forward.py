"""The token layout the sampler and the Learner share, in one place: what makes learner log-probs equal
sampler log-probs.

Left padding (:func:`left_pad`), positions from the attention mask (:func:`position_ids_from_mask`), the
forward that runs the prompt prefix every row shares once (:func:`prefill_shared_prefix`), log-probs under
softmax(logits / T) (:func:`token_logprobs`) and the Learner's per-token log-probs of the responses
(:func:`response_logprobs`, one row: :func:`one_response_logprobs`). The ``hf`` backend, the vision backend and the RLModule all use these, so a
change of layout cannot make one side drift from the other (tests/test_rl_module.py and
tests/test_vision.py check the equality).
"""

from __future__ import annotations

from typing import Any

import torch

from rllib_llm.generation.base import MIN_SHARED_PREFIX, shared_prefix_length
from rllib_llm.generation.static import forward_signature


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
    """Log-probs [B, R] of the last ``response_len`` tokens under softmax(logits / temperature).

    Only the last R + 1 positions go through the LM head, so memory does not scale with prompt x vocab.
    With ``share_prefix``, the prompt prefix every row shares (system prompt, examples: most of a short
    agent prompt) runs once and its KV cache is broadcast to the batch; gradients still flow through it.
    ``vision`` (a VL model's ``pixel_values`` / ``image_grid_thw``, ``{}`` for text rows): one plain pass,
    positions left to the model (its 3-D rotary index), no shared prefix.
    """
    prefix = 0
    if share_prefix and vision is None and input_ids.shape[0] > 1:
        prompts = _row_prompts(input_ids, attention_mask, input_ids.shape[1] - response_len)
        # Every row keeps a prompt token after the prefix: its logit predicts the first response token.
        prefix = min(shared_prefix_length(prompts), min(len(p) for p in prompts) - 1)
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
    logits = out.logits[:, :-1].float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    targets = input_ids[:, -response_len:]
    logp = logp_all.gather(-1, targets[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, entropy


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
):
    """The forward pass of ``response_logprobs`` as prefix (batch 1, cached) + per-row remainder.

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
    return model(
        input_ids=ids,
        attention_mask=full_mask,
        position_ids=positions,
        use_cache=True,
        **{cache_kw: cache},
        logits_to_keep=response_len + 1,
    )
