"""The clipped policy loss and KL estimators against hand-computed numbers."""

import math

import pytest
import torch

from rllib_llm.algorithms.losses import aggregate, clipped_policy_loss, kl_penalty


def test_clipped_loss_by_hand():
    # Token ratios: exp(0.5)=1.6487 (adv +1 -> clipped at 1.2), exp(-0.5)=0.6065 (adv +1 -> unclipped
    # min(0.6065, 0.8)... loss = max(-A r, -A clip(r)) = max(-0.6065, -0.8) = -0.6065), padding ignored.
    logp = torch.tensor([[0.5, -0.5, 0.0]])
    old = torch.zeros(1, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, stats = clipped_policy_loss(logp, old, torch.tensor([1.0]), mask, 0.2, 0.2, "token-mean")
    expected = (-1.2 + -math.exp(-0.5)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert stats["clip_fraction"].item() == pytest.approx(0.5)


def test_clip_higher_uses_separate_upper_bound():
    logp = torch.tensor([[0.5]])
    loss, _ = clipped_policy_loss(logp, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1), 0.2, 0.28)
    assert loss.item() == pytest.approx(-1.28)


def test_negative_advantage_clips_below():
    logp = torch.tensor([[-0.5]])  # ratio 0.6065 < 0.8: max(0.6065, 0.8) = 0.8
    loss, _ = clipped_policy_loss(logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1))
    assert loss.item() == pytest.approx(0.8)


def test_aggregation_modes_by_hand():
    values = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate(values, mask, "token-mean").item() == pytest.approx(6 / 3)
    assert aggregate(values, mask, "seq-mean-token-sum").item() == pytest.approx((4 + 2) / 2)
    assert aggregate(values, mask, "seq-mean-token-mean").item() == pytest.approx((2 + 2) / 2)
    with pytest.raises(ValueError, match="loss aggregation"):
        aggregate(values, mask, "sum")


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([-1.0]), torch.tensor([-2.0])  # diff = 1
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(1.0)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.5)
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(math.exp(-1) + 1 - 1)
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([-20.0]), "low_var_kl").item() == pytest.approx(10.0)
    with pytest.raises(ValueError, match="kl estimator"):
        kl_penalty(logp, ref, "k9")
