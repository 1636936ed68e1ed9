"""Vision-language on a tiny random Qwen2.5-VL: Qwen2-VL patches, image placeholders, sampling with images,
and the Learner's log-prob recomputation for image prompts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rllib_llm.columns import IMAGE_SIZES, IMAGES
from rllib_llm.core.models import TINY_VL_MODEL, apply_lora, build_byte_tokenizer
from rllib_llm.core.rl_module import LLMRLModule
from rllib_llm.core.vision import (
    HFVisionBackend,
    VisionInputs,
    add_vision_tokens,
    batch_image_inputs,
    build_tiny_vl_model,
    expand_image_tokens,
    expand_prompt,
    image_columns,
    image_patches,
    vl_response_logprobs,
)
from rllib_llm.env_connectors.prompts import encode_chat, supports_image_content
from rllib_llm.generation import SamplingParams
from tests.model_parity import token_batch

PARAMS = SamplingParams(temperature=0.7, max_new_tokens=5, stop=[], seed=3, ignore_eos=True)


def image(height: int, width: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def tokenizer():
    return add_vision_tokens(build_byte_tokenizer())


def chat_prompt(tokenizer, text: str, with_image: bool) -> list[int]:
    """What ChatPromptBuilder encodes for an (image) observation."""
    content = [{"type": "image"}, {"type": "text", "text": text}] if with_image else text
    return encode_chat(tokenizer, [{"role": "user", "content": content}])


def test_image_patches_match_the_transformers_qwen2_vl_processor():
    processors = pytest.importorskip("transformers")
    img = image(56, 84, seed=0)  # multiples of 28: no resize on either side
    theirs = processors.Qwen2VLImageProcessor(
        patch_size=14, merge_size=2, temporal_patch_size=2, size={"shortest_edge": 28 * 28, "longest_edge": 10**6}
    )(images=[img], return_tensors="pt")
    pixels, grid = image_patches(img)
    assert grid.tolist() == theirs["image_grid_thw"][0].tolist() == [1, 4, 6]
    torch.testing.assert_close(pixels, theirs["pixel_values"].float(), rtol=1e-4, atol=1e-4)
    resized, grid = image_patches(image(50, 90, seed=1))  # resized to multiples of 28
    assert grid.tolist() == [1, 4, 6] and resized.shape == (24, 3 * 2 * 14 * 14)


def test_expand_image_tokens_repeats_each_placeholder_per_merged_patch():
    grids = [torch.tensor([1, 4, 6]), torch.tensor([1, 2, 2])]
    expanded = expand_image_tokens([1, 9, 2, 9, 3], grids, image_token_id=9, merge_size=2)
    assert expanded == [1] + [9] * 6 + [2, 9, 3]
    assert expand_image_tokens(expanded, grids, 9, 2) == expanded  # already expanded
    with pytest.raises(ValueError, match="2 image placeholders for 1 images"):
        expand_image_tokens([9, 9, 1], grids[:1], 9, 2)


@pytest.mark.parametrize("lora", [False, True])
def test_vl_generation_logprobs_match_the_learner_recomputation(tokenizer, device, lora):
    model = build_tiny_vl_model(tokenizer).to(device)
    if lora:
        model = apply_lora(model, {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    prompts = [chat_prompt(tokenizer, "push the box", True), chat_prompt(tokenizer, "a card", True),
               chat_prompt(tokenizer, "text only", False)]  # fmt: skip
    images = [[image(56, 56, seed=1)], [image(56, 84, seed=2)], []]
    assert supports_image_content(tokenizer) and sum(t == model.config.image_token_id for t in prompts[0]) == 1
    outputs = HFVisionBackend(model, tokenizer).generate(prompts, PARAMS, images=images)
    responses = [o.token_ids for o in outputs]
    assert [len(r) for r in responses] == [5, 5, 5] and all(o.finish_reason == "length" for o in outputs)
    logp, mask = vl_response_logprobs(model, prompts, images, responses, tokenizer.pad_token_id, temperature=0.7)
    old = torch.tensor([o.logprobs for o in outputs], device=logp.device)
    torch.testing.assert_close(logp, old, rtol=1e-4, atol=1e-4)
    assert mask.all()
    # The pixels matter: another image for row 0 changes its log-probs, not those of the text-only row.
    other, _ = vl_response_logprobs(model, prompts, [[image(56, 56, seed=9)], *images[1:]], responses,
                                    tokenizer.pad_token_id, temperature=0.7)  # fmt: skip
    assert not torch.allclose(other[0], logp[0], atol=1e-4)
    torch.testing.assert_close(other[2], logp[2], rtol=1e-4, atol=1e-4)
    if lora:  # the Learner's loss reaches the adapters through image prompts
        model.train()
        vl_response_logprobs(model, prompts[:1], images[:1], responses[:1], tokenizer.pad_token_id)[0].sum().backward()
        grads = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
        assert grads and all("lora_" in n for n in grads)


def test_vl_sampling_never_writes_an_image_placeholder(tokenizer):
    """A response's ``<|image_pad|>`` would be an image slot without an image: the Learner's forward then fails
    (sokoban_gigpo_vl.py with the tiny model did). Even a model that prefers the placeholders never samples them."""
    model = build_tiny_vl_model(tokenizer)
    pads = tokenizer.convert_tokens_to_ids(["<|image_pad|>", "<|vision_start|>"])
    with torch.no_grad():
        model.lm_head.weight[pads] = 0.0
        model.lm_head.weight[pads, 0] = 1e4 * torch.sign(model.model.language_model.norm.weight[0])
    prompts, images = [chat_prompt(tokenizer, "go", True)] * 4, [[image(28, 28, seed=s)] for s in range(4)]
    for out in HFVisionBackend(model, tokenizer).generate(prompts, PARAMS.replace(max_new_tokens=6), images=images):
        assert len(out.token_ids) == 6 and not set(out.token_ids) & set(pads)


def test_vl_generation_stops_at_stop_strings_and_is_seeded(tokenizer):
    model = build_tiny_vl_model(tokenizer)
    backend = HFVisionBackend(model, tokenizer)
    prompts, images = [chat_prompt(tokenizer, "go", True)], [[image(28, 28, seed=4)]]
    first = backend.generate(prompts, PARAMS.replace(max_new_tokens=8), images=images)[0]
    assert first == backend.generate(prompts, PARAMS.replace(max_new_tokens=8), images=images)[0]
    stop = tokenizer.decode(first.token_ids[:2])
    cut = backend.generate(prompts, PARAMS.replace(max_new_tokens=8, stop=[stop]), images=images)[0]
    assert cut.finish_reason == "stop" and cut.token_ids == first.token_ids[: len(cut.token_ids)]
    assert cut.text.endswith(stop) and len(cut.token_ids) <= 2


def test_vl_rl_module_scores_a_mixed_token_batch_as_the_generator(device):
    """LLMRLModule on the tiny VL spec: padded image columns (two sizes, one text-only row) become the
    generator's pixels, and forward_train recomputes its log-probs (no shared-prefix split)."""
    module = LLMRLModule(model_config={"model": {"name_or_path": TINY_VL_MODEL}, "temperature": 0.7}).to(device)
    model, tokenizer = module.model, module.tokenizer
    assert module.is_vision
    rows = [image(56, 56, seed=1), None, image(84, 56, seed=2)]
    prompts = [chat_prompt(tokenizer, "go", img is not None) for img in rows]
    images = [[img] if img is not None else [] for img in rows]
    expanded = [expand_prompt(model, p, imgs) for p, imgs in zip(prompts, images, strict=True)]
    assert expanded == VisionInputs(model, prompts, images).prompts
    columns = image_columns(rows)
    assert columns[IMAGES].shape == (3, 84, 56, 3) and columns[IMAGE_SIZES].tolist() == [[56, 56], [0, 0], [84, 56]]
    kwargs = batch_image_inputs(model, torch.as_tensor(columns[IMAGES]), torch.as_tensor(columns[IMAGE_SIZES]))
    reference = VisionInputs(model, prompts, images).model_kwargs(torch.device("cpu"), torch.float32)
    torch.testing.assert_close(kwargs, reference)
    outputs = HFVisionBackend(model, tokenizer).generate(expanded, PARAMS, images=images)
    batch = token_batch(module, expanded, outputs, images=rows)
    with torch.no_grad():
        logp = module.forward_train(batch)["logp"]
    torch.testing.assert_close(logp, batch["action_logp"], rtol=1e-4, atol=1e-4)
