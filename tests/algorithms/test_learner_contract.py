"""The RLlib internals LLMLearner's one private override (micro-batching in ``_uncompiled_update``) relies
on: if an RLlib upgrade changes them, this fails before a training run silently misbehaves."""

import inspect

from ray.rllib.core.learner.torch.torch_learner import TorchLearner

from rllib_llm.algorithms.learner import LLMLearner


def test_torch_learner_still_has_what_the_micro_batch_update_uses():
    params = list(inspect.signature(TorchLearner._uncompiled_update).parameters)
    assert params[:2] == ["self", "batch"]
    source = inspect.getsource(TorchLearner._uncompiled_update)
    # The base update: off-policyness stats, the losses, backward via compute_gradients, then post-processing
    # and the optimizer step; LLMLearner's chunked update does the same steps in that order.
    for call in ("_compute_off_policyness(", "compute_losses(", "compute_gradients(", "postprocess_gradients(",
                 "apply_gradients("):  # fmt: skip
        assert call in source, call
    gradients = inspect.getsource(TorchLearner.compute_gradients)
    for name in ("_optimizer_parameters", "_grad_scalers", "zero_grad"):
        assert name in gradients, name
    assert "_params" in inspect.getsource(TorchLearner)
    assert "return fwd_out, loss_per_module, {}" in source  # the (fwd_out, losses, tensor metrics) it returns


def test_the_override_is_the_learners_only_private_one():
    from ray.rllib.core.learner.torch.torch_learner import TorchLearner

    private = [n for n, v in vars(LLMLearner).items() if n.startswith("_") and not n.startswith("__") and callable(v)]
    assert [n for n in private if hasattr(TorchLearner, n)] == ["_uncompiled_update"]  # our own helpers aside


def test_adamw_is_fused_on_cuda_only():
    """One fused kernel a step on CUDA (a LoRA model's ~400 tensors make the foreach step launch-bound); the
    CPU keeps the default its results were measured with."""
    from types import SimpleNamespace

    import torch

    from rllib_llm.algorithms.learner import fused_adamw

    on_cuda = SimpleNamespace(device=torch.device("cuda"), is_floating_point=lambda: True)
    assert fused_adamw([on_cuda, on_cuda])
    assert not fused_adamw([on_cuda, torch.zeros(1)]) and not fused_adamw([torch.zeros(1)]) and not fused_adamw([])


def test_rllibs_private_names_are_used_only_in_the_adapter_module():
    """Every private RLlib attribute rllib-llm touches goes through rllib_llm/algorithms/rllib_internals.py;
    an access written elsewhere (``learner._params``, ``_uses_new_env_runners=``) fails here. The adapter's own
    wrapped names must still exist in RLlib."""
    import re
    from pathlib import Path

    import rllib_llm
    from rllib_llm.algorithms import rllib_internals

    names = ("_optimizer_parameters", "_grad_scalers", "_params", "_compute_off_policyness", "_uses_new_env_runners",
             "_return_metrics")  # fmt: skip
    alternatives = "|".join(names)
    pattern = re.compile(rf"\.({alternatives})\b|\b({alternatives})=")
    package = Path(rllib_llm.__file__).parent
    outside = [f"{p.relative_to(package)}:{i}" for p in package.rglob("*.py") if p.name != "rllib_internals.py"
               for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]  # fmt: skip
    assert not outside, outside
    adapter = inspect.getsource(rllib_internals)
    for name in names:
        assert name in adapter, name
    source = inspect.getsource(TorchLearner) + inspect.getsource(inspect.getmodule(TorchLearner.__mro__[1]))
    for name in names[:4]:
        assert name in source, name
