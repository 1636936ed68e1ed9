"""``LLMConfig``: the AlgorithmConfig of every rllib-llm algorithm.

It sets RLlib up for LLM agents (our EnvRunner, RLModule, Learner and connector pipelines) and adds
three groups of settings, each with a builder method in RLlib's style::

    config = (
        GiGPOConfig()
        .environment("NumberLine", env_config={"max_steps": 6})
        .llm(model="smollm2-135m-instruct", lora={"r": 16})
        .generation(temperature=1.0, max_new_tokens=24)
        .group_rollouts(group_size=8, num_groups=4, max_episode_steps=6)
        .training(lr=1e-5, gamma=0.95, step_advantage_weight=1.0)
    )
    algo = config.build_algo()
"""

from __future__ import annotations

import inspect
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import LearnerConnectorPipeline, NumpyToTensor
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.util.debug import log_once

from rllib_llm.algorithms.advantages import NORM_MODES
from rllib_llm.algorithms.learner_connectors import (
    ADVANTAGE_ESTIMATORS,
    NEED_REF_LOGP,
    NEED_VALUES,
    ComputeAdvantages,
    FlattenSteps,
    ProximalLogProbs,
    ReferenceLogProbs,
    StepsToTokenBatch,
    estimator_needs,
    shaping_connectors,
)
from rllib_llm.algorithms.losses import KL_ESTIMATORS, LOSS_AGG_MODES, POLICY_LOSSES
from rllib_llm.algorithms.settings import (
    Setting,
    choice,
    declare,
    declare_rule,
    declared,
    flag,
    number,
    open_interval,
    set_defaults,
    setting_errors,
    settings_builder,
    take,
    unknown_argument_error,
)
from rllib_llm.core.models import ModelSpec, check_model_location
from rllib_llm.env_connectors import default_env_to_module, default_module_to_env
from rllib_llm.envs.base import HELD_OUT_SEED_OFFSET
from rllib_llm.envs.registry import env_config_errors, env_name_errors
from rllib_llm.generation import BACKENDS, SamplingParams

#: invalid_action_penalty_mode values.
PENALTY_MODES = ("reward", "row")
#: The sampling dict's value types: (isinstance types, what the error message asks for).
_SAMPLING_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "temperature": ((int, float), "a number > 0"),
    "top_p": ((int, float), "a number in (0, 1]"),
    "max_new_tokens": ((int,), "an int >= 1"),
    "stop": ((list, str), "a list of strings"),
    "greedy": ((bool,), "True or False"),
    "seed": ((int, type(None)), "an int or None"),
    "ignore_eos": ((bool,), "True or False"),
}


