"""Adaptive entropy control (Skywork-OR1): an entropy bonus that switches on below a target entropy."""

import copy

import pytest
import torch

from rllib_llm.algorithms.learner import ENTROPY_CONTROL
from rllib_llm.algorithms.losses import adaptive_entropy_coeff
from tests.algorithms.conftest import make_groups_informative
from tests.conftest import tiny_config


def test_the_coefficient_rises_below_the_target_and_falls_to_zero_above_it():
    c = torch.tensor(0.01)
    assert float(adaptive_entropy_coeff(c, torch.tensor(0.1), 0.2, 0.005)) == pytest.approx(0.015)
    assert float(adaptive_entropy_coeff(c, torch.tensor(0.3), 0.2, 0.005)) == pytest.approx(0.005)
    assert float(adaptive_entropy_coeff(torch.tensor(0.002), torch.tensor(0.3), 0.2, 0.005)) == 0.0


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("micro", [None, 5])
def test_a_policy_below_its_target_entropy_gets_a_growing_bonus_and_the_state_survives_a_checkpoint(micro):
    """Target far above any entropy: the coefficient grows by one step per optimizer step and is applied from
    the second step on (the first uses its own start value 0); the gradient then differs from the run without
    control. A target of ~0 keeps the bonus off: the same gradient as without."""
    episodes, grads, coeffs = None, {}, {}
    for target in (None, 1e-9, 50.0):
        config = tiny_config().training(
            entropy_target=target, entropy_coeff_step=0.01, grad_clip=None, micro_batch_size=micro,
            minibatch_size=8, num_epochs=1,
        )
        algo = config.build_algo()
        try:
            learner = algo.learner_group._learner
            if episodes is None:
                make_groups_informative(algo)
                episodes = algo.env_runner.sample()
            for _ in range(2):
                algo.learner_group.update(episodes=copy.deepcopy(episodes), num_epochs=1, minibatch_size=8)
            grads[target] = [p.grad.detach().clone() for p in learner._params.values()]
            state = learner.get_state()
            coeffs[target] = state.get(ENTROPY_CONTROL, {}).get("default_policy")
            if target == 50.0:
                twin = copy.deepcopy(state[ENTROPY_CONTROL])
                learner._entropy_coeff = {}
                learner.set_state({ENTROPY_CONTROL: twin})
                assert float(learner._entropy_coeff["default_policy"]) == pytest.approx(twin["default_policy"][0])
        finally:
            algo.stop()
    steps = 2 * -(-sum(len(ep) for ep in episodes) // 8)  # optimizer steps: minibatches of 8 rows, two updates
    assert coeffs[None] is None
    assert coeffs[50.0][0] == pytest.approx(0.01 * steps) and coeffs[1e-9][0] == 0.0
    for a, b in zip(grads[None], grads[1e-9], strict=True):
        torch.testing.assert_close(a, b)
    assert any(not torch.allclose(a, b) for a, b in zip(grads[None], grads[50.0], strict=True))
