"""Config validation: bad values name the field and the allowed values."""

import pytest

from rllib_llm.algorithms import GiGPOConfig, GRPOConfig
from rllib_llm.core.models import ModelSpec
from tests.conftest import tiny_config


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.training(advantage_estimator="nope"), "advantage_estimator must be one of"),
        (lambda c: c.training(advantage_norm="zscore"), "advantage_norm must be one of"),
        (lambda c: c.training(loss_agg_mode="sum"), "loss_agg_mode must be one of"),
        (lambda c: c.training(kl_estimator="k9"), "kl_estimator must be one of"),
        (lambda c: c.training(clip_param=0.0), "clip_ratio_low must be in"),
        (lambda c: c.group_rollouts(group_size=0), "group_size must be an int >= 1"),
        (lambda c: c.generation(backend="tgi"), "generation_backend must be one of"),
        (lambda c: c.training(kl_coeff=-1.0), "kl_coeff must be >= 0"),
        (lambda c: c.group_rollouts(response_prefix=None), "response_prefix must be a string"),
        (lambda c: c.llm(dtype="bfloat16"), "dtype 'bfloat16' would train the weights themselves in half precision"),
        (lambda c: c.training(shared_prefix_forward="yes"), "shared_prefix_forward must be True, False or None"),
    ],
)
def test_invalid_fields_are_reported_by_name(change, message):
    config = change(tiny_config())
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_sampling_and_model_fields_are_checked_where_set():
    with pytest.raises(ValueError, match="Unknown sampling field"):
        GiGPOConfig().generation(temprature=0.5)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        GiGPOConfig().generation(temperature=0.0)
    with pytest.raises(ValueError, match="Unknown model field"):
        ModelSpec.from_any({"name": "x"})
    with pytest.raises(ValueError, match="dtype must be one of"):
        GiGPOConfig().llm(dtype="int3")


def test_missing_env_is_reported():
    with pytest.raises(ValueError, match="env: set an environment"):
        GRPOConfig().llm(model="tiny-random-llama").validate()


def test_algorithm_defaults():
    assert GiGPOConfig().advantage_estimator == "gigpo"
    assert GRPOConfig().advantage_estimator == "grpo"


def test_rollouts_like_copies_the_task_and_keeps_the_algorithms_training_settings():
    from rllib_llm.algorithms import DAPOConfig

    task = (
        tiny_config()
        .environment("NumberLine", env_config={"max_position": 3})
        .group_rollouts(group_size=3, few_shot=[("Target 1, position 2.", "<action>-</action>")])
        .generation(temperature=0.7)
        .training(lr=5e-4, advantage_norm="mean")
    )
    dapo = DAPOConfig().rollouts_like(task)
    assert dapo.env == "NumberLine" and dapo.env_config == task.env_config and dapo.group_size == 3
    assert task.env_config["max_position"] == 3
    assert dapo.llm_model == task.llm_model and dapo.sampling["temperature"] == 0.7 and dapo.seed == task.seed
    assert dapo.few_shot == task.few_shot and dapo._env_to_module_connector is task._env_to_module_connector
    assert dapo.dynamic_sampling and dapo.clip_ratio_high == DAPOConfig().clip_ratio_high  # DAPO's own
    assert dapo.lr != 5e-4 and dapo.advantage_norm == DAPOConfig().advantage_norm
    dapo.env_config["max_position"] = 4
    assert task.env_config["max_position"] == 3  # copies, not shared
    with pytest.raises(TypeError, match="needs an LLMConfig"):
        DAPOConfig().rollouts_like(object())


def test_naming_another_env_starts_its_env_config_afresh_and_the_same_env_merges():
    config = tiny_config()  # NumberLine with {"max_position": 3, "max_steps": 3}
    same = config.copy(copy_frozen=False).environment("NumberLine", env_config={"max_steps": 5})
    assert same.env_config == {"max_position": 3, "max_steps": 5}  # RLlib's merge, for the same env
    moved = config.copy(copy_frozen=False).environment("Sokoban", env_config={"dim_room": [6, 6]})
    assert moved.env_config == {"dim_room": [6, 6]}  # not NumberLine's keys, which Sokoban would refuse
    moved.validate()


def test_half_precision_weights_are_fine_with_lora_adapters():
    config = tiny_config().llm(dtype="bfloat16", lora={"r": 4, "lora_alpha": 8})
    config.validate()
