"""A prompt-based agent: an OpenAI-compatible chat model playing our envs with the training prompts.

:class:`PromptAgentRunner` is the training EnvRunner (:class:`~rllib_llm.core.single_agent_env_runner.LLMEnvRunner`) with
two pieces swapped: the env-to-module pipeline's :class:`ChatPromptBuilder` hands over the chat messages
it builds instead of tokenizing them, and the generation backend sends those messages to the endpoint.
Everything else (group envs, seeds, memory, few-shot examples, action parsing, invalid-action handling)
is the code training runs, so an API model's success rate is comparable with a trained policy's on the
same held-out seeds.
"""

from __future__ import annotations

import base64
import copy
import io
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from rllib_llm.core.rl_module import generate_for_batch
from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
from rllib_llm.env_connectors.prompts import ChatPromptBuilder, user_text
from rllib_llm.generation.base import GenerationBackend, GenerationOutput, SamplingParams, truncate_at_stop
from rllib_llm.metrics import rollout_stats
from rllib_llm.prompt_agent.client import APIError, ChatClient

logger = logging.getLogger(__name__)

#: Response budget of the ``--env`` prompt agent: the default prompts ask to think, then act.
DEFAULT_MAX_TOKENS = 512


def _image_url(image: Any) -> dict[str, Any]:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image, dtype=np.uint8)).save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


class MessagesOutput:
    """Mixin for a ChatPromptBuilder (or a subclass): ``build`` returns the messages, not token ids.

    The prompt builder's own ``messages`` (template, system prompt, few-shot pairs, memory block) is kept;
    API models have long contexts, so no token budget applies. With ``multimodal=True`` an image
    observation is sent as an OpenAI ``image_url`` part (PNG data URL).
    """

    def build(self, tokenizer: Any, episode: Any, memory: str, history_length: int) -> tuple[list[dict], str]:
        observation = episode.get_observations(-1)
        image = observation.get("image") if isinstance(observation, dict) else None
        send_image = bool(self.multimodal) and image is not None
        messages = self.messages(episode, memory, history_length, image=send_image)
        text = user_text(messages)
        if send_image:  # the image part as an OpenAI image_url, the text part as it is
            messages[-1] = {**messages[-1], "content": [_image_url(image), messages[-1]["content"][-1]]}
        return messages, text


def messages_output(builder: ChatPromptBuilder) -> ChatPromptBuilder:
    """A copy of ``builder`` (every setting, and a subclass's overrides) whose ``build`` returns messages."""
    cls = type(builder)
    if not issubclass(cls, MessagesOutput):
        cls = type(f"{cls.__name__}Messages", (MessagesOutput, cls), {})
    clone = cls.__new__(cls)
    clone.__dict__.update(copy.copy(builder.__dict__))
    return clone


def render_messages(messages: list[dict[str, Any]]) -> str:
    """Chat messages as text (``role: content`` blocks), for trajectories."""
    def text(content: Any) -> str:
        if isinstance(content, str):
            return content
        return " ".join(part.get("text", f"[{part.get('type')}]") for part in content)

    return "\n".join(f"{m['role']}: {text(m['content'])}" for m in messages)


