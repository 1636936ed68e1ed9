"""Micro-batching in the Learner: chunks of a minibatch accumulate exactly the minibatch's gradient."""

import copy

import pytest
import torch

from rllib_llm.algorithms.learner import LossShares, micro_batches
from rllib_llm.algorithms.losses import aggregate_weight
from tests.algorithms.conftest import make_groups_informative
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")


def test_shares_split_a_minibatch_by_tokens_sequences_and_rows():
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0], [1, 1, 0]], dtype=torch.float32)
    assert aggregate_weight(mask) == 6 and aggregate_weight(mask, "seq-mean-token-sum") == 3
    batch = {
        "a": {"response_mask": mask, "advantages": torch.arange(4.0), "step": torch.tensor(7)},
        "b": {"response_mask": mask[:2], "advantages": torch.ones(2)},
    }
    chunks = list(micro_batches(batch, 3, "seq-mean-token-mean"))
    # rows 0-2 of "a": 4 of its 6 tokens, 2 of its 3 sequences with tokens, 3 of its 4 rows; "b" fits in one
    assert chunks[0][1] == {"a": LossShares(agg=2 / 3, tokens=4 / 6, rows=3 / 4), "b": LossShares()}
    assert chunks[1][1] == {"a": LossShares(agg=1 / 3, tokens=2 / 6, rows=1 / 4)}  # "b" is out of rows
    assert chunks[1][0]["a"]["advantages"].tolist() == [3.0] and chunks[1][0]["a"]["step"] == 7
    token_mean = list(micro_batches(batch, 3, "token-mean"))
    assert [s["a"].agg for _, s in token_mean] == [4 / 6, 2 / 6]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_micro_batches_accumulate_the_whole_minibatch_gradient(agg):
    """Same episodes, one update without and with micro-batches of 5 rows (uneven chunks): the gradients the
    optimizer stepped on and the logged entropy are the same; the policy, KL and entropy terms all count."""
    episodes, grads, entropy, before = None, {}, {}, {}
    for micro in (None, 5):
        config = tiny_config().training(
            loss_agg_mode=agg, kl_coeff=0.1, entropy_coeff=0.01, grad_clip=None, micro_batch_size=micro,
            minibatch_size=64, num_epochs=1,
        )
        algo = config.build_algo()
        try:
            learner = algo.learner_group._learner
            before[micro] = [p.detach().clone() for p in learner._params.values()]
            if episodes is None:
                make_groups_informative(algo)
                episodes = algo.env_runner.sample()
            result = algo.learner_group.update(episodes=copy.deepcopy(episodes), num_epochs=1, minibatch_size=64)
            grads[micro] = [p.grad.detach().clone() for p in learner._params.values()]
            entropy[micro] = float(result[0]["default_policy"]["entropy"])
        finally:
            algo.stop()
    assert sum(len(ep) for ep in episodes) > 5  # more than one chunk
    for a, b in zip(before[None], before[5], strict=True):
        torch.testing.assert_close(a, b)
    assert any(g.abs().sum() > 0 for g in grads[None])
    for full, accumulated in zip(grads[None], grads[5], strict=True):
        torch.testing.assert_close(accumulated, full, rtol=1e-4, atol=1e-7)
    assert entropy[5] == pytest.approx(entropy[None], rel=1e-5)


@pytest.mark.parametrize("field", ["micro_batch_size", "logprob_batch_size"])
def test_batch_sizes_are_checked(field):
    with pytest.raises(ValueError, match=field):
        tiny_config().training(**{field: 0}).validate()


def test_no_grad_passes_default_to_the_micro_batch_then_the_minibatch():
    assert tiny_config().training(minibatch_size=32).logprob_rows == 32
    assert tiny_config().training(minibatch_size=32, micro_batch_size=8).logprob_rows == 8
    assert tiny_config().training(minibatch_size=32, micro_batch_size=8, logprob_batch_size=192).logprob_rows == 192
