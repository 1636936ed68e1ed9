"""Policy-gradient losses as small pure torch functions over [B, R] response-token tensors."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rllib_llm.registry import Registry

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
KL_ESTIMATORS = ("k1", "k2", "k3", "low_var_kl", "abs", "kl", "mse")
#: verl's names for two of them (``core_algos.kl_penalty``): ``kl`` is k1, ``mse`` is k2.
_VERL_KL_NAMES = {"kl": "k1", "mse": "k2"}

#: The bound on a log-probability difference before it is exponentiated (verl clamps its ratios' and
#: low_var_kl's exponents to [-20, 20]). ``exp(20)`` is finite in float32, so a token whose difference is huge (a
#: padded position, a token the policy has all but ruled out) adds a finite term and no gradient: unbounded,
#: ``exp`` gave inf and its backward ``0 * inf`` = nan, and the Learner skipped the whole update (a bfloat16
#: Qwen2.5-0.5B skipped 3-6 of ~85 updates on Search so).
LOG_RATIO_BOUND = 20.0


def bounded_log_ratio(logp: torch.Tensor, other_logp: torch.Tensor) -> torch.Tensor:
    """``logp - other_logp`` clamped to [-LOG_RATIO_BOUND, LOG_RATIO_BOUND]: every exponent of these losses."""
    return torch.clamp(logp - other_logp, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1)


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    """Reduces per-token values [B, R] to a scalar.

    ``token-mean``: mean over all response tokens in the batch (DAPO). ``seq-mean-token-sum``: sum per
    sequence, mean over sequences. ``seq-mean-token-mean``: mean per sequence, mean over sequences (GRPO).
    Sequences without tokens do not count in the sequence means.
    """
    mask = mask.to(values.dtype)
    if mode == "token-mean":
        return masked_mean(values, mask)
    per_seq = (values * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / mask.sum(-1).clamp(min=1)
    elif mode != "seq-mean-token-sum":
        raise ValueError(f"loss aggregation must be one of {LOSS_AGG_MODES}, got {mode!r}")
    has_tokens = (mask.sum(-1) > 0).to(values.dtype)
    return (per_seq * has_tokens).sum() / has_tokens.sum().clamp(min=1)


def aggregate_weight(mask: torch.Tensor, mode: str = "token-mean") -> float:
    """What :func:`aggregate` divides by: the response tokens (``token-mean``) or the sequences that have
    tokens (``seq-mean-*``). A micro-batch's aggregate, times its share of the minibatch's weight, sums to
    the minibatch's aggregate."""
    if mode == "token-mean":
        return float(mask.sum())
    return float((mask.sum(-1) > 0).sum())


def _clipped_surrogate(
    ratio: torch.Tensor,
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    clip_ratio_c: float | None,
    agg: str,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``max(-A r, -A clip(r, 1 - low, 1 + high))``, for ``A < 0`` capped at ``-A c`` (dual-clip PPO), each
    token's term times its (constant) ``token_weights`` when given."""
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    fmask = mask.to(ratio.dtype)
    stats: dict[str, torch.Tensor] = {}
    if clip_ratio_c is not None:
        capped = torch.minimum(per_token, -advantages * clip_ratio_c)
        with torch.no_grad():
            stats["dual_clip_fraction"] = masked_mean(((capped < per_token) & (advantages < 0)).to(ratio.dtype), fmask)
        per_token = torch.where(advantages < 0, capped, per_token)
    if token_weights is not None:
        per_token = per_token * token_weights.detach()
    with torch.no_grad():
        stats.update(
            clip_fraction=masked_mean((clipped > unclipped).to(ratio.dtype), fmask),
            approx_kl_old=masked_mean(0.5 * log_ratio.detach() ** 2, fmask),
            ratio_mean=masked_mean(ratio.detach(), fmask),
        )
    return aggregate(per_token, mask, agg), stats


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    agg: str = "token-mean",
    clip_ratio_c: float | None = None,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate, token ratio clipped to [1 - clip_low, 1 + clip_high] (clip-higher when
    unequal); ``clip_ratio_c`` (> 1) adds verl's dual clip for negative advantages.

    ``advantages`` is per sequence [B] (broadcast to tokens) or per token [B, R]. ``token_weights`` [B, R]
    multiply each token's term (the decoupled objective's behaviour weights, :func:`behaviour_weights`).
    """
    log_ratio = bounded_log_ratio(logp, old_logp)
    return _clipped_surrogate(
        torch.exp(log_ratio), log_ratio, advantages, mask, clip_low, clip_high, clip_ratio_c, agg, token_weights
    )


def gspo_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
    agg: str = "seq-mean-token-mean",
    clip_ratio_c: float | None = None,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GSPO: one importance ratio per sequence, the geometric mean of its token ratios, clipped per sequence.

    Written in GSPO-token form (as verl): every token carries ``sg[s_i] * pi_t / sg[pi_t]``, whose value is
    the sequence ratio ``s_i = exp(mean_t log(pi_t / pi_old_t))``. With ``seq-mean-token-mean`` aggregation
    and per-sequence advantages the gradient equals that of ``-A_i * clip(s_i)`` (tested).
    """
    fmask = mask.to(logp.dtype)
    log_ratio = bounded_log_ratio(logp, old_logp)
    seq_log_ratio = (log_ratio * fmask).sum(-1) / fmask.sum(-1).clamp(min=1)
    token_log_ratio = torch.clamp(logp - logp.detach() + seq_log_ratio.detach()[:, None], max=10.0)
    return _clipped_surrogate(
        torch.exp(token_log_ratio), log_ratio, advantages, mask, clip_low, clip_high, clip_ratio_c, agg, token_weights
    )


