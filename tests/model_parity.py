"""EnvRunner-vs-Learner log-prob comparisons on tiny models (model families, vision, LoRA tests)."""

from __future__ import annotations

import torch

from rllib_llm.algorithms.learner_connectors import pad_token_batch
from rllib_llm.columns import ACTION_LOGP, IMAGES, PROMPT, RESPONSE
from rllib_llm.generation import SamplingParams, make_backend

#: Two prompts sharing a 20-token prefix (the shared-prefix paths run) and one that is only that prefix.
PREFIX = list(range(40, 60))
PROMPTS = [PREFIX + [70, 71, 72], PREFIX + [80], PREFIX]


def token_batch(module, prompts: list[list[int]], outputs: list, images: list | None = None) -> dict[str, torch.Tensor]:
    """The Learner's token batch for (prompt, generated response) pairs, old log-probs included (and the
    image columns, with ``images``: one image or None per row)."""
    steps = {PROMPT: prompts, RESPONSE: [o.token_ids for o in outputs], ACTION_LOGP: [o.logprobs for o in outputs]}
    if images is not None:
        steps[IMAGES] = images
    device = next(module.parameters()).device
    return {k: torch.as_tensor(v).to(device) for k, v in pad_token_batch(steps, module.tokenizer.pad_token_id).items()}


def assert_learner_matches_generator(module, prompts: list[list[int]] = PROMPTS, temperature: float = 0.7) -> None:
    """Samples with the ``hf`` backend, recomputes the response log-probs as the Learner does, compares."""
    backend = make_backend("hf", model=module.model, tokenizer=module.tokenizer)
    params = SamplingParams(temperature=temperature, max_new_tokens=5, stop=[], seed=1, ignore_eos=True)
    outputs = backend.generate(prompts, params)
    assert all(len(o.token_ids) == 5 and len(o.logprobs) == 5 for o in outputs)
    batch = token_batch(module, prompts, outputs)
    with torch.no_grad():
        logp = module.forward_train(batch)["logp"]
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(logp[mask], batch["action_logp"][mask], rtol=1e-4, atol=1e-4)