def _positive_int(name: str, value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else f"{name} must be an int >= 1, got {value!r}"


def _text(optional: bool, what: str):
    def check(name: str, value: Any) -> str | None:
        ok = isinstance(value, str) or (optional and value is None)
        return None if ok else f"{name} must be {what}, got {value!r}"

    return check


def _few_shot(name: str, value: Any) -> str | None:
    ok = value is None or (isinstance(value, (list, tuple)) and all(
        isinstance(shot, (list, tuple)) and len(shot) == 2 and all(isinstance(x, str) for x in shot) for shot in value))
    return None if ok else f"{name} must be a list of (observation, response) string pairs or None, got {value!r}"


declare(
    __name__,
    # .group_rollouts(): the task and how it is rolled out.
    Setting("group_size", 4, "Envs per group; a group's envs reset to the same state (group-relative "
            "advantages compare them).", _positive_int, "group_rollouts"),
    Setting("num_groups", 2, "Groups per iteration (and EnvRunner).", _positive_int, "group_rollouts"),
    Setting("max_episode_steps", 10, "Turns after which an episode is truncated.", _positive_int, "group_rollouts"),
    Setting("invalid_action_penalty", 0.1, "Subtracted from the reward of a step whose reply held no valid "
            "action.", number(0), "group_rollouts"),
    Setting("invalid_action_penalty_mode", "reward", "Where the invalid-action penalty goes (both in the Learner "
            "connector; episodes keep the env's rewards): 'reward' (a step reward term: in the episode return and "
            "the discounted returns of earlier steps) or 'row' (verl-agent's: subtracted from the invalid step's own "
            "score row after the returns; needs group_stats_over_steps=True and grpo, gigpo or rloo).",
            choice(PENALTY_MODES), "group_rollouts"),
    Setting("prompt_template", None, "A registered template name or a str.format template (None: the env's "
            "own).", _text(True, "a string or None"), "group_rollouts"),
    Setting("few_shot", None, "(observation, response) example pairs put before each prompt.", _few_shot,
            "group_rollouts"),
    Setting("response_prefix", "", "Text the assistant turn starts with (prefilled in the prompt, not "
            "generated), e.g. '<action>': the reply is parsed as prefix + generated text. Small models then rarely "
            "miss the action format.", _text(False, "a string ('' for none)"), "group_rollouts"),
    Setting("env_step_timeout_s", None, "Seconds an env reset/step may take before the runner abandons the env, "
            "builds a fresh one and truncates the episode (None: no limit; an env that hangs then hangs the "
            "rollout).", number(0, optional=True, low_open=True), "group_rollouts"),
    # .training(): what every estimator and loss shares.
    Setting("advantage_estimator", "gigpo", "The advantage estimator (grpo, gigpo, rloo, reinforce_pp, gae, or one "
            "registered with register_estimator).", choice(lambda: ADVANTAGE_ESTIMATORS)),
    Setting("advantage_norm", "std", "How group advantages are normalised: 'std' (subtract the mean, divide by "
            "the std), 'mean' (subtract only; Dr. GRPO), 'none'.", choice(NORM_MODES)),
    Setting("group_stats_over_steps", False, "Group mean/std over step rows (long episodes weigh more), "
            "verl-agent's default; False: per episode.", flag()),
    Setting("policy_loss", "ppo", "'ppo' (clipped token ratios) or 'gspo' (clipped sequence ratios).",
            choice(lambda: POLICY_LOSSES)),
    Setting("clip_ratio_low", 0.2, "Lower clip of the ratio (clip_param sets both).", open_interval(0, 10)),
    Setting("clip_ratio_high", 0.2, "Upper clip of the ratio; above clip_ratio_low is DAPO's clip-higher.",
            open_interval(0, 10)),
    Setting("clip_ratio_c", 3.0, "Dual-clip bound for negative advantages (verl's default 3.0); None switches it "
            "off.", number(1, optional=True, low_open=True)),
    Setting("loss_agg_mode", "token-mean", "How token losses become one number (verl's loss_agg_mode).",
            choice(LOSS_AGG_MODES)),
    Setting("kl_coeff", 0.0, "Weight of the KL-to-reference loss term (a frozen reference is kept when > 0).",
            number(0)),
    Setting("kl_estimator", "low_var_kl", "Estimator of that KL term.", choice(KL_ESTIMATORS)),
    Setting("entropy_coeff", 0.0, "Weight of the entropy bonus (the starting coefficient under "
            "entropy_target).", number(0)),
    Setting("entropy_target", None, "Adaptive entropy control (Skywork-OR1): a target entropy (nats per response "
            "token) below which an entropy bonus switches on, its coefficient rising by entropy_coeff_step per "
            "optimizer step while the entropy stays below the target and falling back (to 0) above it. None: the "
            "fixed entropy_coeff.", number(0, optional=True, low_open=True)),
    Setting("entropy_coeff_step", 0.005, "The adaptive entropy coefficient's step.", number(0)),
    Setting("weight_decay", 0.0, "AdamW weight decay.", number(0)),
    Setting("micro_batch_size", None, "Rows per forward/backward pass of the Learner (None: the whole minibatch "
            "at once). A minibatch's micro-batches accumulate their gradients into one optimizer step, weighted so "
            "the step equals the whole minibatch's (verl's ppo_micro_batch_size_per_gpu, TRL's gradient "
            "accumulation).", number(1, optional=True, integer=True)),
    Setting("logprob_batch_size", None, "Rows per no-grad forward pass of the Learner connectors (reference and "
            "proximal log-probs, values): verl's log_prob_micro_batch_size_per_gpu. None: micro_batch_size, else "
            "the minibatch. Larger is faster where passes are launch-bound (small models on a GPU).",
            number(1, optional=True, integer=True)),
    Setting("shared_prefix_forward", None, "The Learner's forward runs the prompt prefix all rows of a pass share "
            "(system prompt, examples) once at batch 1 and broadcasts its KV cache: fewer FLOPs, two model calls "
            "instead of one. None: on a CPU (compute-bound) yes, on a GPU no (launch-bound at small models, "
            "benchmarks/results/learner_update_h200.md); True for a large model with a long shared prompt on a "
            "GPU.", flag(optional=True)),
    # .evaluation(): held-out seeds, offset far from training seeds.
    Setting("evaluation_num_seeds", 32, "Held-out seeds the before/after (and periodic) evaluation plays.",
            _positive_int, "evaluation"),
    Setting("evaluation_seed_offset", HELD_OUT_SEED_OFFSET, "The first held-out seed; envs with a finite task "
            "pool keep part of it for seeds from here on (HeldOutSplit).", number(0, integer=True), "evaluation"),
    Setting("held_out_interval", None, "Greedy success on the held-out seeds every N training iterations, in the "
            "results under held_out/ (what a Tune sweep selects on); None: only the CLI's before/after "
            "evaluation.", number(1, optional=True, integer=True), "evaluation"),
)


def _penalty_row_rule(config: Any) -> list[str]:
    if config.invalid_action_penalty_mode == "row" and not (
        config.group_stats_over_steps is True and config.advantage_estimator in ("grpo", "gigpo", "rloo")
    ):
        return ["invalid_action_penalty_mode='row' (verl-agent's) scores step rows: it needs "
                "group_stats_over_steps=True and advantage_estimator grpo, gigpo or rloo"]
    return []


def _fields_rllib_leaves_unchecked(config: Any) -> list[str]:
    """RLlib's fields and ours outside the declared builders, which nothing checks before they fail deep inside
    a Ray actor."""
    errors = [
        number(0, 1)("gamma", config.gamma),
        flag()("gradient_checkpointing", config.gradient_checkpointing),
        number(0, optional=True, low_open=True)("grad_clip", config.grad_clip),
    ]
    if not isinstance(config.lr, list):  # a list is an RLlib lr schedule, which RLlib checks
        errors.append(number(0, low_open=True)("lr", config.lr))
    if not isinstance(config.generation_backend_options, dict):
        errors.append(f"generation_backend_options must be a dict, got {config.generation_backend_options!r}")
    return [e for e in errors if e]


declare_rule(__name__, _penalty_row_rule)
declare_rule(__name__, _fields_rllib_leaves_unchecked)

#: The keyword arguments of RLlib's own ``AlgorithmConfig.training`` (what ``.training()`` passes on to it).
_RLLIB_TRAINING_ARGS = frozenset(inspect.signature(AlgorithmConfig.training).parameters) - {"self"}


def _set(config: AlgorithmConfig, **values: Any) -> None:
    for name, value in values.items():
        if value is not NotProvided:
            setattr(config, name, value)


class LLMConfig(AlgorithmConfig):
    """Base config of the LLM algorithms (see module docstring). ``algo_class`` picks the Algorithm."""

    def __init__(self, algo_class=None) -> None:
        from rllib_llm.algorithms.algorithm import LLMAlgorithm
        from rllib_llm.core.single_agent_env_runner import LLMEnvRunner

        super().__init__(algo_class=algo_class or LLMAlgorithm)
        # RLlib plumbing: our EnvRunner in-process by default (2-core machines), our connectors only.
        self.env_runner_cls = LLMEnvRunner
        self.num_env_runners = 0
        self.add_default_connectors_to_env_to_module_pipeline = False
        self.add_default_connectors_to_module_to_env_pipeline = False
        self.add_default_connectors_to_learner_pipeline = False
        self._env_to_module_connector = default_env_to_module
        self._module_to_env_connector = default_module_to_env
        self.restart_failed_sub_environments = True
        # RLlib checks every gradient tensor for nan/inf before stepping (two device syncs per tensor); with
        # True it steps without checking, and LLMLearner.apply_gradients checks all of them at once instead.
        self.torch_skip_nan_gradients = True
        # .llm()
        self.llm_model: dict[str, Any] = ModelSpec().to_dict()
        self.gradient_checkpointing = False
        # .generation()
        self.generation_backend = "hf"
        self.generation_backend_options: dict[str, Any] = {}
        self.sampling: dict[str, Any] = vars(SamplingParams()).copy()
        # RLlib's training fields, with the LLM algorithms' defaults.
        self.lr = 1e-5
        self.gamma = 0.95
        self.grad_clip = 1.0
        # Every declared setting (this module's, and those the algorithm modules declare).
        set_defaults(self)

    # --- builder methods -----------------------------------------------------------------------------

    #: What :meth:`rollouts_like` copies: the task and how it is rolled out, not how it is trained.
    ROLLOUT_FIELDS: tuple[str, ...] = (
        "env", "env_config", "_env_to_module_connector", "_module_to_env_connector", "llm_model", "gradient_checkpointing",
        "generation_backend", "generation_backend_options", "sampling", "group_size", "num_groups",
        "max_episode_steps", "invalid_action_penalty", "prompt_template", "few_shot", "response_prefix",
        "env_step_timeout_s", "evaluation_num_seeds", "evaluation_seed_offset", "held_out_interval", "seed",
    )

    def rollouts_like(self, other: LLMConfig) -> LLMConfig:
        """Take ``other``'s env, prompt/memory connectors, model, sampling, group rollouts, evaluation seeds
        and seed (copies), keeping this config's algorithm and training settings: how a tuned example runs
        another algorithm on a tuned task without repeating its setup."""
        import copy

        if not isinstance(other, LLMConfig):
            raise TypeError(f"rollouts_like needs an LLMConfig, got {type(other).__name__}")
        for name in self.ROLLOUT_FIELDS:
            setattr(self, name, copy.deepcopy(getattr(other, name)))
        return self

    def environment(self, env: Any = NotProvided, *, env_config: dict | None = NotProvided, **kwargs: Any) -> LLMConfig:
        """RLlib's, except that naming another env starts its ``env_config`` afresh. RLlib merges
        ``env_config`` into the previous one, so a config copied from another env's tuned example (the main
        job's NumberLine, say) would hand that env's keys to the new env, which refuses them."""
        if env is not NotProvided and env != self.env:
            self.env_config = {}
        return super().environment(env, env_config=env_config, **kwargs)

    def llm(
        self,
        *,
        model: str | dict | ModelSpec = NotProvided,
        lora: dict | None = NotProvided,
        dtype: str = NotProvided,
        gguf_file: str | None = NotProvided,
        gradient_checkpointing: bool = NotProvided,
    ) -> LLMConfig:
        """The policy LM: a model name/path (or ModelSpec dict), LoRA settings, dtype."""
        if model is not NotProvided:
            self.llm_model = ModelSpec.from_any(model).to_dict()
        for key, value in (("lora", lora), ("dtype", dtype), ("gguf_file", gguf_file)):
            if value is not NotProvided:
                self.llm_model[key] = value
        ModelSpec.from_any(self.llm_model)  # validates
        _set(self, gradient_checkpointing=gradient_checkpointing)
        return self

    def generation(
        self, *, backend: str = NotProvided, backend_options: dict = NotProvided, **sampling: Any
    ) -> LLMConfig:
        """The generation backend (``hf``/``vllm``) and sampling params (see SamplingParams)."""
        _set(self, generation_backend=backend, generation_backend_options=backend_options)
        self.sampling = vars(SamplingParams.from_dict({**self.sampling, **sampling})).copy()
        return self

    @settings_builder("group_rollouts")
    def group_rollouts(self, **settings: Any) -> LLMConfig:
        """Group environments: ``num_groups`` groups of ``group_size`` envs sharing an initial state, and how a
        rollout turns replies into steps (`rllib-llm settings` lists every argument)."""
        rest = take(self, "group_rollouts", settings)
        if rest:
            raise unknown_argument_error(self, "group_rollouts", rest, [s.name for s in declared("group_rollouts")])
        return self

    @settings_builder("training")
    def training(self, *, clip_param: float = NotProvided, **settings: Any) -> LLMConfig:
        """RLlib's training settings (``lr``, ``gamma``, ``train_batch_size``, ...) plus the declared settings of
        the estimators and losses (`rllib-llm settings`; notes/settings.md). ``clip_param`` sets both clip
        ratios."""
        rllib_args = take(self, "training", settings)
        unknown = [name for name in rllib_args if name not in _RLLIB_TRAINING_ARGS]
        if unknown:
            raise unknown_argument_error(
                self, "training", unknown, [*_RLLIB_TRAINING_ARGS, *(s.name for s in declared("training"))]
            )
        super().training(**rllib_args)
        if settings.get("async_rollouts") is True:  # RLlib's per-iteration connector-state sync asks every
            # remote EnvRunner and waits, i.e. for the rollout in flight; the LLM connectors keep no state, weights
            # go by the state server (LLMAlgorithm.setup). IMPALA skips that sync the same way.
            self.env_runners(merge_env_runner_states=False, broadcast_env_runner_states=False)
        if clip_param is not NotProvided:
            self.clip_ratio_low = self.clip_ratio_high = clip_param
        return self

    @property
    def uses_critic(self) -> bool:
        """Whether the estimator needs state values (then the RLModule gets a value head)."""
        return self.advantage_estimator in ADVANTAGE_ESTIMATORS and NEED_VALUES in estimator_needs(self)

    @property
    def logprob_rows(self) -> int | None:
        """Rows per no-grad pass of the Learner connectors (``logprob_batch_size``'s default resolved;
        None: the whole batch in one pass)."""
        return self.logprob_batch_size or self.micro_batch_size or self.minibatch_size

    @property
    def uses_reference(self) -> bool:
        """Whether a frozen reference policy is needed (KL loss, or KL folded into the rewards)."""
        needs = estimator_needs(self) if self.advantage_estimator in ADVANTAGE_ESTIMATORS else ()
        return self.kl_coeff > 0 or NEED_REF_LOGP in needs

    @settings_builder("evaluation")
    def evaluation(self, **settings: Any):
        """RLlib's evaluation settings plus the held-out seeds' (``evaluation_num_seeds``,
        ``evaluation_seed_offset``, ``held_out_interval``)."""
        super().evaluation(**take(self, "evaluation", settings))
        return self

    # --- validation ----------------------------------------------------------------------------------

    def env_name_errors(self) -> list[str]:
        """An env name that is not registered (one line, with the closest names), found before Ray starts."""
        from rllib_llm.envs.multi_agent.pettingzoo_adapter import registered_multi_agent_envs

        return env_name_errors(self.env, registered_multi_agent_envs())

    def validate(self) -> None:
        # The LLM algorithms exist only on the new API stack: RLlib's "now on the new stack" notice is noise.
        log_once(f"{self.algo_class.__name__}_on_new_api_stack")
        errors = []
        try:  # RLlib's own checks stop at the first bad field; ours still run and report every one
            super().validate()
        except (TypeError, ValueError) as e:
            errors.append(" ".join(str(e).split()))

        def check(ok: bool, message: str) -> None:
            if not ok:
                errors.append(message)

        check(self.env is not None, "env: set an environment, e.g. .environment('NumberLine')")
        name_errors = self.env_name_errors() if self.env is not None else []
        errors.extend(name_errors)
        if self.env is not None and not self.is_multi_agent and not name_errors:
            errors.extend(env_config_errors(self.env, self.env_config))
        for name in ("group_size", "num_groups", "max_episode_steps", "evaluation_num_seeds"):
            value = getattr(self, name)
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            check(ok, f"{name} must be an int >= 1, got {value!r}")
        check(self.generation_backend in BACKENDS,
              f"generation_backend must be one of {tuple(sorted(BACKENDS))}, got {self.generation_backend!r}")
        check(not self.torch_compile_worker,
              "torch_compile_worker: EnvRunners generate through their backend (hf's own CUDA-graph decode, vLLM's "
              "engine), which torch.compile of the module would not reach or would fight; compile the Learner only "
              "(.framework(torch_compile_learner=True))")
        if isinstance(self.num_groups, int) and isinstance(self.num_learners, int) and self.num_learners > 1:
            groups = self.num_groups * max(1, self.num_env_runners or 0)
            check(
                groups >= self.num_learners,
                f"num_learners={self.num_learners} needs at least as many groups per iteration, got {groups} "
                "(num_groups x num_env_runners): each Learner trains on whole groups",
            )
        sampling_errors = self._sampling_errors()
        errors.extend(sampling_errors)
        errors.extend(self._algorithm_errors())
        try:
            spec = ModelSpec.from_any(self.llm_model)
            check(spec.dtype == "float32" or spec.lora is not None,
                  f"model dtype {spec.dtype!r} would train the weights themselves in half precision (Adam steps under "
                  "~1/256 of a weight round away, and RLlib cannot checkpoint a half-precision optimizer state): keep "
                  "dtype 'float32' (inference_dtype 'bfloat16' for generation) or train LoRA adapters (kept in float32)")
            self._check_model_path(spec)
        except (TypeError, ValueError, FileNotFoundError) as e:
            errors.append(str(e))
        try:
            if not sampling_errors:
                SamplingParams.from_dict(self.sampling)
        except (TypeError, ValueError) as e:
            errors.append(str(e))
        if errors:
            raise ValueError("Invalid rllib-llm config:\n  - " + "\n  - ".join(errors))

    @staticmethod
    def _check_model_path(spec: ModelSpec) -> None:
        """A local model path (``./``, ``/``, ``~``) must exist, and a Hub id must be cached or reachable:
        said here, before Ray starts, rather than by a Learner actor failing to build its module."""
        name = spec.name_or_path
        if not isinstance(name, str):
            raise TypeError(f"model name_or_path must be a string, got {name!r}")
        check_model_location(name)

    def _sampling_errors(self) -> list[str]:
        """The sampling dict's value types (SamplingParams checks the ranges, but a wrong type would fail
        there with a bare ``TypeError`` naming no field)."""
        if not isinstance(self.sampling, dict):
            return [f"sampling must be a dict of SamplingParams fields, got {self.sampling!r}"]
        errors = []
        for key, (types, what) in _SAMPLING_TYPES.items():
            value = self.sampling.get(key)
            if key in self.sampling and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
                errors.append(f"sampling {key} must be {what}, got {value!r}")
        stop = self.sampling.get("stop")
        if isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
            errors.append(f"sampling stop must be a list of strings, got {stop!r}")
        return errors

    def _algorithm_errors(self) -> list[str]:
        """Every declared setting's check and every declared rule (:mod:`rllib_llm.algorithms.settings`): one
        message per bad field, naming it and what is allowed."""
        return setting_errors(self)

    # --- RLlib hooks ---------------------------------------------------------------------------------

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from rllib_llm.core.rl_module import LLMRLModule

        return RLModuleSpec(
            module_class=LLMRLModule,
            model_config={
                "model": self.llm_model,
                "temperature": self.sampling["temperature"],
                "use_reference": self.uses_reference,
                "value_head": self.uses_critic,
                "value_head_detach": self.value_head_detach,
                "gradient_checkpointing": self.gradient_checkpointing,
                "shared_prefix_forward": self.shared_prefix_forward,
            },
        )

    def get_default_learner_class(self):
        from rllib_llm.algorithms.learner import LLMLearner

        return LLMLearner

    def env_to_module_factory(self) -> Any:
        """The env-to-module factory ``env_runners(env_to_module_connector=...)`` set (the default prompt
        pipeline if none): what each agent's pipeline is built from when no per-agent factory is given."""
        return self._env_to_module_connector

    def user_learner_connectors(self, input_observation_space, input_action_space) -> list:
        """The pieces a user added through ``config.training(learner_connector=...)``, as a list (they run
        after the advantages, before the token batch is built)."""
        if self._learner_connector is None:
            return []
        user = self._learner_connector(input_observation_space, input_action_space)
        return list(user) if isinstance(user, (list, tuple)) else [user]

    def episodes_to_step_columns(self) -> ConnectorV2:
        """The learner pipeline's first piece: episodes -> ``batch[module_id]`` step columns."""
        return FlattenSteps()

    def build_learner_connector(self, input_observation_space, input_action_space, device=None):
        """Episodes -> step columns -> [reward shaping] -> advantages -> (user pieces) -> token batch -> tensors
        (see :mod:`rllib_llm.algorithms.learner_connectors`)."""
        user = self.user_learner_connectors(input_observation_space, input_action_space)
        return LearnerConnectorPipeline(
            connectors=[
                self.episodes_to_step_columns(),
                *shaping_connectors(self),
                ComputeAdvantages(config=self),
                *user,
                *([ReferenceLogProbs(config=self)] if self.kl_coeff > 0 else []),
                *([ProximalLogProbs(config=self)] if self.async_rollouts and self.off_policy_correction == "decoupled" else []),
                StepsToTokenBatch(),
                NumpyToTensor(as_learner_connector=True, device=device),
            ],
            input_observation_space=input_observation_space,
            input_action_space=input_action_space,
        )
