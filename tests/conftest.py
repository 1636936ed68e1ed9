"""Shared fixtures: one Ray instance per test session, tiny-model configs that build in seconds, and the
``device`` parameter (CPU, and CUDA with ``-m gpu`` on a GPU machine)."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Test runs log to a throwaway MLflow store, not the repo's ./mlruns.
os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{tempfile.mkdtemp(prefix='rllib-llm-mlruns-')}/mlflow.db")


@pytest.fixture(scope="session")
def ray_session():
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def tiny_config(algo: str = "gigpo", **group_rollouts):
    """A NumberLine config on the tiny random model, small enough for one iteration in seconds."""
    from rllib_llm.algorithms import GiGPOConfig, GRPOConfig

    cls = {"gigpo": GiGPOConfig, "grpo": GRPOConfig}[algo]
    settings = {"group_size": 2, "num_groups": 2, "max_episode_steps": 3, **group_rollouts}
    return (
        cls()
        .environment("NumberLine", env_config={"max_position": 3, "max_steps": 3})
        .llm(model="tiny-random-llama")
        .generation(max_new_tokens=6)
        .group_rollouts(**settings)
        .training(lr=1e-3, minibatch_size=8)
        .evaluation(evaluation_num_seeds=3)
        .debugging(seed=0)
    )


@pytest.fixture
def tiny_gigpo_config():
    return tiny_config("gigpo")


CUDA = pytest.param(
    "cuda",
    marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")],
)


@pytest.fixture(params=["cpu", CUDA])
def device(request) -> str:
    """Each test on the CPU and, with ``-m gpu`` on a GPU machine, on CUDA (the hf backend's graph path)."""
    return request.param
