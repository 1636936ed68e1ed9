"""Vision-language training end to end: the Sokoban VL tuned example (pixels only) on a tiny random Qwen2.5-VL,
through the normal RLlib path (LLMEnvRunner -> learner connector -> LLMLearner -> weight sync)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib_llm.algorithms.learner_connectors import pad_token_batch, step_columns
from rllib_llm.columns import ACTION_LOGP, IMAGE_SIZES, IMAGES, NUM_IMAGES, PROMPT, RESPONSE
from rllib_llm.core.models import TINY_VL_MODEL
from rllib_llm.envs.sokoban.env import IMAGE_ONLY_TEXT
from rllib_llm.run.cli import load_tuned_example
from tests.algorithms.conftest import TUNED_EXAMPLES, learner_weights, make_groups_informative, shrink_to_tiny

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.fixture(scope="module")
def algo(ray_session):
    config, stop = load_tuned_example(TUNED_EXAMPLES / "sokoban_gigpo_vl.py")
    assert config.llm_model["name_or_path"] == "Qwen/Qwen2.5-VL-3B-Instruct" and stop["training_iteration"] >= 1
    assert config.env_config["image_obs"] and not config.env_config["text_obs"] and config.kl_coeff > 0
    tiny = (
        shrink_to_tiny(config)
        .llm(model=TINY_VL_MODEL)
        .environment(env_config={**config.env_config, "tile_size": 14})  # 84 px: 9 image tokens
        .learners(num_gpus_per_learner=0)
        .env_runners(num_gpus_per_env_runner=0)
    )
    algo = tiny.build_algo()
    yield algo
    algo.stop()


def learner_batch(algo, episodes: list) -> tuple[dict, object, object]:
    """The Learner's own connector pipeline over ``episodes``: (tensor batch, step columns, Learner module)."""
    learner = algo.learner_group._learner
    batch = learner._learner_connector(rl_module=learner.module, batch={}, episodes=episodes, shared_data={})
    return batch[DEFAULT_MODULE_ID], step_columns(episodes), learner.module[DEFAULT_MODULE_ID].unwrapped()


def masked_logp(module, batch: dict) -> torch.Tensor:
    with torch.no_grad():
        return module.forward_train(batch)["logp"] * batch["response_mask"]


def test_learner_logprobs_match_the_env_runner_and_see_the_image(algo):
    runner = algo.env_runner
    assert type(runner.backend).__name__ == "HFVisionBackend"
    episodes = runner.sample(seeds=[3, 4])
    image_token = runner.module.model.config.image_token_id
    for episode in episodes:
        assert episode.get_observations(0)["text"] == IMAGE_ONLY_TEXT  # the board is in the pixels only
        assert list(episode.get_extra_model_outputs(NUM_IMAGES)) == [1] * len(episode)
        assert all(sum(t == image_token for t in p) == 9 for p in episode.get_extra_model_outputs(PROMPT))
    batch, steps, module = learner_batch(algo, episodes)
    assert batch[IMAGES].dtype == torch.uint8 and batch[IMAGES].shape[1:] == (84, 84, 3)
    assert (batch[IMAGE_SIZES] == 84).all()
    np.testing.assert_array_equal(batch[IMAGES][0].numpy(), episodes[0].get_observations(0)["image"])

    # (a) The unchanged policy: the Learner's recomputed log-probs are the EnvRunner's.
    logp = masked_logp(module, batch)
    torch.testing.assert_close(logp, batch["action_logp"] * batch["response_mask"], rtol=1e-4, atol=1e-4)
    # ... also for a shorter (right-padded) response among full ones: mrope positions follow the mask.
    steps[RESPONSE][0], steps[ACTION_LOGP][0] = steps[RESPONSE][0][:2], steps[ACTION_LOGP][0][:2]
    cut = {k: torch.as_tensor(v) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}
    torch.testing.assert_close(masked_logp(module, cut), cut["action_logp"] * cut["response_mask"], rtol=1e-4, atol=1e-4)

    # (b) The image reaches the model: another board for row 0 changes row 0's log-probs only.
    other = dict(batch, **{IMAGES: batch[IMAGES].clone()})
    other[IMAGES][0] = torch.as_tensor(np.random.default_rng(0).integers(0, 256, (84, 84, 3), dtype=np.uint8))
    changed = masked_logp(module, other)
    assert not torch.allclose(changed[0], logp[0], atol=1e-4)
    torch.testing.assert_close(changed[1:], logp[1:], rtol=1e-4, atol=1e-4)


def test_one_iteration_trains_the_vl_policy_and_syncs_it_to_the_env_runner(algo):
    make_groups_informative(algo)
    before = learner_weights(algo)
    algo.train()
    after = learner_weights(algo)
    moved = {k for k in before if not np.allclose(before[k], after[k])}
    assert any("visual" in k for k in moved) and any("language_model" in k for k in moved), sorted(moved)[:5]
    runner = algo.env_runner.module.get_state()
    for key in moved:
        np.testing.assert_allclose(runner[key], after[key], rtol=1e-6)
