"""Vision-language policies (Qwen2-VL / Qwen2.5-VL): image prompts for the ``hf`` path, on the EnvRunner and
the Learner.

A VL prompt is token ids holding one image placeholder per image (``<|vision_start|><|image_pad|>
<|vision_end|>``, what :class:`~rllib_llm.env_connectors.ChatPromptBuilder` writes for an image observation)
plus the images (uint8 HxWx3, ``batch["images"]``). Here:

- :func:`image_patches` turns an image into Qwen2-VL's ``pixel_values`` rows and ``image_grid_thw``
  (resize to a multiple of patch x merge, CLIP normalisation, the 2x2-merge patch order), in numpy/torch;
- :func:`expand_image_tokens` repeats each ``<|image_pad|>`` once per merged patch, as the HF processor does;
- :class:`HFVisionBackend` samples responses for such prompts with per-token log-probs under
  softmax(logits / temperature), like the text ``hf`` backend;
- :func:`vl_response_logprobs` recomputes those log-probs for the Learner from the same ids and pixels;
- :func:`build_tiny_vl_model` / :func:`add_vision_tokens`: a tiny random Qwen2.5-VL and a byte tokenizer
  with the vision special tokens and an image-aware chat template, for tests.

Training wiring: :class:`~rllib_llm.core.single_agent_env_runner.LLMEnvRunner` samples a VL model (:func:`is_vision_model`)
through :class:`HFVisionBackend`, records the expanded prompt ids (:func:`expand_prompt`) and each step's image
count; the learner connector re-reads those images from the episode's observations into two batch columns
(:func:`image_columns`: uint8 images padded to the largest, and their sizes), which slice by row like every
other column; the RLModule turns them back into pixels (:func:`batch_image_inputs`).

Limits (see notes/scale.md): at most one image per step; eager ``model.generate`` decoding (no CUDA graphs,
no shared-prefix prefill); stop strings are applied after generation; only ``image`` inputs (no video).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rllib_llm.columns import IMAGE_SIZES, IMAGES
from rllib_llm.generation.base import GenerationBackend, GenerationOutput, SamplingParams, truncate_at_stop
from rllib_llm.token_forward import left_pad, response_logprobs, token_logprobs

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
#: The byte tokenizer's chat template, with image content parts rendered as Qwen2-VL's placeholder.
VL_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for part in m['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


Image = np.ndarray | torch.Tensor


def is_vision_model(model: Any) -> bool:
    """Whether ``model`` (possibly PEFT-wrapped) is a vision-language model (its config has a vision tower)."""
    return getattr(getattr(model, "config", None), "vision_config", None) is not None


def resized_shape(height: int, width: int, factor: int = 28, max_pixels: int = 256 * 28 * 28) -> tuple[int, int]:
    """The image size Qwen2-VL patches are cut from: multiples of ``factor``, at most ~``max_pixels``."""
    scale = min(1.0, math.sqrt(max_pixels / (height * width)))
    resized = [max(factor, round(d * scale / factor) * factor) for d in (height, width)]
    return resized[0], resized[1]


def _vision_sizes(model: Any) -> tuple[int, int, int]:
    vision = model.config.vision_config
    return vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size


def image_patches(
    image: Image,
    patch_size: int = 14,
    merge_size: int = 2,
    temporal_patch_size: int = 2,
    max_pixels: int = 256 * 28 * 28,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pixel_values [n, 3 * temporal * patch^2], grid_thw [3])`` of one uint8 HxWx3 image (numpy or torch,
    on any device), as Qwen2-VL's image processor lays them out; the image is resized (bilinear) to multiples
    of ``patch * merge`` first, scaled down to at most ``max_pixels``."""
    if isinstance(image, np.ndarray):
        image = torch.as_tensor(np.ascontiguousarray(image))
    pixels = image.permute(2, 0, 1).float() / 255.0
    height, width = pixels.shape[1:]
    size = list(resized_shape(height, width, patch_size * merge_size, max_pixels))
    if size != [height, width]:
        pixels = torch.nn.functional.interpolate(pixels[None], size=size, mode="bilinear", align_corners=False)[0]
    mean = torch.tensor(CLIP_MEAN, device=pixels.device)[:, None, None]
    std = torch.tensor(CLIP_STD, device=pixels.device)[:, None, None]
    pixels = ((pixels - mean) / std).expand(temporal_patch_size, -1, -1, -1)  # a still image: frames repeat
    grid_h, grid_w = size[0] // patch_size, size[1] // patch_size
    patches = pixels.reshape(
        1, temporal_patch_size, 3, grid_h // merge_size, merge_size, patch_size, grid_w // merge_size, merge_size,
        patch_size,
    )  # fmt: skip
    patches = patches.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)  # merge groups of 2x2 patches stay adjacent
    flat = patches.reshape(grid_h * grid_w, 3 * temporal_patch_size * patch_size * patch_size)
    return flat.contiguous(), torch.tensor([1, grid_h, grid_w])


