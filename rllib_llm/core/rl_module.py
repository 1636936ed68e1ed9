"""The LLM policy as an RLlib RLModule (new API stack).

:class:`LLMRLModule` wraps a Hugging Face causal LM. EnvRunners sample through it as RLlib's do:
``forward_exploration`` (``forward_inference`` when greedy) on the env-to-module batch (``prompt_ids``, the
``sampling_params``, the images of a vision prompt) returns ``generations``, one
:class:`~rllib_llm.generation.GenerationOutput` per prompt. Sampling is many forward passes, so the module
hands it to its ``generation_backend`` (``hf``, ``vllm``, ...; the EnvRunner attaches the configured one), which
also receives every weight sync (:meth:`LLMRLModule.set_state`). Override ``_forward_exploration`` to sample
differently. Learners call ``forward_train`` on a token batch and get the log-prob of every response token,
which the losses in :mod:`rllib_llm.algorithms.losses` consume.

Batch columns (built by :class:`rllib_llm.algorithms.learner_connectors.StepsToTokenBatch`):
``input_ids`` and ``attention_mask`` of shape [B, P + R]: the prompt left-padded to P tokens followed by
the response right-padded to R tokens; ``response_mask`` [B, R] marks real response tokens.

With ``model_config["value_head"]`` the module is also a critic (PPO): a linear head on the LM's last
hidden state (the input of its LM head), and ``forward_train`` also returns ``values`` [B, R], where
``values[:, j]`` is the value of the state before response token j; ``values[:, 0]`` (at the last prompt
token) is the value of the env step's state, which turn-level GAE uses.

Vision-language models (Qwen2-VL / Qwen2.5-VL, see :mod:`rllib_llm.core.vision`): the prompts hold one
``<|image_pad|>`` per merged image patch and the batch adds the ``images`` / ``image_sizes`` columns; the
forward passes ``pixel_values`` + ``image_grid_thw`` and lets the model derive its 3-D rotary positions (no
shared-prefix split, which would cut through the image tokens' positions).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.core.rl_module.torch.torch_compile_config import TorchCompileConfig
from ray.rllib.utils.numpy import convert_to_numpy
from ray.util import log_once

from rllib_llm.columns import (
    ATTENTION_MASK,
    ENTROPY,
    GENERATIONS,
    IMAGE_SIZES,
    IMAGES,
    INPUT_IDS,
    LOGP,
    PROMPT_IDS,
    RESPONSE_MASK,
    SAMPLING_PARAMS,
    VALUES,
)
from rllib_llm.core.models import ModelSpec, apply_lora, freeze_all_but_last_layers, load_causal_lm, load_tokenizer
from rllib_llm.core.vision import batch_image_inputs, is_vision_model
from rllib_llm.generation import GenerationBackend
from rllib_llm.token_forward import ResponsePass, chunked_head, response_logprobs, response_pass, shares_prefix

#: RLlib's own ``RLModule.__init__`` builds the deprecated ``RLModuleConfig`` for every module and so logs
#: "DeprecationWarning: RLModule(config=[RLModuleConfig object])" once per process (EnvRunner, Learner,
#: driver) although nothing here passes a config. Marking that notice as logged keeps it out of every run.
RLMODULE_CONFIG_NOTICE = "RLModule(config=[RLModuleConfig object])"
log_once(RLMODULE_CONFIG_NOTICE)


def weights_to_numpy(state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """RLlib's ``convert_to_numpy`` for a state dict, with bfloat16 tensors upcast to float32 first: numpy has no
    bfloat16 (RLlib's raises ``TypeError: Got unsupported ScalarType BFloat16``), the upcast is exact, and
    ``set_state`` casts back into the receiving module's dtype."""
    return convert_to_numpy({k: v.float() if v.dtype == torch.bfloat16 else v for k, v in state.items()})


@contextmanager
def capture_lm_head_input(model: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """Collects the hidden states the LM head is called on (the kept positions only, after the final norm).

    A hook rather than ``output_hidden_states``: it works through PEFT wrappers and keeps no other layers.
    """
    captured: list[torch.Tensor] = []
    handle = model.get_output_embeddings().register_forward_pre_hook(lambda _, args: captured.append(args[0]))
    try:
        yield captured
    finally:
        handle.remove()


def generate_for_batch(backend: GenerationBackend | None, batch: dict[str, Any], vision: bool = False) -> dict[str, Any]:
    """The sampling forward pass: ``batch[PROMPT_IDS]`` answered by ``backend`` with
    ``batch[SAMPLING_PARAMS]`` (and ``batch[IMAGES]`` for a vision-language backend) -> ``{GENERATIONS: [...]}``."""
    if backend is None:
        raise RuntimeError("This module has no generation_backend: EnvRunners attach one when they build the module")
    if vision:
        outputs = backend.generate(batch[PROMPT_IDS], batch[SAMPLING_PARAMS], images=batch[IMAGES])
    else:
        outputs = backend.generate(batch[PROMPT_IDS], batch[SAMPLING_PARAMS])
    return {GENERATIONS: outputs}


class LLMRLModule(TorchRLModule, InferenceOnlyAPI):
    """RLModule around a causal LM, with optional LoRA adapters and a frozen reference for KL.

    ``model_config`` keys: ``model`` (a :class:`~rllib_llm.core.models.ModelSpec` dict), ``temperature`` (the
    sampling temperature, so the Learner's log-probs match the generator's), ``use_reference`` (keep a
    frozen copy for the KL term; with LoRA the base model with adapters switched off serves),
    ``gradient_checkpointing``, ``value_head`` (add the critic head; EnvRunners, being inference-only, drop
    it), ``value_head_detach`` (the value loss trains only the head, not the LM trunk).
    """

    framework = "torch"
    #: Samples for forward_exploration / forward_inference (EnvRunner side only; see the module docstring).
    generation_backend: GenerationBackend | None = None

    def setup(self) -> None:
        config = self.model_config or {}
        self.spec = ModelSpec.from_any(config.get("model", {}))
        self.temperature = float(config.get("temperature", 1.0))
        self.tokenizer = load_tokenizer(self.spec)
        model = load_causal_lm(self.spec, self.tokenizer)
        if self.spec.lora is not None:
            model = apply_lora(model, self.spec.lora)
        if self.spec.trainable_layers is not None:
            freeze_all_but_last_layers(model, self.spec.trainable_layers)
        if config.get("gradient_checkpointing") and not self.inference_only:
            # Non-reentrant: the frozen embeddings' output needs no grad for LoRA's gradients to flow (the
            # reentrant default of older transformers gave the adapters none). transformers >= 5.x names it
            # activation checkpointing (the old name warns).
            if hasattr(model, "activation_checkpointing_enable"):
                model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model = model
        self.is_vision = is_vision_model(model)
        # The reference model is kept out of the nn.Module tree: it is never trained, synced or checkpointed
        # (it is rebuilt from the same pretrained source).
        self._reference: list[torch.nn.Module] = []
        if config.get("use_reference") and not self.inference_only and self.spec.lora is None:
            reference = load_causal_lm(self.spec, self.tokenizer).eval()
            reference.requires_grad_(False)
            self._reference.append(reference)
        self.shared_prefix_forward: bool | None = config.get("shared_prefix_forward")
        self.value_head: torch.nn.Linear | None = None
        self.value_head_detach = bool(config.get("value_head_detach", False))
        if config.get("value_head"):
            # Zero init: V = 0 at the start, so the first advantages are plain discounted returns.
            self.value_head = torch.nn.Linear(model.get_output_embeddings().in_features, 1)
            torch.nn.init.zeros_(self.value_head.weight)
            torch.nn.init.zeros_(self.value_head.bias)
        if self.inference_only:  # an EnvRunner's: it only samples, so it stays in eval mode (see ``train``)
            self.eval()

    def get_non_inference_attributes(self) -> list[str]:
        return ["value_head"]

    def train(self, mode: bool = True) -> LLMRLModule:
        """``nn.Module.train``, skipped when the module and its model are in ``mode`` already. RLlib switches
        the module around every forward pass (``forward_exploration``: eval and back; ``forward_train``:
        train), and a switch walks every submodule: ~5 ms for SmolLM2-135M with LoRA on a CPU (transformers
        re-checks its kernels too), a few times per env step and per minibatch. Sampling modules stay in eval
        mode (``setup``), so their switches cost nothing."""
        model = getattr(self, "model", None)  # None while RLlib builds the module
        if self.training == mode and (model is None or model.training == mode):
            return self
        return super().train(mode)

    def compile(self, compile_config: TorchCompileConfig) -> LLMRLModule:
        """RLlib's hook for ``.framework(torch_compile_learner=True)``: compiles the language model (with
        dynamic shapes: every minibatch has its own length), not this module's Python glue (padding, per-row
        prompt lists), which would break dynamo's graphs at every step. A small model's update on a GPU is
        bound by kernel launches (benchmarks/results/learner_update_h200*.md); fusing the elementwise kernels
        between the matmuls is what compiling buys. Once per module; the reference pass (adapters off) and
        the no-grad passes are graphs of their own. Generation is never compiled (``LLMConfig.validate``
        refuses ``torch_compile_worker``)."""
        if not getattr(self, "_model_compiled", False):
            self.trained_network().compile(backend=compile_config.torch_dynamo_backend,
                                           mode=compile_config.torch_dynamo_mode,
                                           **{"dynamic": True, **compile_config.kwargs})  # fmt: skip
            self._model_compiled = True
        return self

    def trained_network(self) -> torch.nn.Module:
        """The network the Learner's passes call: the decoder when the LM head runs in chunks beside it
        (:func:`~rllib_llm.token_forward.chunked_head`), else the whole language model. What ``compile``
        compiles."""
        parts = None if self.is_vision else chunked_head(self.model)
        return parts[0] if parts is not None else self.model

    # --- RLModule forward passes ---------------------------------------------------------------------

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logp, _ = self.logprobs(batch)
        return {LOGP: logp}

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return generate_for_batch(self.generation_backend, batch, self.is_vision)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The same sampling call: the batch's ``sampling_params`` say whether it samples or decodes greedily."""
        return self._forward_inference(batch, **kwargs)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if getattr(self, "value_head", None) is None:
            logp, entropy = self.logprobs(batch, with_entropy=True)
            return {LOGP: logp, ENTROPY: entropy}
        out = self.response_pass(batch, with_entropy=True)
        return {LOGP: out.logp, ENTROPY: out.entropy, VALUES: self._values_from_hidden(out.hidden)}

    def _values_from_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, R + 1, H] hidden states at the kept positions -> values [B, R] of the states before each token."""
        hidden = hidden[:, :-1].float()
        if self.value_head_detach:
            hidden = hidden.detach()
        return self.value_head(hidden).squeeze(-1)

    @torch.no_grad()
    def values(self, batch: dict[str, Any]) -> torch.Tensor:
        """Per-token values [B, R] (see module docstring), without gradients (for GAE in the connector)."""
        if getattr(self, "value_head", None) is None:
            raise RuntimeError("This LLMRLModule has no value head (build it with model_config value_head=True).")
        return self._values_from_hidden(self.response_pass(batch).hidden)

    def logprobs(self, batch: dict[str, Any], with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self.response_pass(batch, with_entropy)
        return out.logp, out.entropy

    def response_pass(self, batch: dict[str, Any], with_entropy: bool = False) -> ResponsePass:
        """The Learner's pass over ``batch`` (:func:`~rllib_llm.token_forward.response_pass`), with the LM
        head's input at the kept positions always filled in (what the value head reads): the chunked path
        returns it, the one-pass path's is caught on its way into the head."""
        def run() -> ResponsePass:
            return response_pass(
                self.model,
                batch[INPUT_IDS],
                batch[ATTENTION_MASK],
                batch[RESPONSE_MASK].shape[1],
                self.temperature,
                with_entropy,
                share_prefix=shares_prefix(self.shared_prefix_forward, batch[INPUT_IDS].device),
                vision=self.vision_inputs(batch),
            )

        if self.trained_network() is not self.model:  # the chunked path: it returns the hidden states
            return run()
        with capture_lm_head_input(self.model) as captured:
            out = run()
        out.hidden = captured[-1]
        return out

    def vision_inputs(self, batch: dict[str, Any]) -> dict[str, torch.Tensor] | None:
        """A VL model's image kwargs for ``batch`` (``{}`` when it has no images); None for a text LM."""
        if not self.is_vision:
            return None
        if IMAGES not in batch:
            return {}
        return batch_image_inputs(self.model, batch[IMAGES], batch[IMAGE_SIZES])

    @torch.no_grad()
    def reference_logprobs(self, batch: dict[str, Any]) -> torch.Tensor:
        """Log-probs of the response tokens under the frozen reference policy."""
        if self.spec.lora is not None:
            with self.model.disable_adapter():
                return self.logprobs(batch)[0]
        if not self._reference:
            raise RuntimeError("This LLMRLModule was built without a reference model (use_reference=False).")
        reference = self._reference[0].to(batch[INPUT_IDS].device)
        return response_logprobs(
            reference, batch[INPUT_IDS], batch[ATTENTION_MASK], batch[RESPONSE_MASK].shape[1], self.temperature,
            vision=self.vision_inputs(batch),
        )[0]  # fmt: skip

    # --- Weight sync ---------------------------------------------------------------------------------

    def get_state(
        self, components=None, *, not_components=None, inference_only: bool = False, frozen_weights: bool = False,
        **kwargs,
    ) -> dict:
        """The module's weights without the frozen ones (with LoRA or ``trainable_layers``): what EnvRunners are
        sent at each sync and what checkpoints hold. Frozen weights are the pretrained ones, rebuilt from the
        same source by ``setup`` on every side, so a LoRA checkpoint holds the adapters (MBs, not the base
        model's hundreds of MBs), as peft saves them. ``frozen_weights=True`` returns every weight (to export a
        merged model, say). ``inference_only`` drops what only the Learner uses (the value head), as RLlib's
        ``TorchRLModule.get_state`` does; unlike it, the weights left out are never copied to the host, and
        bfloat16 weights travel (see :func:`weights_to_numpy`)."""
        state = self.state_dict()
        left_out: set[str] = set()
        if not frozen_weights and (self.spec.lora is not None or self.spec.trainable_layers is not None):
            left_out = {n for n, p in self.named_parameters(remove_duplicate=False) if not p.requires_grad}
        if inference_only and not self.inference_only:
            left_out |= {n for n in state if n.split(".")[0] in self.get_non_inference_attributes()}
        return weights_to_numpy({k: v for k, v in state.items() if k not in left_out})

    def set_state(self, state: dict) -> None:
        """Loads full or partial (adapter-only) weights; keys this module does not have are an error."""
        from ray.rllib.utils.torch_utils import convert_to_torch_tensor

        _, unexpected = self.load_state_dict(convert_to_torch_tensor(state), strict=False)
        if unexpected:
            raise ValueError(f"Weights for a different model: unexpected keys {unexpected[:5]} ...")
        if self.generation_backend is not None:  # its own copy (vLLM's engine, a LoRA request) follows
            self.generation_backend.update_weights(state)
