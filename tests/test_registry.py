"""The one registry kind behind envs, estimators, policy losses, generation backends and prompt templates."""

import pytest

from rllib_llm.registry import Registry


def test_a_registry_looks_up_imports_lazily_and_names_the_closest_entry():
    registry = Registry("widget", {"json": "json:dumps"})
    assert registry.register("plain", len) is len
    assert registry.lookup("plain") is len
    import json

    assert registry.lookup("json") is json.dumps and registry["json"] is json.dumps  # imported once, then kept
    with pytest.raises(ValueError, match=r"^unknown widget 'jsn' \(did you mean 'json'\?\); registered: json, plain$"):
        registry.lookup("jsn")
    with pytest.raises(ValueError, match="needs a non-empty string name"):
        registry.register("", len)
    assert registry == {"json": json.dumps, "plain": len}  # a dict to every reader


def test_every_plug_in_point_is_a_registry():
    from rllib_llm.algorithms.learner_connectors import ADVANTAGE_ESTIMATORS
    from rllib_llm.algorithms.losses import POLICY_LOSSES
    from rllib_llm.env_connectors.templates import TEMPLATES
    from rllib_llm.envs.multi_agent.pettingzoo_adapter import _ENVS
    from rllib_llm.envs.registry import _ALIASES
    from rllib_llm.generation import BACKENDS

    kinds = [r.kind for r in (ADVANTAGE_ESTIMATORS, POLICY_LOSSES, TEMPLATES, _ENVS, _ALIASES, BACKENDS)]
    assert kinds == ["advantage estimator", "policy loss", "prompt template", "multi-agent env", "env",
                     "generation backend"]


def test_a_registered_backend_is_built_by_name_and_accepted_by_the_config(monkeypatch):
    from rllib_llm.algorithms import GiGPOConfig
    from rllib_llm.generation import BACKENDS, make_backend, register_backend

    class EchoBackend:
        def __init__(self, *, model, tokenizer, **options):
            self.model, self.options = model, options

    monkeypatch.setitem(BACKENDS, "echo", None)
    register_backend("echo", EchoBackend)
    backend = make_backend("echo", model="m", tokenizer=None, depth=2)
    assert isinstance(backend, EchoBackend) and backend.options == {"depth": 2}
    GiGPOConfig().environment("NumberLine").llm(model="tiny-random-llama").generation(backend="echo").validate()
    with pytest.raises(ValueError, match=r"unknown generation backend 'ech' \(did you mean 'echo'\?\)"):
        make_backend("ech", model="m", tokenizer=None)
