"""The Learner's gradient step: global-norm clipping and the nan/inf check over all gradients at once."""

import pytest
import torch
from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from ray.rllib.utils.torch_utils import clip_gradients

from rllib_llm.algorithms.learner import NONFINITE_STEPS_SKIPPED, global_norm
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")


def test_global_norm_by_hand():
    assert float(global_norm([torch.tensor([3.0, 4.0]), torch.tensor([[12.0]])])) == pytest.approx(13.0)
    assert not torch.isfinite(global_norm([torch.tensor([1.0]), torch.tensor([float("nan")])]))
    assert not torch.isfinite(global_norm([torch.tensor([float("inf")])]))


@pytest.fixture(scope="module")
def learner():
    algo = tiny_config().training(grad_clip=0.5).build_algo()
    yield algo.learner_group._learner
    algo.stop()


def random_gradients(learner, scale: float = 1.0) -> dict:
    torch.manual_seed(0)
    return {pid: scale * torch.randn_like(p) for pid, p in learner._params.items() if p.requires_grad}


def test_clipping_by_global_norm_equals_rllibs(learner):
    ours, rllibs = random_gradients(learner), random_gradients(learner)
    config = learner.config.get_config_for_module(DEFAULT_MODULE_ID)
    clipped = learner.postprocess_gradients_for_module(module_id=DEFAULT_MODULE_ID, config=config, module_gradients_dict=ours)
    norm = clip_gradients(rllibs, grad_clip=0.5, grad_clip_by="global_norm")
    assert float(norm) > 0.5  # the clip is active
    for pid, grad in rllibs.items():
        torch.testing.assert_close(clipped[pid], grad)
    assert float(global_norm(list(clipped.values()))) == pytest.approx(0.5, rel=1e-4)


def test_a_step_with_a_nan_gradient_is_skipped_and_counted(learner):
    before = [p.detach().clone() for p in learner._params.values()]
    grads = random_gradients(learner)
    grads[next(iter(grads))][..., 0] = float("nan")
    learner.apply_gradients(grads)
    for b, p in zip(before, learner._params.values(), strict=True):
        torch.testing.assert_close(p.detach(), b)
    assert learner.metrics.peek((ALL_MODULES, NONFINITE_STEPS_SKIPPED)) == 1
    learner.apply_gradients(random_gradients(learner))  # finite: the step is taken
    assert any(not torch.equal(b, p.detach()) for b, p in zip(before, learner._params.values(), strict=True))


def test_rllibs_per_tensor_check_is_off():
    assert tiny_config().torch_skip_nan_gradients is True