def behaviour_weights(prox_logp: torch.Tensor, behaviour_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance weights ``min(pi_prox / mu, cap)`` per token: how much more (or less) likely the
    Learner's policy before this update (``pi_prox``) makes a token than the possibly older policy that
    sampled it (``mu``). The decoupled PPO objective (Hilton et al. 2022, "Batch size-invariance for policy
    optimization", eq. 4; AReaL's asynchronous RL) is ``w * clip-surrogate(pi_theta / pi_prox)`` with these
    as ``w``: the clip keeps each update near ``pi_prox``, the weight corrects for who sampled, and the cap
    (V-trace's rho-bar, Espeholt et al. 2018, eq. 1) bounds its variance."""
    return torch.clamp(torch.exp(bounded_log_ratio(prox_logp, behaviour_logp)), max=cap)


PolicyLoss = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]

#: ``policy_loss`` config name -> loss function (same signature as :func:`clipped_policy_loss`).
POLICY_LOSSES = Registry("policy loss", {"ppo": clipped_policy_loss, "gspo": gspo_policy_loss})


def value_loss(
    values: torch.Tensor, old_values: torch.Tensor, targets: torch.Tensor, clip: float | None = None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's value loss ``0.5 * mean(max((V - R)^2, (V_clip - R)^2))`` with ``V_clip`` kept within ``clip``
    of the old value (verl/TRL style; ``clip=None``: plain squared error)."""
    loss = (values - targets) ** 2
    stats: dict[str, torch.Tensor] = {}
    if clip is not None:
        clipped = (old_values + torch.clamp(values - old_values, -clip, clip) - targets) ** 2
        with torch.no_grad():
            stats["vf_clip_fraction"] = (clipped > loss).to(values.dtype).mean()
        loss = torch.maximum(loss, clipped)
    with torch.no_grad():
        stats["value_mean"] = values.mean()
        stats["explained_variance"] = 1 - (targets - values).var(correction=0) / targets.var(correction=0).clamp(min=1e-8)
    return 0.5 * loss.mean(), stats


def adaptive_entropy_coeff(coeff: torch.Tensor, entropy: torch.Tensor, target: float, step: float) -> torch.Tensor:
    """The next coefficient of adaptive entropy control (Skywork-OR1, He et al. 2025): ``coeff + step`` while the
    entropy is below ``target``, ``coeff - step`` (not below 0) once it is above. The Learner applies the
    coefficient only while the last measured entropy is below the target, so a policy that keeps exploring
    trains as without the term; one that collapses gets an entropy bonus that grows until it explores again."""
    return torch.clamp(coeff + torch.where(entropy < target, step, -step), min=0.0)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "low_var_kl") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from tokens sampled from pi (Schulman's k1, k2, k3).

    With ``d = logp - ref_logp``: ``k1 = d``, ``k2 = d^2 / 2``, ``k3 = exp(-d) + d - 1`` (unbiased, >= 0),
    ``low_var_kl`` = k3 clamped to [-10, 10] (verl's default), ``abs = |d|``; verl's ``kl`` and ``mse`` are k1
    and k2 (verl's ``k3`` is our ``low_var_kl``: our ``k3`` is unclamped). k3's exponent is
    :func:`bounded_log_ratio` (a finite gradient where the policy has all but ruled out a sampled token).
    """
    estimator = _VERL_KL_NAMES.get(estimator, estimator)
    diff = logp - ref_logp
    if estimator == "k1":
        return diff
    if estimator == "abs":
        return diff.abs()
    if estimator == "k2":
        return 0.5 * diff**2
    if estimator in ("k3", "low_var_kl"):
        bounded = bounded_log_ratio(logp, ref_logp)
        kl = torch.exp(-bounded) + bounded - 1.0
        return kl.clamp(-10.0, 10.0) if estimator == "low_var_kl" else kl
    raise ValueError(f"kl estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")
