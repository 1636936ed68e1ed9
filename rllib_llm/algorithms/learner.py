"""The Learner: the configured policy loss, plus optional value loss, KL to the reference and entropy bonus;
optionally over micro-batches whose gradients accumulate into one optimizer step per minibatch. Gradient
clipping and the finiteness check run over all of a step's gradients at once (a few foreach kernels, one
device sync), not tensor by tensor as RLlib's TorchLearner does: with LoRA on every projection of a 30-layer
model that is ~420 tensors, and a small model's update on a GPU is bound by kernel launches and syncs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from ray.rllib.algorithms.algorithm_config import TorchCompileWhatToCompile
from ray.rllib.core import ALL_MODULES
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.torch.torch_compile_config import TorchCompileConfig

from rllib_llm.algorithms.losses import (
    POLICY_LOSSES,
    adaptive_entropy_coeff,
    aggregate,
    aggregate_weight,
    behaviour_weights,
    kl_penalty,
    masked_mean,
    value_loss,
)
from rllib_llm.algorithms.rllib_internals import (
    accumulated_gradients,
    compute_off_policyness,
    has_grad_scalers,
    scaled_losses,
    zero_gradients,
)
from rllib_llm.checkpoint_files import MsgpackCheckpointable
from rllib_llm.columns import (
    ACTION_LOGP,
    ADVANTAGES,
    ENTROPY,
    LOGP,
    OLD_VALUES,
    PROX_LOGP,
    REF_LOGP,
    RESPONSE_MASK,
    VALUE_TARGETS,
    VALUES,
)
from rllib_llm.core.rl_module import LLMRLModule
from rllib_llm.metrics import ENTROPY as ENTROPY_METRIC
from rllib_llm.metrics import KL


@dataclass(frozen=True)
class LossShares:
    """A micro-batch's share of its minibatch for each way a loss term averages: the policy loss and KL
    (over ``loss_agg_mode``'s units), the entropy (over tokens) and the value loss (over rows). Each term of
    the micro-batch's loss is scaled by its share, so the micro-batches' gradients sum to the minibatch's."""

    agg: float = 1.0
    tokens: float = 1.0
    rows: float = 1.0


WHOLE = LossShares()
#: Learner state key: each module's adaptive entropy coefficient and the entropy of its last optimizer step.
ENTROPY_CONTROL = "adaptive_entropy_control"
#: Learner metric: optimizer steps skipped because a gradient was nan or inf (summed over the iteration).
NONFINITE_STEPS_SKIPPED = "nonfinite_gradient_steps_skipped"

logger = logging.getLogger(__name__)


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def micro_batches(
    batch: dict[str, dict[str, Any]], size: int, agg: str
) -> Iterator[tuple[dict[str, dict[str, Any]], dict[str, LossShares]]]:
    """Consecutive chunks of ``size`` rows of every module's columns (the i-th chunks of all modules go
    together; a module out of rows sits the rest out), each with its modules' :class:`LossShares`."""
    rows = {mid: len(columns[RESPONSE_MASK]) for mid, columns in batch.items()}
    for start in range(0, max(rows.values(), default=0), size):
        micro: dict[str, dict[str, Any]] = {}
        shares: dict[str, LossShares] = {}
        for mid, columns in batch.items():
            if start >= rows[mid]:
                continue
            micro[mid] = {
                key: value[start : start + size] if _is_row_column(value, rows[mid]) else value
                for key, value in columns.items()
            }
            mask, full = micro[mid][RESPONSE_MASK], columns[RESPONSE_MASK]
            shares[mid] = LossShares(
                agg=_share(aggregate_weight(mask, agg), aggregate_weight(full, agg)),
                tokens=_share(aggregate_weight(mask), aggregate_weight(full)),
                rows=len(mask) / rows[mid],
            )
        yield micro, shares


def global_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The L2 norm of all ``grads`` together (nan or inf when any of them is), in foreach kernels."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)).float())


def compile_language_models(modules: Any, config: Any) -> None:
    """``.framework(torch_compile_learner=True)`` (what to compile: ``forward_train``) compiles each
    module's language model (``LLMRLModule.compile``). RLlib's TorchLearner means to call every module's
    ``compile`` too, but for a MultiRLModule (always, on the new API stack) it tests the container instead of
    the module and compiles nothing (Ray 2.60, ``TorchLearner.build``); ``compile`` runs once, so a fixed
    RLlib calling it as well changes nothing."""
    if not config.torch_compile_learner or (
        config.torch_compile_learner_what_to_compile != TorchCompileWhatToCompile.FORWARD_TRAIN
    ):
        return
    compile_config = TorchCompileConfig(torch_dynamo_backend=config.torch_compile_learner_dynamo_backend,
                                        torch_dynamo_mode=config.torch_compile_learner_dynamo_mode)
    for module_id in modules.keys():
        module = modules[module_id].unwrapped()
        if isinstance(module, LLMRLModule):
            module.compile(compile_config)


def fused_adamw(params: list[torch.Tensor]) -> bool:
    """Whether AdamW steps all of ``params`` in one fused kernel: on CUDA, where the default (foreach) runs
    several kernels per step and a LoRA model's ~400 small tensors make the step launch-bound. The CPU keeps
    the default, whose numbers the CPU results were measured with."""
    return bool(params) and all(p.device.type == "cuda" and p.is_floating_point() for p in params)


def _is_row_column(value: Any, rows: int) -> bool:
    return torch.is_tensor(value) and value.dim() > 0 and value.shape[0] == rows


class LLMLearner(MsgpackCheckpointable, TorchLearner):
    """TorchLearner for every rllib-llm algorithm: ``policy_loss`` (PPO token-ratio or GSPO sequence-ratio
    clipped surrogate) over response tokens; with a critic (GAE) the clipped value loss on the value at each
    step's last prompt token. With ``micro_batch_size`` a minibatch larger than it is forwarded and
    back-propagated in chunks of that many rows, and the optimizer steps once on the summed gradients: the
    same update, the activation memory of one chunk."""

    def build(self) -> None:
        super().build()
        self._shares: dict[str, LossShares] = {}  # set while micro-batching, empty otherwise
        self._micro_stats: dict[str, dict[str, float]] = {}
        # Adaptive entropy control (config.entropy_target), per module, as device tensors (no host sync a step):
        # the coefficient, the last optimizer step's entropy, and this step's token-weighted entropy so far.
        self._entropy_coeff: dict[str, torch.Tensor] = {}
        self._last_entropy: dict[str, torch.Tensor] = {}
        self._step_entropy: dict[str, torch.Tensor] = {}
        compile_language_models(self.module, self.config)

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        module = self.module[module_id]
        params = [p for p in self.get_parameters(module) if p.requires_grad]
        optimizer = torch.optim.AdamW(params, weight_decay=config.weight_decay, fused=fused_adamw(params) or None)
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params, lr_or_lr_schedule=config.lr)

    def postprocess_gradients_for_module(self, *, module_id: str, config: Any = None, module_gradients_dict: dict) -> dict:
        """Clipping by global norm as RLlib's ``clip_gradients`` (scale by min(1, clip / (norm + 1e-6)), the norm
        logged as ``gradients_<optimizer>_global_norm``) in a few foreach kernels instead of ~4 per tensor. Other
        clipping modes go to RLlib's."""
        if not config.grad_clip or config.grad_clip_by != "global_norm":
            return super().postprocess_gradients_for_module(
                module_id=module_id, config=config, module_gradients_dict=module_gradients_dict
            )
        for name, optimizer in self.get_optimizers_for_module(module_id):
            grads = [g for g in self.filter_param_dict_for_optimizer(module_gradients_dict, optimizer).values() if g is not None]
            if grads:
                norm = global_norm(grads)
                torch._foreach_mul_(grads, torch.clamp(config.grad_clip / (norm + 1e-6), max=1.0))
                self.metrics.log_value((module_id, f"gradients_{name}_global_norm"), norm, window=1)
        return dict(module_gradients_dict)

    def apply_gradients(self, gradients_dict: dict) -> None:
        """Steps the optimizers unless a gradient is nan or inf (then the step is skipped, as verl does, and
        counted): one check over all gradients, one device sync. RLlib's own check (two syncs per tensor) is
        off: ``LLMConfig`` sets ``torch_skip_nan_gradients=True``, which makes the TorchLearner step without
        checking. With a grad scaler (mixed precision) the scaler skips and rescales, as in RLlib."""
        self._advance_entropy_control()
        grads = [g for g in gradients_dict.values() if g is not None]
        if not has_grad_scalers(self) and grads and not bool(torch.isfinite(global_norm(grads))):
            logger.warning("Skipping an optimizer step: the gradients hold nan or inf values.")
            self.metrics.log_value((ALL_MODULES, NONFINITE_STEPS_SKIPPED), 1, reduce="sum")
            return
        super().apply_gradients(gradients_dict)

    def _entropy_bonus_coeff(self, module_id: str, config: Any, entropy: torch.Tensor, share: float) -> torch.Tensor:
        """The entropy bonus's coefficient for this (micro-)batch under adaptive entropy control: the module's
        coefficient while the last step's entropy was below ``entropy_target`` (this batch's own before the
        first step), else 0; this batch's entropy joins the step's token-weighted mean."""
        coeff = self._entropy_coeff.setdefault(module_id, torch.tensor(float(config.entropy_coeff), device=entropy.device))
        last = self._last_entropy.get(module_id, entropy)
        self._step_entropy[module_id] = self._step_entropy.get(module_id, 0.0) + share * entropy
        return torch.where(last < config.entropy_target, coeff, torch.zeros_like(coeff))

    def _advance_entropy_control(self) -> None:
        """Once per optimizer step: each module's coefficient moves by its step (losses.adaptive_entropy_coeff)
        from the entropy the step measured."""
        for module_id, entropy in self._step_entropy.items():
            config = self.config.get_config_for_module(module_id)
            self._entropy_coeff[module_id] = adaptive_entropy_coeff(
                self._entropy_coeff[module_id], entropy, config.entropy_target, config.entropy_coeff_step
            )
            self._last_entropy[module_id] = entropy
        self._step_entropy = {}

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict:
        """RLlib's Learner state, plus the adaptive entropy coefficients (a resumed run continues them)."""
        state = super().get_state(components, not_components=not_components, **kwargs)
        if self._entropy_coeff:
            state[ENTROPY_CONTROL] = {
                mid: [float(c), float(self._last_entropy.get(mid, torch.tensor(float("nan"))))]
                for mid, c in self._entropy_coeff.items()
            }
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        for mid, (coeff, last) in state.get(ENTROPY_CONTROL, {}).items():
            self._entropy_coeff[mid] = torch.tensor(coeff, device=self._device)
            if last == last:  # not nan
                self._last_entropy[mid] = torch.tensor(last, device=self._device)

    def _uncompiled_update(self, batch: dict, **kwargs: Any):
        """Micro-batching: RLlib has no public hook between the forward/backward passes and the optimizer
        step, so this is the one override of a private Learner method. It mirrors
        ``TorchLearner._uncompiled_update`` (off-policyness stats, ``compute_losses``, backward, then
        ``postprocess_gradients`` + ``apply_gradients``) with the forward/backward run per chunk, and defers to
        it whenever a minibatch fits one chunk. The RLlib internals it relies on are wrapped in
        :mod:`rllib_llm.algorithms.rllib_internals` (``tests/algorithms/test_learner_contract.py`` fails if they
        change)."""
        size = self.config.micro_batch_size
        if not size or all(len(columns[RESPONSE_MASK]) <= size for columns in batch.values()):
            return super()._uncompiled_update(batch, **kwargs)
        compute_off_policyness(self, batch)
        zero_gradients(self)
        totals: dict[str, torch.Tensor] = {}
        fwd_out: dict[str, Any] = {}
        try:
            for micro, shares in micro_batches(batch, size, self.config.loss_agg_mode):
                self._shares = shares
                fwd_out = self.module.forward_train(micro)
                losses = self.compute_losses(fwd_out=fwd_out, batch=micro)
                total = sum(scaled_losses(self, losses))
                if torch.is_tensor(total) and total.requires_grad:
                    total.backward()
                for mid, loss in losses.items():
                    totals[mid] = totals.get(mid, 0.0) + loss.detach()
        finally:
            self._shares = {}
        for mid, stats in self._micro_stats.items():
            self.metrics.log_dict(stats, key=mid, window=1)
        self._micro_stats = {}
        gradients = accumulated_gradients(self)
        self.apply_gradients(self.postprocess_gradients(gradients))
        return fwd_out, totals, {}

    def compute_loss_for_module(self, *, module_id: str, config: Any, batch: dict, fwd_out: dict) -> torch.Tensor:
        shares = self._shares.get(module_id, WHOLE)
        mask = batch[RESPONSE_MASK]
        logp = fwd_out[LOGP]
        old_logp, weights, stats = batch[ACTION_LOGP], None, {}
        if PROX_LOGP in batch:  # asynchronous rollouts: the decoupled objective (losses.behaviour_weights)
            old_logp = batch[PROX_LOGP]
            weights = behaviour_weights(old_logp, batch[ACTION_LOGP], config.behaviour_weight_cap)
            fmask = mask.to(weights.dtype)
            with torch.no_grad():
                stats["behaviour_weight_mean"] = masked_mean(weights, fmask)
                stats["behaviour_weight_capped_fraction"] = masked_mean(
                    (weights >= config.behaviour_weight_cap).to(weights.dtype), fmask
                )
        loss, policy_stats = POLICY_LOSSES.lookup(config.policy_loss)(
            logp,
            old_logp,
            batch[ADVANTAGES],
            mask,
            clip_low=config.clip_ratio_low,
            clip_high=config.clip_ratio_high,
            agg=config.loss_agg_mode,
            clip_ratio_c=config.clip_ratio_c,
            token_weights=weights,
        )
        stats.update(policy_stats)
        stats["policy_loss"] = loss.detach()
        loss = shares.agg * loss
        if VALUE_TARGETS in batch:
            vf_loss, vf_stats = value_loss(
                fwd_out[VALUES][:, 0], batch[OLD_VALUES], batch[VALUE_TARGETS], config.vf_clip_param
            )
            loss = loss + config.vf_loss_coeff * shares.rows * vf_loss
            stats.update(vf_stats, vf_loss=vf_loss.detach())
        if config.kl_coeff > 0:
            if REF_LOGP not in batch:
                raise KeyError(f"kl_coeff > 0 but module {module_id!r}'s batch has no {REF_LOGP!r} column: the learner "
                               "pipeline needs ReferenceLogProbs (LLMConfig.build_learner_connector adds it)")
            kl = aggregate(kl_penalty(logp, batch[REF_LOGP], config.kl_estimator), mask, config.loss_agg_mode)
            loss = loss + config.kl_coeff * shares.agg * kl
            stats[KL] = kl.detach()
        entropy = aggregate(fwd_out[ENTROPY], mask, "token-mean")
        stats[ENTROPY_METRIC] = entropy.detach()
        if config.entropy_target is not None:
            coeff = self._entropy_bonus_coeff(module_id, config, entropy.detach(), shares.tokens)
            loss = loss - coeff * shares.tokens * entropy
            stats["entropy_coeff"] = coeff
        elif config.entropy_coeff:
            loss = loss - config.entropy_coeff * shares.tokens * entropy
        if self._shares:  # a micro-batch: the minibatch's stats are the token-weighted means over its chunks
            logged = self._micro_stats.setdefault(module_id, {})
            for key, value in stats.items():
                logged[key] = logged.get(key, 0.0) + shares.tokens * value
        else:
            # Tensors, as RLlib's own losses log them: moved to the host when the results are reduced, once an
            # update, not with a device sync per stat and minibatch.
            self.metrics.log_dict(stats, key=module_id, window=1)
        return loss
