"""GSPO, dual-clip PPO, the value loss and the KL estimators against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from rllib_llm.algorithms.losses import (
    POLICY_LOSSES,
    clipped_policy_loss,
    gspo_policy_loss,
    kl_penalty,
    value_loss,
)


def test_gspo_by_hand():
    # Row 0: token log-ratios [0.1, 0.3] -> sequence ratio exp(0.2) = 1.2214, A = +1, clipped to 1.2:
    #   per token max(-1.2214, -1.2) = -1.2.
    # Row 1: one token, log-ratio -0.05 -> ratio 0.9512 (inside [0.8, 1.2]), A = -1: 0.9512.
    # seq-mean-token-mean: (-1.2 + 0.9512) / 2. Padding (row 1, token 2) is ignored.
    logp = torch.tensor([[-1.0, -2.0], [-0.55, 5.0]])
    old = torch.tensor([[-1.1, -2.3], [-0.5, 0.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, stats = gspo_policy_loss(logp, old, torch.tensor([1.0, -1.0]), mask, 0.2, 0.2)
    assert loss.item() == pytest.approx((-1.2 + math.exp(-0.05)) / 2, rel=1e-5)
    assert stats["clip_fraction"].item() == pytest.approx(2 / 3)  # row 0's two tokens of 3


def test_gspo_ratio_is_per_sequence_not_per_token():
    # Token log-ratios [+0.5, -0.5]: PPO clips both tokens (1.6487 -> 1.2 counts, 0.6065 -> kept, A > 0);
    # GSPO sees one sequence ratio exp(0) = 1, nothing clipped, loss -A.
    logp, old, mask = torch.tensor([[0.5, -0.5]]), torch.zeros(1, 2), torch.ones(1, 2)
    gspo, _ = gspo_policy_loss(logp, old, torch.tensor([1.0]), mask, 0.2, 0.2)
    ppo, _ = clipped_policy_loss(logp, old, torch.tensor([1.0]), mask, 0.2, 0.2, "seq-mean-token-mean")
    assert gspo.item() == pytest.approx(-1.0)
    assert ppo.item() == pytest.approx((-1.2 - math.exp(-0.5)) / 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gspo_token_form_has_the_gradient_of_the_sequence_objective(seed):
    # GSPO's objective: mean_i max(-A_i s_i, -A_i clip(s_i)), s_i = exp(mean_t (logp - old)).
    torch.manual_seed(seed)
    logp = (torch.randn(4, 5) * 0.2).requires_grad_()
    old = logp.detach() + torch.randn(4, 5) * 0.05
    mask = torch.tensor([[1.0] * k + [0.0] * (5 - k) for k in (5, 3, 1, 4)])
    adv = torch.tensor([1.0, -0.5, 2.0, -1.0])
    loss, _ = gspo_policy_loss(logp, old, adv, mask, 0.05, 0.05)
    (grad,) = torch.autograd.grad(loss, logp)
    seq_ratio = torch.exp(((logp - old) * mask).sum(-1) / mask.sum(-1))
    direct = torch.maximum(-adv * seq_ratio, -adv * seq_ratio.clamp(0.95, 1.05)).mean()
    (direct_grad,) = torch.autograd.grad(direct, logp)
    assert loss.item() == pytest.approx(direct.item(), rel=1e-5)
    torch.testing.assert_close(grad, direct_grad, rtol=1e-5, atol=1e-6)


def test_dual_clip_caps_negative_advantages_by_hand():
    # Ratio exp(1.5) = 4.4817, A = -1: PPO's max(4.4817, 0.8 * 1 ... clip -> 1.2) = 4.4817; dual clip with
    # c = 3 caps it at min(4.4817, 3 * 1) = 3. Positive advantages are untouched.
    logp, old, mask = torch.tensor([[1.5]]), torch.zeros(1, 1), torch.ones(1, 1)
    plain, _ = clipped_policy_loss(logp, old, torch.tensor([-1.0]), mask)
    dual, stats = clipped_policy_loss(logp, old, torch.tensor([-1.0]), mask, clip_ratio_c=3.0)
    assert plain.item() == pytest.approx(math.exp(1.5))
    assert dual.item() == pytest.approx(3.0)
    assert stats["dual_clip_fraction"].item() == 1.0
    positive, _ = clipped_policy_loss(logp, old, torch.tensor([1.0]), mask, clip_ratio_c=3.0)
    assert positive.item() == pytest.approx(-1.2)


def test_value_loss_by_hand():
    # Row 0: V 1.0, old 0.5, target 2: unclipped (1 - 2)^2 = 1; V clipped to 0.5 + 0.2 = 0.7: (0.7 - 2)^2 = 1.69.
    # Row 1: V 0.4, old 0.5, target 0: inside the clip range, (0.4)^2 = 0.16 both ways.
    # Loss 0.5 * mean(max) = 0.5 * (1.69 + 0.16) / 2 = 0.4625; without clipping 0.5 * (1 + 0.16) / 2 = 0.29.
    values, old, targets = torch.tensor([1.0, 0.4]), torch.tensor([0.5, 0.5]), torch.tensor([2.0, 0.0])
    loss, stats = value_loss(values, old, targets, clip=0.2)
    assert loss.item() == pytest.approx(0.4625)
    assert stats["vf_clip_fraction"].item() == pytest.approx(0.5)
    assert value_loss(values, old, targets, clip=None)[0].item() == pytest.approx(0.29)


def test_kl_estimators_match_verls_formulas():
    # verl: k3 = exp(ref - logp) - (ref - logp) - 1, "abs" = |logp - ref|. With logp = -2, ref = -1:
    # d = logp - ref = -1: k3 = e^1 - 1 - 1 = 0.71828, k1 = -1, k2 = 0.5, abs = 1.
    logp, ref = torch.tensor([-2.0]), torch.tensor([-1.0])
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(math.e - 2)
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(-1.0)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5)
    assert kl_penalty(logp, ref, "abs").item() == pytest.approx(1.0)
    assert kl_penalty(torch.tensor([-20.0]), torch.tensor([0.0]), "low_var_kl").item() == pytest.approx(10.0)


def test_policy_loss_registry():
    assert POLICY_LOSSES == {"ppo": clipped_policy_loss, "gspo": gspo_policy_loss}


@pytest.mark.parametrize("loss_fn", [clipped_policy_loss, gspo_policy_loss])
def test_a_token_with_a_huge_log_ratio_leaves_the_gradient_finite(loss_fn):
    """A padded (masked) position or a token the policy has all but ruled out: exp of its unbounded log-ratio
    was inf, its backward 0 * inf = nan, and the Learner skipped the update."""
    logp = torch.tensor([[-1.0, 0.0], [-2.0, -0.5]], requires_grad=True)
    old = torch.tensor([[-1.2, -150.0], [-2.1, -0.4]])
    loss, _ = loss_fn(logp, old, torch.tensor([1.0, -1.0]), torch.tensor([[1, 0], [1, 1]]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()


@pytest.mark.parametrize("estimator", ["k3", "low_var_kl"])
def test_k3_of_a_ruled_out_token_has_a_finite_gradient(estimator):
    logp = torch.tensor([-200.0, -1.0, -1.5], requires_grad=True)
    kl = kl_penalty(logp, torch.tensor([-1.0, -1.0, -1.0]), estimator)
    kl.sum().backward()
    assert torch.isfinite(logp.grad).all() and logp.grad[2] == pytest.approx(1 - math.exp(0.5))


def test_verls_kl_names_are_its_estimators():
    """verl's kl_penalty names: "kl" is k1, "mse" is k2 (notes/parity.md)."""
    logp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0])
    assert torch.equal(kl_penalty(logp, ref, "kl"), torch.tensor([0.5, -1.0]))
    assert torch.equal(kl_penalty(logp, ref, "mse"), torch.tensor([0.125, 0.5]))
