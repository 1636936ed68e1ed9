"""Declared settings: one declaration gives a field's default, builder argument, signature, check and docs."""

import inspect
from pathlib import Path

import pytest

from rllib_llm.algorithms import ALGORITHMS, GiGPOConfig, GRPOConfig, PPOConfig
from rllib_llm.algorithms import settings as S
from rllib_llm.algorithms.config import LLMConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scratch_registry(monkeypatch):
    """A registry of this test's own, so declaring test settings leaves the package's untouched."""
    monkeypatch.setattr(S, "_SETTINGS", {})
    monkeypatch.setattr(S, "_RULES", [])
    monkeypatch.setattr(S, "_BUILDERS", {})


def test_checks_say_what_the_field_takes():
    assert S.number(0, 1)("gamma", 1.5) == "gamma must be in [0, 1] (a number), got 1.5"
    assert S.number(1, optional=True, integer=True)("micro_batch_size", None) is None
    assert S.number(1, optional=True, integer=True)("micro_batch_size", 2.0) == (
        "micro_batch_size must be >= 1 (an int or None), got 2.0")
    assert S.number(0, low_open=True)("lr", True) == "lr must be > 0 (a number), got True"
    assert S.number(0)("x", float("nan")).startswith("x must be >= 0")
    assert S.choice(("a", "b"))("mode", "c") == "mode must be one of ('a', 'b'), got 'c'"
    assert S.choice(lambda: {"z": 1, "y": 2})("est", "y") is None
    assert S.flag()("f", 1) == "f must be True or False, got 1"
    assert S.flag(optional=True)("f", None) is None
    assert S.open_interval(0, 10)("clip", 10) == "clip must be in (0, 10), got 10"


def test_a_declaration_gives_the_default_the_argument_the_signature_and_the_check(scratch_registry):
    class Config:
        @S.settings_builder("training")
        def training(self, *, clip: float = 1.0, **settings):
            rest = S.take(self, "training", settings)
            assert not rest
            return self

    S.declare("owner_a", S.Setting("alpha", 0.5, "a weight", S.number(0)))
    # the signature follows declarations made after the method was defined (modules declare on import)
    S.declare("owner_b", S.Setting("beta", "x", "a mode", S.choice(("x", "y"))))
    assert list(inspect.signature(Config.training).parameters) == ["self", "clip", "alpha", "beta", "settings"]
    config = Config()
    S.set_defaults(config)
    assert (config.alpha, config.beta) == (0.5, "x")
    config.training(alpha=2.0, beta="z")
    assert S.setting_errors(config) == ["beta must be one of ('x', 'y'), got 'z'"]
    S.declare_rule("owner_b", lambda c: ["alpha and beta disagree"] if c.alpha > 1 and c.beta == "z" else [])
    assert S.setting_errors(config)[-1] == "alpha and beta disagree"
    assert [s.owner for s in S.declared()] == ["owner_a", "owner_b"]


def test_a_name_declared_by_two_owners_is_refused(scratch_registry):
    S.declare("owner_a", S.Setting("alpha", 0.5, "a weight"))
    S.declare("owner_a", S.Setting("alpha", 0.7, "redeclared by its owner (a reload)"))
    with pytest.raises(ValueError, match="'alpha' is declared by owner_a already"):
        S.declare("owner_b", S.Setting("alpha", 0.1, "a clash"))


def test_each_algorithm_module_declares_the_settings_it_reads():
    owners = {s.name: s.owner for s in S.declared()}
    assert owners["step_grouping"] == owners["similarity_threshold"] == "rllib_llm.algorithms.gigpo"
    assert owners["lambda_"] == owners["vf_clip_param"] == "rllib_llm.algorithms.ppo"
    assert owners["dynamic_sampling"] == "rllib_llm.algorithms.dynamic_sampling"
    assert owners["overlong_buffer_len"] == "rllib_llm.algorithms.dapo"
    assert owners["row_returns"] == owners["kl_reward_coeff"] == "rllib_llm.algorithms.reinforce_pp"
    assert owners["max_staleness"] == "rllib_llm.algorithms.async_rollouts"
    assert owners["group_size"] == owners["held_out_interval"] == "rllib_llm.algorithms.config"


def test_every_config_takes_every_declared_setting_through_its_builder():
    # an estimator is switched on any config, so its settings are there too
    config = GRPOConfig().training(advantage_estimator="gigpo", step_grouping="similarity", lambda_=0.9)
    assert (config.step_grouping, config.lambda_) == ("similarity", 0.9)
    for setting in S.declared():
        assert setting.name in inspect.signature(getattr(LLMConfig, setting.builder)).parameters
        for cls in ALGORITHMS.values():
            assert hasattr(cls(), setting.name)


def test_an_algorithm_keeps_its_own_defaults():
    assert PPOConfig().advantage_estimator == "gae" and GiGPOConfig().advantage_estimator == "gigpo"
    assert ALGORITHMS["dapo"]().clip_ratio_high == 0.28
    assert ALGORITHMS["reinforce_pp"]().kl_reward_coeff == 0.001


def test_an_unknown_builder_argument_is_pythons_error_with_the_closest_names():
    with pytest.raises(TypeError, match=r"GiGPOConfig.training\(\) got an unexpected keyword argument "
                                        r"'step_grupping' \(did you mean step_grouping"):
        GiGPOConfig().training(step_grupping="exact")
    with pytest.raises(TypeError, match=r"group_rollouts\(\) got an unexpected keyword argument 'group_sizes'"):
        GiGPOConfig().group_rollouts(group_sizes=4)
    # RLlib's own training arguments still pass through
    assert GiGPOConfig().training(lr=3e-5, num_epochs=2).num_epochs == 2


def test_notes_settings_md_is_the_settings_commands_output():
    """notes/settings.md ends with ``rllib-llm settings``' table; a declaration changed without it fails here."""
    text = (ROOT / "notes" / "settings.md").read_text()
    assert text.rstrip().endswith(S.settings_table())


def test_the_settings_command_shows_an_algorithms_defaults(capsys):
    from rllib_llm.run.cli import main

    assert main(["settings", "--algorithm", "ppo", "--builder", "training"]) == 0
    out = capsys.readouterr().out
    assert "| `advantage_estimator` | `.training()` | `'gae'` |" in out and "group_size" not in out
    assert main(["settings", "--algorithm", "nope"]) == 2


def test_forgetting_an_owner_removes_its_settings_rules_and_arguments(scratch_registry):
    class Config:
        @S.settings_builder("training")
        def training(self, **settings):
            return self

    S.declare("plugin", S.Setting("gamma2", 0.5, "a weight", S.number(0, 1)))
    S.declare_rule("plugin", lambda c: ["always"])
    assert "gamma2" in inspect.signature(Config.training).parameters
    S.forget("plugin")
    assert "gamma2" not in inspect.signature(Config.training).parameters
    assert S.declared() == [] and S.setting_errors(object()) == []
