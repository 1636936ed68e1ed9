"""``MultiAgentLLMConfig``: LLMConfig for PettingZoo envs, used through RLlib's multi-agent API.

Agents map to modules with RLlib's own settings; each module is an :class:`~rllib_llm.core.rl_module.LLMRLModule`::

    config = (
        MultiAgentGRPOConfig()
        .environment("Points24SolverVerifier")
        .llm(model="smollm2-135m-instruct")
        # one LLM for both roles (role prompts tell them apart):
        .multi_agent(policies={"shared"}, policy_mapping_fn=AgentToModule(default="shared"))
        # or two LLMs / two LoRA adapters, one per agent:
        .multi_agent(policies={"solver", "verifier"}, policy_mapping_fn=AgentToModule())
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
            "solver": llm_module_spec(lora={"r": 8}), "verifier": llm_module_spec(lora={"r": 8})}))
        .agents(agent_prompts={"solver": "...{current_observation}..."}, advantage_grouping="agent")
    )

A module spec without a ``model`` uses ``.llm(model=...)`` (so a test can swap the base model in one
place); the sampling temperature, reference-model and critic flags always come from this config, so the
Learner's log-probs match what the generator sampled. Memory: every module holds its own copy of its base
model, also when two LoRA modules share one base (see notes/multi_agent.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rllib_llm.algorithms.config import LLMConfig, _set
from rllib_llm.algorithms.learner_connectors import ADVANTAGE_ESTIMATORS, estimator_needs
from rllib_llm.core.models import ModelSpec
from rllib_llm.envs.multi_agent.pettingzoo_adapter import multi_agent_env_name_errors
from rllib_llm.envs.registry import registered_envs
from rllib_llm.multi_agent.learner_connectors import ADVANTAGE_GROUPINGS, FlattenAgentSteps

#: model_config key of :func:`llm_module_spec`: ModelSpec fields that override the config's ``.llm()`` model.
MODEL_OVERRIDES = "model_overrides"


def llm_module_spec(model: str | dict | ModelSpec | None = None, **model_fields: Any) -> RLModuleSpec:
    """An LLMRLModule spec for ``rl_module_specs``: ``model`` (default: the config's ``.llm()`` model) with
    ModelSpec fields overridden, e.g. ``llm_module_spec(lora={"r": 8})`` or ``llm_module_spec("other/model")``."""
    from rllib_llm.core.rl_module import LLMRLModule

    unknown = set(model_fields) - set(ModelSpec.__dataclass_fields__)
    if unknown:
        raise ValueError(f"Unknown model field(s) {sorted(unknown)}; allowed: {sorted(ModelSpec.__dataclass_fields__)}")
    model_config: dict[str, Any] = {MODEL_OVERRIDES: model_fields}
    if model is not None:
        model_config["model"] = ModelSpec.from_any(model).to_dict()
    return RLModuleSpec(module_class=LLMRLModule, model_config=model_config)


class AgentToModule:
    """A picklable ``policy_mapping_fn``: ``mapping[agent_id]``, else ``default``, else the agent id itself
    (one module per agent). A plain class, so checkpoints restore it in a fresh process."""

    def __init__(self, mapping: dict[str, str] | None = None, default: str | None = None) -> None:
        self.mapping = dict(mapping or {})
        self.default = default

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        return self.mapping.get(agent_id, self.default if self.default is not None else agent_id)

    def __repr__(self) -> str:
        return f"AgentToModule({self.mapping!r}, default={self.default!r})"


class MultiAgentLLMConfig(LLMConfig):
    """LLMConfig for multi-agent PettingZoo envs (see module docstring); adds :meth:`agents`."""

    def __init__(self, algo_class=None) -> None:
        from rllib_llm.core.multi_agent_env_runner import LLMMultiAgentEnvRunner
        from rllib_llm.multi_agent.algorithm import LLMMultiAgentAlgorithm

        super().__init__(algo_class=algo_class or LLMMultiAgentAlgorithm)
        self.env_runner_cls = LLMMultiAgentEnvRunner
        #: agent id -> prompt template (name, format string or PromptTemplate), over the env's own.
        self.agent_prompts: dict[str, Any] = {}
        #: agent id -> env-to-module factory ``(env, spaces, device) -> [connectors]``; other agents use
        #: ``env_runners(env_to_module_connector=...)`` (each agent still gets its own pipeline instance).
        self.agent_env_to_module: dict[str, Callable] = {}
        #: "agent": normalize advantages within (group, agent) (Dr. MAS); "group": pool a group's agents.
        self.advantage_grouping = "agent"

    def agents(
        self,
        *,
        agent_prompts: dict[str, Any] = NotProvided,
        agent_env_to_module: dict[str, Callable] = NotProvided,
        advantage_grouping: str = NotProvided,
    ) -> MultiAgentLLMConfig:
        """Per-agent prompts and env-to-module pipelines, and how advantages are grouped."""
        _set(
            self,
            agent_prompts=agent_prompts,
            agent_env_to_module=agent_env_to_module,
            advantage_grouping=advantage_grouping,
        )
        return self

    def env_name_errors(self) -> list[str]:
        return multi_agent_env_name_errors(self.env, sorted(registered_envs()))

    def validate(self) -> None:
        super().validate()
        errors = []
        if self.advantage_grouping not in ADVANTAGE_GROUPINGS:
            errors.append(f"advantage_grouping must be one of {ADVANTAGE_GROUPINGS}, got {self.advantage_grouping!r}")
        needs = estimator_needs(self) if self.advantage_estimator in ADVANTAGE_ESTIMATORS else ()
        if needs:
            errors.append(
                f"advantage_estimator {self.advantage_estimator!r} with these settings needs {needs} from the model "
                "in the learner connector, which multi-agent training does not compute; use grpo, gigpo or rloo"
            )
        if not isinstance(self.agent_prompts, dict) or not isinstance(self.agent_env_to_module, dict):
            errors.append("agent_prompts and agent_env_to_module must be dicts keyed by agent id")
        if errors:
            raise ValueError("Invalid rllib-llm multi-agent config:\n  - " + "\n  - ".join(errors))

    # --- RLlib hooks ---------------------------------------------------------------------------------

    def get_multi_rl_module_spec(self, **kwargs: Any) -> MultiRLModuleSpec:
        """RLlib's spec, with every LLMRLModule's model and sampling-coupled settings completed from here."""
        from rllib_llm.core.rl_module import LLMRLModule

        spec = super().get_multi_rl_module_spec(**kwargs)
        for module_spec in spec.rl_module_specs.values():
            if isinstance(module_spec.module_class, type) and issubclass(module_spec.module_class, LLMRLModule):
                module_spec.model_config = self.llm_model_config(module_spec.model_config)
        return spec

    def llm_model_config(self, model_config: dict | None) -> dict[str, Any]:
        """The model_config of one LLMRLModule: its own model (default ``.llm()``'s) and overrides, and this
        config's temperature / reference / critic flags."""
        own = dict(model_config or {})
        overrides = own.pop(MODEL_OVERRIDES, None) or {}
        model = ModelSpec.from_any(own.pop("model", None) or self.llm_model).to_dict()
        return {**own, **self.get_default_rl_module_spec().model_config, "model": {**model, **overrides}}

    def episodes_to_step_columns(self) -> FlattenAgentSteps:
        """Agent episodes -> each module's step columns (grouped by ``advantage_grouping``)."""
        return FlattenAgentSteps(grouping=self.advantage_grouping)


class MultiAgentGRPOConfig(MultiAgentLLMConfig):
    def __init__(self, algo_class=None) -> None:
        from rllib_llm.multi_agent.algorithm import MultiAgentGRPO

        super().__init__(algo_class=algo_class or MultiAgentGRPO)
        self.advantage_estimator = "grpo"


class MultiAgentGiGPOConfig(MultiAgentLLMConfig):
    def __init__(self, algo_class=None) -> None:
        from rllib_llm.multi_agent.algorithm import MultiAgentGiGPO

        super().__init__(algo_class=algo_class or MultiAgentGiGPO)
        self.advantage_estimator = "gigpo"
