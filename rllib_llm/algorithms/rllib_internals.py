"""The private RLlib names rllib-llm cannot do without, in one place (read in RLlib 2.60.0's source).

RLlib offers no public hook between a Learner's forward/backward passes and its optimizer step, which
micro-batching needs (``LLMLearner._uncompiled_update``, the one override of a private method, mirrors
``TorchLearner._uncompiled_update``), and its sampling helper takes the new-stack switches as private keyword
arguments. Everything below wraps exactly one private name; ``tests/algorithms/test_learner_contract.py``
fails when an RLlib upgrade changes one, so the fix is here and nowhere else.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

#: The RLlib version these names were read from.
RLLIB_VERSION = "2.60.0"


def zero_gradients(learner: Any) -> None:
    """Every registered optimizer's gradients set to None (``Learner._optimizer_parameters``, as
    ``TorchLearner.compute_gradients`` does before its backward pass)."""
    for optimizer in learner._optimizer_parameters:
        optimizer.zero_grad(set_to_none=True)


def has_grad_scalers(learner: Any) -> bool:
    """Whether mixed-precision loss scaling is on (``TorchLearner._grad_scalers``)."""
    return learner._grad_scalers is not None


def scaled_losses(learner: Any, losses: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Each module's loss through its grad scaler when loss scaling is on (``TorchLearner._grad_scalers``)."""
    scalers = learner._grad_scalers
    return [scalers[mid].scale(loss) if scalers is not None else loss for mid, loss in losses.items()]


def accumulated_gradients(learner: Any) -> dict:
    """Param ref -> the gradient the backward passes left (``Learner._params``), parameters without one
    left out: what ``TorchLearner.compute_gradients`` returns after its single backward pass."""
    return {pid: p.grad for pid, p in learner._params.items() if p.grad is not None}


def compute_off_policyness(learner: Any, batch: dict) -> None:
    """RLlib's off-policyness statistics of a batch (``TorchLearner._compute_off_policyness``), logged first
    in every update."""
    learner._compute_off_policyness(batch)


def sample_with_env_runners(env_runner_group: Any) -> tuple[list, list]:
    """(episodes, EnvRunner metrics) of one ``sample()`` on every EnvRunner: RLlib's
    ``synchronous_parallel_sample`` with its new-stack switches (``_uses_new_env_runners``,
    ``_return_metrics``), as RLlib's own PPO calls it."""
    return synchronous_parallel_sample(worker_set=env_runner_group, _uses_new_env_runners=True, _return_metrics=True)
