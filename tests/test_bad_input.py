"""Bad configs and bad model paths get ONE clear error naming the problem, before Ray starts (hypothesis
throws wrong types and values at every field LLMConfig adds, a few at a time)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rllib_llm.core.models import load_causal_lm, load_tokenizer
from rllib_llm.run.cli import main, one_line
from tests.conftest import tiny_config

NAN_INF = st.sampled_from([math.nan, math.inf, -math.inf])
JUNK = st.one_of(
    st.text(max_size=4),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)
BOOLS = st.booleans()


def below(bound: float, open_: bool = False) -> st.SearchStrategy:
    """Numbers below ``bound`` (``bound`` itself too unless ``open_``), ints and floats."""
    floats = st.floats(max_value=bound, exclude_max=open_, allow_nan=False, allow_infinity=False)
    return st.one_of(floats, st.integers(max_value=int(math.ceil(bound)) - (1 if open_ or bound != int(bound) else 0)))


def above(bound: float, closed: bool = False) -> st.SearchStrategy:
    """Numbers above ``bound`` (``bound`` itself too with ``closed``), ints and floats."""
    return st.one_of(
        st.floats(min_value=bound, exclude_min=not closed, allow_nan=False, allow_infinity=False),
        st.integers(min_value=int(math.ceil(bound)) if closed else int(math.floor(bound)) + 1),
    )


POSITIVE_INT = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), JUNK, BOOLS)
NON_NEGATIVE = st.one_of(below(0, open_=True), NAN_INF, JUNK, BOOLS)
UNIT = st.one_of(below(0, open_=True), above(1), NAN_INF, JUNK, BOOLS)
POSITIVE_OR_NONE = st.one_of(below(0), NAN_INF, st.text(max_size=3), BOOLS)
WORD = st.one_of(st.text(max_size=5).map(lambda t: f"no-{t}"), st.integers(), st.none())
FLAG = st.one_of(st.integers(), st.text(max_size=3), st.none())

#: field -> (invalid values, a word the error message must contain)
BAD: dict[str, tuple[st.SearchStrategy, str]] = {
    **{
        name: (POSITIVE_INT, name) for name in ("group_size", "num_groups", "max_episode_steps", "evaluation_num_seeds")
    },
    "max_sampling_rounds": (POSITIVE_INT, "max_sampling_rounds"),
    **{
        name: (NON_NEGATIVE, name)
        for name in (
            "step_advantage_weight",
            "kl_coeff",
            "kl_reward_coeff",
            "entropy_coeff",
            "vf_loss_coeff",
            "invalid_action_penalty",
            "overlong_penalty_factor",
            "weight_decay",
        )
    },
    "gamma": (UNIT, "gamma"),
    "lambda_": (UNIT, "lambda_"),
    "similarity_threshold": (st.one_of(below(0), above(1), NAN_INF, JUNK), "similarity_threshold"),
    "env_step_timeout_s": (POSITIVE_OR_NONE, "env_step_timeout_s"),
    "vf_clip_param": (POSITIVE_OR_NONE, "vf_clip_param"),
    "grad_clip": (POSITIVE_OR_NONE, "grad_clip"),
    "clip_ratio_c": (st.one_of(below(1), NAN_INF, st.text(max_size=3), BOOLS), "clip_ratio_c"),
    "clip_ratio_low": (st.one_of(below(0), above(10, closed=True), NAN_INF, JUNK, BOOLS), "clip_ratio_low"),
    "clip_ratio_high": (st.one_of(below(0), above(10, closed=True), NAN_INF, JUNK, BOOLS), "clip_ratio_high"),
    "lr": (st.one_of(below(0), NAN_INF, st.text(max_size=3), st.none(), BOOLS), "lr"),
    "evaluation_seed_offset": (
        st.one_of(st.integers(max_value=-1), st.floats(), JUNK, BOOLS),
        "evaluation_seed_offset",
    ),
    "overlong_buffer_len": (st.one_of(st.integers(max_value=-1), st.floats(), JUNK, BOOLS), "overlong_buffer_len"),
    **{
        name: (WORD, name)
        for name in (
            "advantage_estimator",
            "advantage_norm",
            "step_grouping",
            "policy_loss",
            "loss_agg_mode",
            "kl_estimator",
            "kl_reward_estimator",
            "generation_backend",
        )
    },
    **{
        name: (FLAG, name)
        for name in ("group_stats_over_steps", "value_head_detach", "dynamic_sampling", "gradient_checkpointing")
    },
    "generation_backend_options": (
        st.one_of(st.text(max_size=3), st.integers(), st.lists(st.integers(), max_size=2)),
        "generation_backend_options",
    ),
    "prompt_template": (st.one_of(st.integers(), st.lists(st.text(max_size=2), max_size=2), BOOLS), "prompt_template"),
    "few_shot": (
        st.one_of(
            st.text(max_size=3),
            st.integers(),
            st.lists(st.text(max_size=2), min_size=1, max_size=2),
            st.lists(st.tuples(st.integers(), st.text(max_size=2)), min_size=1, max_size=2),
        ),
        "few_shot",
    ),
    "sampling": (
        st.one_of(st.text(max_size=3), st.integers(), st.none(), st.lists(st.integers(), max_size=2)),
        "sampling",
    ),
    "llm_model": (
        st.one_of(
            st.integers(),
            st.none(),
            st.lists(st.integers(), max_size=2),
            st.fixed_dictionaries({"dtype": st.text(max_size=4)}),
            st.fixed_dictionaries({"name_or_path": st.integers()}),
            st.just("./no/such/model"),
            st.fixed_dictionaries({"no_such_field": st.integers()}),
        ),
        "model",
    ),
}
SAMPLING_BAD = {
    "temperature": st.one_of(below(0), st.text(max_size=3), st.none()),
    "top_p": st.one_of(below(0), above(1), st.text(max_size=3), st.none()),
    "max_new_tokens": st.one_of(st.integers(max_value=0), st.floats(), st.text(max_size=3), st.none()),
    "stop": st.one_of(st.integers(), st.none(), st.lists(st.integers(), min_size=1, max_size=2)),
    "greedy": st.one_of(st.integers(), st.text(max_size=3), st.none()),
    "seed": st.one_of(st.floats(), st.text(max_size=3)),
}

pytestmark = pytest.mark.filterwarnings("ignore")


@settings(max_examples=100, deadline=None)
@given(data=st.data(), fields=st.lists(st.sampled_from(sorted(BAD)), min_size=1, max_size=3, unique=True))
def test_malformed_config_fields_each_get_named_in_one_error(data, fields):
    config = tiny_config()
    for name in fields:
        setattr(config, name, data.draw(BAD[name][0], label=name))
    with pytest.raises(ValueError) as error:
        config.validate()
    line = one_line(str(error.value))
    assert "\n" not in line
    for name in fields:
        assert BAD[name][1] in line, (name, line)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), key=st.sampled_from(sorted(SAMPLING_BAD)))
def test_malformed_sampling_values_name_the_key(data, key):
    config = tiny_config()
    config.sampling = {**config.sampling, key: data.draw(SAMPLING_BAD[key], label=key)}
    with pytest.raises(ValueError, match=key):
        config.validate()


def test_a_valid_config_still_validates():
    tiny_config().group_rollouts(env_step_timeout_s=2.5).validate()


@pytest.mark.parametrize("loader", [load_causal_lm, load_tokenizer])
def test_missing_or_broken_model_paths_are_named(loader, tmp_path):
    with pytest.raises(FileNotFoundError, match="no/such/model"):
        loader("./no/such/model")
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(FileNotFoundError, match="broken-model"):
        loader(str(broken))
    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty-model"):
        loader(str(empty))


def test_cli_train_with_a_missing_model_path_exits_2_with_one_line_before_ray(tmp_path, capsys, monkeypatch):
    def no_ray() -> None:
        raise AssertionError("Ray started before the config was checked")

    monkeypatch.setattr("rllib_llm.run.cli.init_ray", no_ray)
    example = tmp_path / "example.py"
    example.write_text("from tests.conftest import tiny_config\nconfig = tiny_config().llm(model='./no/such/model')\n")
    assert main(["train", str(example), "--output", str(tmp_path / "run"), "--no-tracking"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "./no/such/model" in err and "Traceback" not in err