def expand_image_tokens(prompt: Sequence[int], grids: Sequence[torch.Tensor], image_token_id: int, merge_size: int):
    """``prompt`` with its i-th ``image_token_id`` repeated once per merged patch of image i (the model
    replaces those positions by the vision encoder's outputs). Already expanded prompts stay as they are."""
    counts = [int(torch.prod(g)) // merge_size**2 for g in grids]
    placeholders = sum(1 for t in prompt if t == image_token_id)
    if placeholders == sum(counts):
        return list(prompt)
    if placeholders != len(grids):
        raise ValueError(f"prompt has {placeholders} image placeholders for {len(grids)} images")
    out: list[int] = []
    images = iter(counts)
    for token in prompt:
        out.extend([token] * next(images) if token == image_token_id else [token])
    return out


def expand_prompt(model: Any, prompt: Sequence[int], images: Sequence[Image]) -> list[int]:
    """:func:`expand_image_tokens` for ``model``, the grids computed from the image shapes alone (no pixels):
    the ids the model really reads, which the EnvRunner records for the Learner."""
    patch, merge, _ = _vision_sizes(model)
    grids = [torch.tensor([1, *(d // patch for d in resized_shape(*img.shape[:2], patch * merge))]) for img in images]
    return expand_image_tokens(prompt, grids, model.config.image_token_id, merge)


def encode_images(model: Any, images: Sequence[Image]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Pixel rows and ``grid_thw`` of each image, with ``model``'s patch, merge and temporal sizes."""
    patch, merge, temporal = _vision_sizes(model)
    encoded = [image_patches(img, patch, merge, temporal) for img in images]
    return [p for p, _ in encoded], [g for _, g in encoded]


def pixel_kwargs(
    pixel_rows: Sequence[torch.Tensor], grids: Sequence[torch.Tensor], device: torch.device, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """The model's ``pixel_values`` and ``image_grid_thw`` kwargs (none without images)."""
    if not pixel_rows:
        return {}
    return {"pixel_values": torch.cat(pixel_rows).to(device, dtype), "image_grid_thw": torch.stack(grids).to(device)}


class VisionInputs:
    """Expanded prompt ids, concatenated ``pixel_values`` and ``image_grid_thw`` of a batch of image prompts
    (images per row in row order): what both :class:`HFVisionBackend` and the Learner feed the model."""

    def __init__(self, model: Any, prompts: Sequence[Sequence[int]], images: Sequence[Sequence[Image]]):
        self.image_token_id = model.config.image_token_id
        merge = _vision_sizes(model)[1]
        self.pixel_rows: list[torch.Tensor] = []
        self.grids: list[torch.Tensor] = []
        self.prompts: list[list[int]] = []
        for prompt, row_images in zip(prompts, images, strict=True):
            pixels, grids = encode_images(model, row_images)
            self.pixel_rows += pixels
            self.grids += grids
            self.prompts.append(expand_image_tokens(prompt, grids, self.image_token_id, merge))

    def model_kwargs(self, device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
        return pixel_kwargs(self.pixel_rows, self.grids, device, dtype)


def image_columns(images: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    """The :data:`IMAGES` / :data:`IMAGE_SIZES` columns of a token batch (one image or None per row), or
    nothing when no row has an image. Raw uint8 pixels: a quarter of float patches, half again for the
    temporal repeat, and they slice by row for minibatches."""
    sizes = np.array([img.shape[:2] if img is not None else (0, 0) for img in images], dtype=np.int64)
    if not sizes.any():
        return {}
    height, width = sizes.max(axis=0)
    padded = np.zeros((len(images), height, width, 3), dtype=np.uint8)
    for row, img in enumerate(images):
        if img is not None:
            padded[row, : img.shape[0], : img.shape[1]] = img
    return {IMAGES: padded, IMAGE_SIZES: sizes.reshape(len(images), 2)}


def batch_image_inputs(model: Any, images: torch.Tensor, sizes: torch.Tensor) -> dict[str, torch.Tensor]:
    """``pixel_values`` + ``image_grid_thw`` kwargs of a token batch's :func:`image_columns` (rows without an
    image contribute none), on the images' device in the model's dtype."""
    crops = [images[row, :h, :w] for row, (h, w) in enumerate(sizes.tolist()) if h > 0]
    pixels, grids = encode_images(model, crops)
    return pixel_kwargs(pixels, grids, images.device, next(model.parameters()).dtype)


class HFVisionBackend(GenerationBackend):
    """Sampling for Qwen2-VL-style models: prompt ids with image placeholders + the images of each row.

    ``generate(prompts, params, images=...)``; without ``images`` it is a plain text LM call. Decoding is
    ``model.generate`` with a fresh generation config (no model defaults such as top-k), and log-probs come
    from its raw logits, so they are what :func:`vl_response_logprobs` recomputes.

    The vision placeholders (:data:`VISION_TOKENS`) are never sampled: in a response, an ``<|image_pad|>`` is
    an image slot without an image, and the Learner's forward over prompt + response then fails ("Image
    features and image tokens do not match"; the tiny random model wrote them). Their probability is left in
    the recorded log-probs (both sides score the full vocabulary), a bias of the mass a trained model puts on
    input-only tokens.
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        #: The placeholder ids the tokenizer knows, suppressed at sampling.
        self.suppressed = [i for i in tokenizer.convert_tokens_to_ids(list(VISION_TOKENS))
                           if i is not None and i != tokenizer.unk_token_id]  # fmt: skip

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, images: Sequence[Sequence[np.ndarray]] | None = None
    ) -> list[GenerationOutput]:
        from transformers import GenerationConfig

        inputs = VisionInputs(self.model, prompts, images if images is not None else [[] for _ in prompts])
        param = next(self.model.parameters())
        ids, mask = left_pad(inputs.prompts, self.tokenizer.pad_token_id, param.device)
        eos = self.tokenizer.eos_token_id
        config = GenerationConfig(
            do_sample=not params.greedy, temperature=params.temperature, top_p=params.top_p, top_k=0,
            max_new_tokens=params.max_new_tokens, eos_token_id=None if params.ignore_eos else eos,
            pad_token_id=self.tokenizer.pad_token_id, output_logits=True, return_dict_in_generate=True,
            suppress_tokens=self.suppressed or None,
        )  # fmt: skip
        with torch.no_grad(), torch.random.fork_rng(devices=[param.device] if param.device.type == "cuda" else []):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = self.model.generate(
                input_ids=ids, attention_mask=mask, generation_config=config,
                **inputs.model_kwargs(param.device, param.dtype),
            )  # fmt: skip
        tokens = out.sequences[:, ids.shape[1] :]
        logprobs = token_logprobs(torch.stack(out.logits, dim=1), tokens, params.temperature)
        return [self._output(t.tolist(), lp.tolist(), params) for t, lp in zip(tokens, logprobs, strict=True)]

    def _output(self, tokens: list[int], logprobs: list[float], params: SamplingParams) -> GenerationOutput:
        """Cuts a row at its end-of-sequence token or at the first token completing a stop string."""
        eos = None if params.ignore_eos else self.tokenizer.eos_token_id
        for n in range(1, len(tokens) + 1):
            if tokens[n - 1] == eos:
                return self._finish(tokens[:n], logprobs[:n], "eos")
            text, stopped = truncate_at_stop(self.tokenizer.decode(tokens[:n]), params.stop)
            if stopped:
                return GenerationOutput(tokens[:n], logprobs[:n], text, "stop")
        return self._finish(tokens, logprobs, "length")

    def _finish(self, tokens: list[int], logprobs: list[float], reason: str) -> GenerationOutput:
        return GenerationOutput(tokens, logprobs, self.tokenizer.decode(tokens, skip_special_tokens=True), reason)


def vl_response_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    images: Sequence[Sequence[Image]],
    responses: Sequence[Sequence[int]],
    pad_id: int,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The Learner's side: log-probs [B, R] of each response (right-padded to R; mask [B, R] returned too)
    under softmax(logits / T), for prompts with images. One forward pass over prompt (left-padded) + response
    (:func:`rllib_llm.token_forward.response_logprobs`); the model derives its 3-D rotary positions from the ids,
    the image grids and the mask."""
    inputs = VisionInputs(model, prompts, images)
    param = next(model.parameters())
    prompt_ids, prompt_mask = left_pad(inputs.prompts, pad_id, param.device)
    width = max(len(r) for r in responses)
    response_ids = torch.full((len(responses), width), pad_id, dtype=torch.long)
    response_mask = torch.zeros((len(responses), width), dtype=torch.long)
    for i, response in enumerate(responses):
        response_ids[i, : len(response)] = torch.tensor(response, dtype=torch.long)
        response_mask[i, : len(response)] = 1
    response_ids, response_mask = response_ids.to(param.device), response_mask.to(param.device)
    logp, _ = response_logprobs(
        model,
        torch.cat([prompt_ids, response_ids], dim=1),
        torch.cat([prompt_mask, response_mask], dim=1),
        width,
        temperature,
        vision=inputs.model_kwargs(param.device, param.dtype),
    )
    return logp, response_mask


# --- Tiny models for tests ---------------------------------------------------------------------------


def add_vision_tokens(tokenizer: Any) -> Any:
    """Adds Qwen2-VL's vision special tokens and the image-aware chat template to ``tokenizer`` (in place)."""
    tokenizer.add_special_tokens({"additional_special_tokens": list(VISION_TOKENS)})
    tokenizer.chat_template = VL_CHAT_TEMPLATE
    return tokenizer


def build_tiny_vl_model(tokenizer: Any, dtype: torch.dtype = torch.float32, seed: int = 0) -> Any:
    """A randomly initialised 2-layer Qwen2.5-VL (2-block vision tower, 14 px patches, 2x2 merge) for a
    tokenizer that has the vision tokens (:func:`add_vision_tokens`)."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    token = tokenizer.convert_tokens_to_ids
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        ),
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14, spatial_merge_size=2,
            temporal_patch_size=2, window_size=56, out_hidden_size=64, fullatt_block_indexes=[1],
        ),
        image_token_id=token("<|image_pad|>"), video_token_id=token("<|video_pad|>"),
        vision_start_token_id=token("<|vision_start|>"), vision_end_token_id=token("<|vision_end|>"),
        tie_word_embeddings=True,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    return model.to(dtype).eval()
