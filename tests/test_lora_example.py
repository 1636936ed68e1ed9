"""The main job trains LoRA adapters (its LoRA settings on the tiny model: one iteration trains and syncs only
adapter weights); numberline_gigpo_full.py is the same job on full weights."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_llm.run.cli import load_tuned_example
from tests.algorithms.conftest import TUNED_EXAMPLES, learner_weights, make_groups_informative, shrink_to_tiny

pytestmark = pytest.mark.usefixtures("ray_session")


def test_full_weights_example_is_the_main_job_without_adapters():
    config, _ = load_tuned_example(TUNED_EXAMPLES / "numberline_gigpo_full.py")
    main, _ = load_tuned_example(TUNED_EXAMPLES / "numberline_gigpo.py")
    assert config.llm_model["lora"] is None and main.llm_model["lora"] is not None
    main_lr = main.lr[-1][1] if isinstance(main.lr, list) else main.lr  # the end of a warm-up schedule
    assert config.lr < main_lr and config.env_config == main.env_config and config.group_size == main.group_size


def test_lora_example_trains_and_syncs_only_the_adapters():
    config, stop = load_tuned_example(TUNED_EXAMPLES / "numberline_gigpo.py")
    model = config.llm_model
    assert model["name_or_path"] == "smollm2-135m-instruct" and stop["training_iteration"] >= 1
    assert model["lora"]["r"] == 16 and model["lora"]["lora_alpha"] == 32
    assert {"q_proj", "v_proj", "down_proj"} <= set(model["lora"]["target_modules"])

    tiny = shrink_to_tiny(config).llm(model={**model, "name_or_path": "tiny-random-llama"})
    algo = tiny.build_algo()
    try:
        learner_module = algo.learner_group._learner.module["default_policy"]
        trainable = [n for n, p in learner_module.named_parameters() if p.requires_grad]
        assert trainable and all("lora_" in n for n in trainable)
        make_groups_informative(algo)
        before = learner_weights(algo)
        algo.train()
        after = learner_weights(algo)
        moved = {k for k in before if not np.allclose(before[k], after[k])}
        assert moved and all("lora_" in k for k in moved), sorted(moved)[:5]
        # The weight sync carried exactly the adapters: the EnvRunner's copy equals the Learner's.
        runner = algo.env_runner.module.get_state()
        for key in moved:
            np.testing.assert_allclose(runner[key], after[key], rtol=1e-6)
        assert set(algo.env_runner.module.get_state(inference_only=True)) == set(trainable)
    finally:
        algo.stop()