class ChatBackend(GenerationBackend):
    """Sends each prompt (a message list) to the chat endpoint, ``concurrency`` at a time.

    Stop strings are applied here, not sent: OpenAI's API drops the stop string from the response, and
    the action parser needs the closing ``</action>``. A request that fails for good becomes an empty
    response (an invalid action) and is counted, so one bad request does not lose an evaluation.
    """

    def __init__(self, client: ChatClient, *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.client = client
        self.concurrency = concurrency

    def _one(self, messages: list[dict[str, Any]], params: SamplingParams) -> GenerationOutput:
        try:
            result = self.client.chat(
                messages,
                temperature=0.0 if params.greedy else params.temperature,
                top_p=None if params.greedy or params.top_p == 1.0 else params.top_p,
                max_tokens=params.max_new_tokens,
                seed=params.seed,
            )
        except APIError as e:
            logger.warning("Prompt agent request failed: %s", e)
            return GenerationOutput(token_ids=[], logprobs=[], text="", finish_reason="error")
        text, stopped = truncate_at_stop(result.text, params.stop)
        return GenerationOutput(token_ids=[], logprobs=[], text=text, finish_reason="stop" if stopped else result.finish_reason)

    def generate(self, prompts: list[Any], params: SamplingParams) -> list[GenerationOutput]:
        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(pool.map(lambda messages: self._one(messages, params), prompts))


class _NoModule:
    """Stands in for the RLModule: the API holds the model; the prompt builder needs no tokenizer. It samples
    as an LLMRLModule does (:func:`~rllib_llm.core.rl_module.generate_for_batch` with its backend, the chat API)."""

    model = None
    tokenizer = None
    generation_backend: GenerationBackend | None = None

    def forward_exploration(self, batch: dict[str, Any]) -> dict[str, Any]:
        return generate_for_batch(self.generation_backend, batch)

    forward_inference = forward_exploration


class PromptAgentRunner(LLMEnvRunner):
    """LLMEnvRunner playing an API model (see module docstring): its module is a stand-in and its backend
    the chat API (:meth:`make_module`, :meth:`make_backend`); everything else is the base class's."""

    def __init__(self, *, config: Any, client: ChatClient, concurrency: int = 8, **kwargs: Any) -> None:
        self._chat_backend = ChatBackend(client, concurrency=concurrency)
        super().__init__(config=config, **kwargs)
        connectors = self._env_to_module.connectors
        builders = [i for i, c in enumerate(connectors) if isinstance(c, ChatPromptBuilder)]
        if not builders:
            raise ValueError(
                "The prompt agent needs a ChatPromptBuilder in the env-to-module pipeline (it builds the chat "
                f"messages); this config's pipeline has {[type(c).__name__ for c in connectors]}"
            )
        for i in builders:
            connectors[i] = messages_output(connectors[i])

    def make_module(self) -> None:
        self.module = _NoModule()

    def make_backend(self) -> ChatBackend:
        return self._chat_backend


def prompt_agent_config(
    *,
    env: str | None = None,
    env_config: dict | None = None,
    base: Any = None,
    max_tokens: int | None = None,
    max_episode_steps: int | None = None,
) -> Any:
    """The LLMConfig the prompt agent plays: a tuned example's (``base``: its env, memory and prompts),
    or the defaults for ``env`` (the env's template, a 3-step sliding-window memory)."""
    from rllib_llm.algorithms.config import LLMConfig

    if base is not None:
        config = base.copy(copy_frozen=False)
        if env is not None or env_config is not None:
            config.environment(env if env is not None else config.env, env_config=env_config or config.env_config)
    else:
        config = LLMConfig().environment(env, env_config=env_config or {})
        max_tokens = max_tokens or DEFAULT_MAX_TOKENS
    if max_tokens is not None:
        config.generation(max_new_tokens=max_tokens)
    # A chat API writes the whole reply (it cannot continue a prefilled one), so no response prefix.
    config.group_rollouts(response_prefix="")
    if max_episode_steps is not None:
        config.group_rollouts(max_episode_steps=max_episode_steps)
    return config


def evaluate_prompt_agent(
    config: Any,
    client: ChatClient,
    seeds: list[int],
    *,
    temperature: float | None = None,
    concurrency: int = 8,
) -> tuple[dict[str, Any], list]:
    """Plays one episode per seed (all in lock step, one request per active env and step) and returns
    ``(stats, episodes)``. Greedy (temperature 0) unless ``temperature`` is given, as ``evaluate`` is."""
    runner = PromptAgentRunner(config=config, client=client, concurrency=concurrency)
    try:
        sampling = None if temperature is None else {"temperature": temperature}
        episodes = runner.sample(seeds=seeds, explore=temperature is not None, sampling=sampling, group_size=1)
    finally:
        runner.stop()
    stats = {
        **rollout_stats(episodes),
        "api_requests": client.stats["requests"],
        "api_retries": client.stats["retries"],
        "api_failures": client.stats["failures"],
    }
    return stats, episodes
