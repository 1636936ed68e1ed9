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

import math
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import LearnerConnectorPipeline, NumpyToTensor
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.util.debug import log_once

from rllib_llm.algorithms.advantages import NORM_MODES, STEP_GROUPINGS
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
from rllib_llm.core.models import ModelSpec, check_model_location
from rllib_llm.env_connectors import default_env_to_module, default_module_to_env
from rllib_llm.envs.base import HELD_OUT_SEED_OFFSET
from rllib_llm.envs.registry import env_config_errors, env_name_errors
from rllib_llm.generation import BACKENDS, SamplingParams

#: invalid_action_penalty_mode values (see LLMConfig.__init__).
PENALTY_MODES = ("reward", "row")
#: off_policy_correction values (see LLMConfig.__init__).
OFF_POLICY_CORRECTIONS = ("decoupled", "none")
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
        # .group_rollouts()
        self.group_size = 4
        self.num_groups = 2
        self.max_episode_steps = 10
        self.invalid_action_penalty = 0.1
        #: Where the invalid-action penalty goes (both in the Learner connector; episodes keep the env's rewards):
        #: "reward" (a step reward term: in the episode return and the discounted returns of earlier steps) or
        #: "row" (verl-agent's: subtracted from the invalid step's own score row after the returns; needs
        #: group_stats_over_steps=True and grpo, gigpo or rloo).
        self.invalid_action_penalty_mode = "reward"
        self.prompt_template: str | None = None
        self.few_shot: list[tuple[str, str]] | None = None
        #: Text the assistant turn starts with (prefilled in the prompt, not generated), e.g. "<action>": the
        #: reply is parsed as prefix + generated text. Small models then rarely miss the action format.
        self.response_prefix = ""
        #: Seconds an env reset/step may take before the runner abandons the env, builds a fresh one and
        #: truncates the episode (None: no limit; an env that hangs then hangs the rollout).
        self.env_step_timeout_s: float | None = None
        # .training()
        self.lr = 1e-5
        self.gamma = 0.95
        self.grad_clip = 1.0
        self.weight_decay = 0.0
        #: Rows per forward/backward pass of the Learner (None: the whole minibatch at once). A minibatch's
        #: micro-batches accumulate their gradients into one optimizer step, weighted so the step equals the
        #: whole minibatch's (verl's ppo_micro_batch_size_per_gpu, TRL's gradient accumulation).
        self.micro_batch_size: int | None = None
        #: Rows per no-grad forward pass of the Learner connectors (reference and proximal log-probs, values):
        #: verl's log_prob_micro_batch_size_per_gpu. None: micro_batch_size, else the minibatch (whose training
        #: pass fits, so this one does). Larger is faster where passes are launch-bound (small models on a GPU).
        self.logprob_batch_size: int | None = None
        #: The Learner's forward runs the prompt prefix all rows of a pass share (system prompt, examples) once
        #: at batch 1 and broadcasts its KV cache: fewer FLOPs, two model calls instead of one. None: on a CPU
        #: (compute-bound) yes, on a GPU no (launch-bound at small models: an update of the main job at GPU size
        #: took 2.8 s instead of 3.9 s without it, benchmarks/results/learner_update_h200.md); True for a large
        #: model with a long shared prompt on a GPU.
        self.shared_prefix_forward: bool | None = None
        self.advantage_estimator = "gigpo"
        self.step_advantage_weight = 1.0
        self.advantage_norm = "std"
        #: Group mean/std over steps (long episodes weigh more) as verl-agent's default; False: per episode.
        self.group_stats_over_steps = False
        #: GiGPO step groups: "exact" anchors within an episode group (the paper's), "similarity" (str() ratio
        #: >= similarity_threshold, verl-agent's), or "exact_across_groups" (identical anchors of all groups).
        self.step_grouping = "exact"
        self.similarity_threshold = 0.9
        self.policy_loss = "ppo"
        self.clip_ratio_low = 0.2
        self.clip_ratio_high = 0.2
        #: Dual-clip bound for negative advantages (verl's default 3.0); None switches it off.
        self.clip_ratio_c: float | None = 3.0
        self.loss_agg_mode = "token-mean"
        self.kl_coeff = 0.0
        self.kl_estimator = "low_var_kl"
        #: KL to the reference folded into the token rewards (REINFORCE++), and its estimator.
        self.kl_reward_coeff = 0.0
        self.kl_reward_estimator = "k1"
        self.entropy_coeff = 0.0
        #: Adaptive entropy control (Skywork-OR1): a target entropy (nats per response token) below which an
        #: entropy bonus switches on, its coefficient rising by ``entropy_coeff_step`` per optimizer step while
        #: the entropy stays below the target and falling back (to 0) above it; ``entropy_coeff`` is then its
        #: starting value. None: the fixed ``entropy_coeff``.
        self.entropy_target: float | None = None
        self.entropy_coeff_step = 0.005
        # Critic (advantage_estimator="gae"): GAE lambda, value loss weight and clipping.
        self.lambda_ = 0.95
        self.vf_loss_coeff = 0.5
        self.vf_clip_param: float | None = 0.5
        self.value_head_detach = False
        # DAPO: dynamic sampling (needs a DynamicSamplingMixin algorithm) and the soft overlong penalty.
        self.dynamic_sampling = False
        self.max_sampling_rounds = 4
        self.overlong_buffer_len = 0
        self.overlong_penalty_factor = 1.0
        # Asynchronous rollouts (RLlib's IMPALA/APPO pattern; notes/async.md).
        #: EnvRunners keep playing group rollouts with the weights they have while the Learner updates on the
        #: complete groups that arrived (needs num_env_runners >= 1; single-agent).
        self.async_rollouts = False
        #: A group sampled with weights more than this many Learner updates old is dropped (and counted).
        self.max_staleness = 1
        #: Learner updates between weight broadcasts to the EnvRunners (APPO's name).
        self.broadcast_interval = 1
        #: Learner updates one EnvRunner rollout feeds: each ``sample()`` plays ``num_groups`` x this many groups
        #: and the queue hands them to the next updates (APPO's rollout fragment vs train batch). Where
        #: generation is latency-bound (small batches on a GPU) a larger rollout costs little more than a small
        #: one, so the Learner waits less; the price is staleness: in steady state a rollout's groups are
        #: trained k to 2k - 1 updates after its weights, so ``max_staleness`` must be >= 2k - 1.
        self.updates_per_rollout = 1
        #: How stale groups are corrected: "decoupled" (PPO clipped against the Learner's policy before the
        #: update, each token weighted by min(pi_prox / mu, behaviour_weight_cap); one extra no-grad forward
        #: pass per update) or "none" (the ratio against the behaviour log-probs, as in lock-step training).
        self.off_policy_correction = "decoupled"
        #: The truncation of the decoupled objective's behaviour weights (V-trace's rho-bar).
        self.behaviour_weight_cap = 2.0
        # .evaluation(): held-out seeds are offset far from training seeds.
        self.evaluation_num_seeds = 32
        self.evaluation_seed_offset = HELD_OUT_SEED_OFFSET
        #: Greedy success on the held-out seeds every N training iterations, in the results under ``held_out/``
        #: (what a Tune sweep selects on); None: only the CLI's before/after evaluation.
        self.held_out_interval: int | None = None

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

    def group_rollouts(
        self,
        *,
        group_size: int = NotProvided,
        num_groups: int = NotProvided,
        max_episode_steps: int = NotProvided,
        invalid_action_penalty: float = NotProvided,
        invalid_action_penalty_mode: str = NotProvided,
        prompt_template: str | None = NotProvided,
        few_shot: list | None = NotProvided,
        response_prefix: str = NotProvided,
        env_step_timeout_s: float | None = NotProvided,
    ) -> LLMConfig:
        """Group environments: ``num_groups`` groups of ``group_size`` envs sharing an initial state.
        ``env_step_timeout_s`` bounds each env reset/step (a hung env is replaced, its episode truncated).
        ``response_prefix`` prefills the start of every reply (e.g. ``"<action>"``; parsed with the reply)."""
        _set(
            self,
            group_size=group_size,
            num_groups=num_groups,
            max_episode_steps=max_episode_steps,
            invalid_action_penalty=invalid_action_penalty,
            invalid_action_penalty_mode=invalid_action_penalty_mode,
            prompt_template=prompt_template,
            few_shot=few_shot,
            response_prefix=response_prefix,
            env_step_timeout_s=env_step_timeout_s,
        )
        return self

    def training(
        self,
        *,
        advantage_estimator: str = NotProvided,
        step_advantage_weight: float = NotProvided,
        advantage_norm: str = NotProvided,
        group_stats_over_steps: bool = NotProvided,
        step_grouping: str = NotProvided,
        similarity_threshold: float = NotProvided,
        policy_loss: str = NotProvided,
        clip_param: float = NotProvided,
        clip_ratio_low: float = NotProvided,
        clip_ratio_high: float = NotProvided,
        clip_ratio_c: float | None = NotProvided,
        loss_agg_mode: str = NotProvided,
        kl_coeff: float = NotProvided,
        kl_estimator: str = NotProvided,
        kl_reward_coeff: float = NotProvided,
        kl_reward_estimator: str = NotProvided,
        entropy_coeff: float = NotProvided,
        entropy_target: float | None = NotProvided,
        entropy_coeff_step: float = NotProvided,
        lambda_: float = NotProvided,
        vf_loss_coeff: float = NotProvided,
        vf_clip_param: float | None = NotProvided,
        value_head_detach: bool = NotProvided,
        dynamic_sampling: bool = NotProvided,
        max_sampling_rounds: int = NotProvided,
        overlong_buffer_len: int = NotProvided,
        overlong_penalty_factor: float = NotProvided,
        weight_decay: float = NotProvided,
        micro_batch_size: int | None = NotProvided,
        logprob_batch_size: int | None = NotProvided,
        shared_prefix_forward: bool | None = NotProvided,
        async_rollouts: bool = NotProvided,
        max_staleness: int = NotProvided,
        broadcast_interval: int = NotProvided,
        updates_per_rollout: int = NotProvided,
        off_policy_correction: str = NotProvided,
        behaviour_weight_cap: float = NotProvided,
        **kwargs: Any,
    ) -> LLMConfig:
        """RLlib's training settings plus the advantage/loss settings of the LLM algorithms.

        ``clip_param`` sets both clip ratios; ``clip_ratio_high > clip_ratio_low`` is DAPO's clip-higher.
        Estimators (``advantage_estimator``): ``grpo``, ``gigpo``, ``rloo``, ``reinforce_pp``, ``gae``
        (PPO with a critic); policy losses (``policy_loss``): ``ppo`` (token ratios), ``gspo`` (sequence
        ratios). ``micro_batch_size`` bounds the rows of one forward/backward pass (gradient accumulation
        within a minibatch: memory, not the update, changes); ``logprob_batch_size`` the rows of the Learner
        connectors' no-grad passes (reference and proximal log-probs, values); ``shared_prefix_forward`` whether
        the Learner runs the rows' shared prompt prefix once (default: on a CPU only). ``async_rollouts`` lets EnvRunners sample while
        the Learner updates (``max_staleness``, ``broadcast_interval``, ``updates_per_rollout``,
        ``off_policy_correction``, ``behaviour_weight_cap``; notes/async.md). See notes/algorithms.md for every field.
        """
        super().training(**kwargs)
        if async_rollouts is True:  # RLlib's per-iteration connector-state sync asks every remote EnvRunner and
            # waits, i.e. for the rollout in flight; the LLM connectors keep no state, weights go by the state
            # server (LLMAlgorithm.setup). IMPALA skips that sync the same way.
            self.env_runners(merge_env_runner_states=False, broadcast_env_runner_states=False)
        if clip_param is not NotProvided:
            self.clip_ratio_low = self.clip_ratio_high = clip_param
        _set(
            self,
            advantage_estimator=advantage_estimator,
            step_advantage_weight=step_advantage_weight,
            advantage_norm=advantage_norm,
            group_stats_over_steps=group_stats_over_steps,
            step_grouping=step_grouping,
            similarity_threshold=similarity_threshold,
            policy_loss=policy_loss,
            clip_ratio_low=clip_ratio_low,
            clip_ratio_high=clip_ratio_high,
            clip_ratio_c=clip_ratio_c,
            loss_agg_mode=loss_agg_mode,
            kl_coeff=kl_coeff,
            kl_estimator=kl_estimator,
            kl_reward_coeff=kl_reward_coeff,
            kl_reward_estimator=kl_reward_estimator,
            entropy_coeff=entropy_coeff,
            entropy_target=entropy_target,
            entropy_coeff_step=entropy_coeff_step,
            lambda_=lambda_,
            vf_loss_coeff=vf_loss_coeff,
            vf_clip_param=vf_clip_param,
            value_head_detach=value_head_detach,
            dynamic_sampling=dynamic_sampling,
            max_sampling_rounds=max_sampling_rounds,
            overlong_buffer_len=overlong_buffer_len,
            overlong_penalty_factor=overlong_penalty_factor,
            weight_decay=weight_decay,
            micro_batch_size=micro_batch_size,
            logprob_batch_size=logprob_batch_size,
            shared_prefix_forward=shared_prefix_forward,
            async_rollouts=async_rollouts,
            max_staleness=max_staleness,
            broadcast_interval=broadcast_interval,
            updates_per_rollout=updates_per_rollout,
            off_policy_correction=off_policy_correction,
            behaviour_weight_cap=behaviour_weight_cap,
        )
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

    def evaluation(
        self,
        *,
        evaluation_num_seeds: int = NotProvided,
        evaluation_seed_offset: int = NotProvided,
        held_out_interval: int | None = NotProvided,
        **kwargs: Any,
    ):
        super().evaluation(**kwargs)
        _set(self, evaluation_num_seeds=evaluation_num_seeds, evaluation_seed_offset=evaluation_seed_offset,
             held_out_interval=held_out_interval)
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
        check(self.generation_backend in BACKENDS, f"generation_backend must be one of {BACKENDS}, got {self.generation_backend!r}")
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
        """The advantage/loss/sampling fields: one message per bad field, naming it and what is allowed."""
        from rllib_llm.algorithms.dynamic_sampling import DynamicSamplingMixin

        errors: list[str] = []

        def check(ok: bool, message: str) -> None:
            if not ok:
                errors.append(message)

        def number(name: str, low: float | None = None, high: float | None = None, *, optional: bool = False,
                   low_open: bool = False, integer: bool = False) -> None:
            value = getattr(self, name)
            if optional and value is None:
                return
            kind = int if integer else (int, float)
            ok = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)
            ok = ok and (low is None or (value > low if low_open else value >= low)) and (high is None or value <= high)
            left = "(" if low_open else "["
            span = f"in {left}{low}, {high}]" if high is not None else f"{'>' if low_open else '>='} {low}"
            what = ("an int" if integer else "a number") + (" or None" if optional else "")
            check(ok, f"{name} must be {span} ({what}), got {value!r}")

        def choice(name: str, allowed) -> None:
            allowed = tuple(sorted(allowed)) if isinstance(allowed, dict) else tuple(allowed)
            check(getattr(self, name) in allowed, f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

        def flag(name: str, *, optional: bool = False) -> None:
            value = getattr(self, name)
            allowed = "True, False or None" if optional else "True or False"
            check(isinstance(value, bool) or (optional and value is None), f"{name} must be {allowed}, got {value!r}")

        choice("advantage_estimator", ADVANTAGE_ESTIMATORS)
        choice("advantage_norm", NORM_MODES)
        choice("step_grouping", STEP_GROUPINGS)
        choice("policy_loss", POLICY_LOSSES)
        choice("loss_agg_mode", LOSS_AGG_MODES)
        choice("invalid_action_penalty_mode", PENALTY_MODES)
        if self.invalid_action_penalty_mode == "row":
            check(self.group_stats_over_steps is True and self.advantage_estimator in ("grpo", "gigpo", "rloo"),
                  "invalid_action_penalty_mode='row' (verl-agent's) scores step rows: it needs "
                  "group_stats_over_steps=True and advantage_estimator grpo, gigpo or rloo")
        choice("kl_estimator", KL_ESTIMATORS)
        choice("kl_reward_estimator", KL_ESTIMATORS)
        for name in ("group_stats_over_steps", "value_head_detach", "dynamic_sampling", "async_rollouts"):
            flag(name)
        number("max_staleness", 0, integer=True)
        number("broadcast_interval", 1, integer=True)
        number("updates_per_rollout", 1, integer=True)
        number("behaviour_weight_cap", 1)
        choice("off_policy_correction", OFF_POLICY_CORRECTIONS)
        if self.async_rollouts is True:
            check(not self.is_multi_agent, "async_rollouts=True is single-agent only for now")
            check(self.merge_env_runner_states is False and self.broadcast_env_runner_states is False,
                  "async_rollouts=True: set .env_runners(merge_env_runner_states=False, broadcast_env_runner_states="
                  "False) (.training(async_rollouts=True) does): RLlib's connector-state sync would wait for every "
                  "rollout in flight")
        k = self.updates_per_rollout
        if isinstance(k, int) and not isinstance(k, bool) and k > 1:
            check(self.async_rollouts is True,
                  f"updates_per_rollout={k} needs async_rollouts=True (a lock-step update trains on its whole rollout)")
            check(not isinstance(self.max_staleness, int) or self.max_staleness >= 2 * k - 1,
                  f"updates_per_rollout={k} trains a rollout's groups up to {2 * k - 1} updates after their weights: "
                  f"set max_staleness >= {2 * k - 1} (got {self.max_staleness}), or every rollout's tail is dropped")
        number("similarity_threshold", 0, 1, low_open=True)
        number("gamma", 0, 1)
        number("lambda_", 0, 1)
        for name in ("step_advantage_weight", "kl_coeff", "kl_reward_coeff", "entropy_coeff", "vf_loss_coeff",
                     "invalid_action_penalty", "overlong_penalty_factor", "entropy_coeff_step"):
            number(name, 0)
        number("entropy_target", 0, optional=True, low_open=True)
        for name in ("clip_ratio_low", "clip_ratio_high"):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 10
            check(ok, f"{name} must be in (0, 10), got {value!r}")
        number("clip_ratio_c", 1, optional=True, low_open=True)
        number("env_step_timeout_s", 0, optional=True, low_open=True)
        number("vf_clip_param", 0, optional=True, low_open=True)
        number("max_sampling_rounds", 1, integer=True)
        number("overlong_buffer_len", 0, integer=True)
        # Settings nothing downstream checks before they fail deep inside a Ray actor.
        flag("gradient_checkpointing")
        number("weight_decay", 0)
        number("micro_batch_size", 1, optional=True, integer=True)
        number("logprob_batch_size", 1, optional=True, integer=True)
        flag("shared_prefix_forward", optional=True)
        number("grad_clip", 0, optional=True, low_open=True)
        number("evaluation_seed_offset", 0, integer=True)
        number("held_out_interval", 1, optional=True, integer=True)
        if not isinstance(self.lr, list):  # a list is an RLlib lr schedule, which RLlib checks
            number("lr", 0, low_open=True)
        check(isinstance(self.generation_backend_options, dict),
              f"generation_backend_options must be a dict, got {self.generation_backend_options!r}")
        check(self.prompt_template is None or isinstance(self.prompt_template, str),
              f"prompt_template must be a string or None, got {self.prompt_template!r}")
        check(isinstance(self.response_prefix, str),
              f"response_prefix must be a string ('' for none), got {self.response_prefix!r}")
        check(self.few_shot is None or (isinstance(self.few_shot, (list, tuple)) and all(
            isinstance(shot, (list, tuple)) and len(shot) == 2 and all(isinstance(x, str) for x in shot)
            for shot in self.few_shot)),
            f"few_shot must be a list of (observation, response) string pairs or None, got {self.few_shot!r}")
        max_new_tokens = self.sampling.get("max_new_tokens", 0) if isinstance(self.sampling, dict) else 0
        max_new_tokens = max_new_tokens if isinstance(max_new_tokens, int) else 0
        check(
            not isinstance(self.overlong_buffer_len, int) or self.overlong_buffer_len < max(max_new_tokens, 1),
            f"overlong_buffer_len must be < max_new_tokens ({max_new_tokens}), got {self.overlong_buffer_len!r}",
        )
        check(
            not self.dynamic_sampling
            or (isinstance(self.algo_class, type) and issubclass(self.algo_class, DynamicSamplingMixin)),
            f"dynamic_sampling=True needs an algorithm with dynamic sampling (DAPO, DynamicGiGPO), "
            f"not {getattr(self.algo_class, '__name__', self.algo_class)}",
        )
        return errors

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
