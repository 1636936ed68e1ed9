"""Prompt building: template + memory + current observation -> chat messages -> prompt token ids.

:class:`ChatPromptBuilder` is the last env-to-module piece. It fills a template (see :mod:`.templates` for
the slots and the built-in per-env templates), applies the model's chat template, keeps the prompt within
a token budget, and writes ``batch["prompt_ids"]`` (what the env runner generates from), ``prompt_text``
(the user message) and ``images`` (the current observation's image or None).

Multimodal: for an observation ``{"text": ..., "image": uint8 HxWx3}`` whose tokenizer (or processor) has
an image-aware chat template, the user message is ``[{"type": "image"}, {"type": "text", "text": ...}]``,
so ``prompt_ids`` hold the model's image placeholder (e.g. Qwen2-VL's ``<|vision_start|><|image_pad|>
<|vision_end|>``, one per image) and ``batch["images"][i]`` holds the pixels. A VL backend passes both, e.g.
vLLM ``{"prompt_token_ids": ids, "multi_modal_data": {"image": PIL.Image.fromarray(img)}}``, which expands
the placeholder to the image's patch tokens itself (see notes/memory.md).
"""

from __future__ import annotations

import logging
from typing import Any

from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.columns import (
    FEW_SHOT_KEY,
    HISTORY_LENGTH,
    IMAGES,
    MEMORY,
    PROMPT_IDS,
    PROMPT_TEXT,
    RESPONSE_PREFIX_KEY,
    TASK_KEY,
    TEMPLATE_KEY,
)
from rllib_llm.env_connectors.memory import observation_text
from rllib_llm.env_connectors.templates import THINK_ACTION_FORMAT, PromptTemplate, resolve_template
from rllib_llm.metrics import NUM_PROMPTS_TRUNCATED

logger = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = "You are an agent acting in an environment. Answer with an action in <action></action> tags."
OMITTED = "(earlier history omitted)\n"


class _Slots(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(f"Prompt template uses slot {{{key}}}, which is not filled; available: {sorted(self)}")


def format_available_actions(actions: list[str] | None) -> str:
    """The ``{available_actions}`` slot: comma-joined, as in verl-agent's ``[{available_actions}]``."""
    return ", ".join(actions or [])


def format_admissible_actions(actions: list[str] | None) -> str:
    """The ``{admissible_actions}`` slot: each action quoted, one per line, as verl-agent lists ALFWorld's
    (``help`` left out, as there)."""
    return "\n ".join(f"'{action}'" for action in actions or [] if action != "help")


def fill_template(template: str, **slots: Any) -> str:
    """``template.format`` with a clear error naming a missing slot."""
    return template.format_map(_Slots(slots))


def render_chat(tokenizer: Any, messages: list[dict[str, Any]]) -> str:
    """``messages`` through the chat template, with the generation prompt, as text (a VL processor, which
    wraps its tokenizer, renders like a plain tokenizer)."""
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def encode_texts(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """The ids of each rendered prompt, in one tokenizer call (the fast tokenizers encode a batch at once)."""
    if not texts:
        return []
    return [list(ids) for ids in getattr(tokenizer, "tokenizer", tokenizer)(texts, add_special_tokens=False)["input_ids"]]


def encode_chat(tokenizer: Any, messages: list[dict[str, Any]]) -> list[int]:
    """Prompt ids of ``messages`` with the generation prompt (:func:`render_chat`, then the tokenizer)."""
    return encode_texts(tokenizer, [render_chat(tokenizer, messages)])[0]


def user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last (user) message, whose content is a string or ``[image, text]`` parts."""
    content = messages[-1]["content"]
    return content if isinstance(content, str) else content[-1]["text"]


def response_prefix_ids(tokenizer: Any, prefix: str) -> list[int]:
    """The ids of a prefilled reply start, appended after the generation prompt (none for "")."""
    if not prefix:
        return []
    return list(getattr(tokenizer, "tokenizer", tokenizer)(prefix, add_special_tokens=False)["input_ids"])


def supports_image_content(tokenizer: Any) -> bool:
    """Whether the chat template understands ``{"type": "image"}`` content parts (VL processors and
    templates that mention images do; a text-only template would print the list)."""
    if hasattr(tokenizer, "image_processor"):
        return True
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = " ".join(template.values())
    return isinstance(template, str) and "image" in template


def truncate_ids(ids: list[int], budget: int, head_fraction: float = 0.25) -> list[int]:
    """At most ``budget`` ids: the first ``head_fraction`` (system prompt, task) and the rest from the end
    (current observation, answer format, generation prompt); the middle goes."""
    if len(ids) <= budget:
        return ids
    head = int(budget * head_fraction)
    return ids[:head] + ids[len(ids) - (budget - head) :]


class _Budget:
    """Shared by the prompt builder and :class:`TruncatePrompt`: the budget, warnings and the metric.

    The first cut of each kind warns; later ones log at debug level (and count in the metric), so a
    50-step rollout does not print 50 warnings.
    """

    def __init__(self, max_prompt_tokens: int) -> None:
        if max_prompt_tokens < 16:
            raise ValueError(f"max_prompt_tokens must be >= 16, got {max_prompt_tokens}")
        self.max_prompt_tokens = max_prompt_tokens
        self.warned: set[str] = set()
        self.count = 0

    def report(self, kind: str, message: str, *args: Any) -> None:
        self.count += 1
        level = logging.DEBUG if kind in self.warned else logging.WARNING
        self.warned.add(kind)
        logger.log(level, message + " Raise max_prompt_tokens or keep less memory to avoid this.", *args)

    def log_metric(self, metrics: Any, before: int) -> None:
        if metrics is not None:
            metrics.log_value(NUM_PROMPTS_TRUNCATED, self.count - before, reduce="sum")


class ChatPromptBuilder(ConnectorV2):
    """Writes ``batch["prompt_ids"]`` (and ``prompt_text``, ``images``) for each episode's next step.

    Args:
        template: A registered template name (:data:`~.templates.TEMPLATES`), a format string, a
            ``{"history", "no_history"}`` dict or a PromptTemplate. None: the episode's template
            (``custom_data["prompt_template"]``: the config's ``prompt_template`` or the env's), which may
            itself be any of these. The no-history variant is used while the memory block is empty.
        system_prompt: The system message. None: the template's (``""`` there: none), else
            :data:`DEFAULT_SYSTEM_PROMPT`; "": no system message.
        output_format: Fills the templates' ``{output_format}`` slot (default: think, then act).
        max_prompt_tokens: Token budget. A longer prompt drops its oldest memory lines, then the few-shot
            examples, then its middle tokens, warning: never an overflow error.
        multimodal: Put image observations in the messages as content parts: None (auto: when the
            tokenizer supports it), True or False.
    """

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        template: PromptTemplate | str | dict | None = None,
        system_prompt: str | None = None,
        output_format: str = THINK_ACTION_FORMAT,
        max_prompt_tokens: int = 2048,
        multimodal: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.template = resolve_template(template) if template is not None else None
        self.system_prompt = system_prompt
        self.output_format = output_format
        self.budget = _Budget(max_prompt_tokens)
        self.multimodal = multimodal
        self._warned_no_image = False
        self._prefix_ids: dict[tuple[int, str], list[int]] = {}  # (id(tokenizer), prefix) -> its ids

    @property
    def max_prompt_tokens(self) -> int:
        return self.budget.max_prompt_tokens

    # --- messages ------------------------------------------------------------------------------------

    def template_of(self, episode: Any) -> PromptTemplate:
        return self.template or resolve_template(episode.custom_data[TEMPLATE_KEY])

    def slots(self, episode: Any, memory: str, history_length: int) -> dict[str, Any]:
        """The values of every template slot for the episode's next step."""
        info = episode.get_infos(-1) or {}
        step_count = len(episode.get_actions())
        return {
            "task_description": episode.custom_data.get(TASK_KEY, ""),
            "step_count": step_count,
            "current_step": step_count + 1,
            "history_length": history_length,
            "action_history": memory,
            "memory": memory,
            "current_observation": observation_text(episode.get_observations(-1)),
            "available_actions": format_available_actions(info.get("available_actions")),
            "admissible_actions": format_admissible_actions(info.get("available_actions")),
            "output_format": self.output_format,
            **(info.get("prompt_slots") or {}),
        }

    def messages(
        self, episode: Any, memory: str, history_length: int, *, few_shot: bool = True, image: bool = False
    ) -> list[dict[str, Any]]:
        """System message, few-shot pairs (no-history variant), then this step's user message; with
        ``image``, the user content is ``[{"type": "image"}, {"type": "text", ...}]``."""
        template = self.template_of(episode)
        slots = self.slots(episode, memory, history_length)
        system = next((s for s in (self.system_prompt, template.system) if s is not None), DEFAULT_SYSTEM_PROMPT)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for shot_observation, shot_response in (episode.custom_data.get(FEW_SHOT_KEY) or []) if few_shot else []:
            shot = {**slots, "current_observation": shot_observation, "memory": "", "action_history": ""}
            shot.update(history_length=0, step_count=0, current_step=1)
            messages.append({"role": "user", "content": fill_template(template.no_history, **shot)})
            messages.append({"role": "assistant", "content": shot_response})
        user = fill_template(template.pick(bool(memory.strip())), **slots)
        content = [{"type": "image"}, {"type": "text", "text": user}] if image else user
        messages.append({"role": "user", "content": content})
        return messages

    def _wants_image(self, tokenizer: Any, episode: Any) -> bool:
        if self.multimodal is False or _image_of(episode.get_observations(-1)) is None:
            return False
        if self.multimodal or supports_image_content(tokenizer):
            return True
        if not self._warned_no_image:
            self._warned_no_image = True
            logger.warning(
                "Observations have images but the tokenizer's chat template has no image support: prompts are "
                "text only (the images are still in batch['images']). Use a VL processor or multimodal=True."
            )
        return False

    # --- ids within the budget -----------------------------------------------------------------------

    def build(self, tokenizer: Any, episode: Any, memory: str, history_length: int) -> tuple[list[int], str]:
        """Prompt ids within ``max_prompt_tokens`` and the user message text (as built before a last-resort
        cut of the ids). ``{history_length}`` keeps the memory's count when only some lines are dropped."""
        budget = self.max_prompt_tokens
        image = self._wants_image(tokenizer, episode)
        prefix = self.prefix_ids(tokenizer, episode)

        def attempt(memory_kept: str, length: int, few_shot: bool = True) -> tuple[list[int], str]:
            messages = self.messages(episode, memory_kept, length, few_shot=few_shot, image=image)
            return encode_chat(tokenizer, messages) + prefix, user_text(messages)

        ids, text = attempt(memory, history_length)
        if len(ids) <= budget:
            return ids, text
        full = len(ids)
        lines = memory.splitlines(keepends=True)
        # Fewest oldest lines to drop (binary search: fewer lines, shorter prompt); all of them = no memory.
        low, high = 1, len(lines)
        while low < high:
            mid = (low + high) // 2
            if len(attempt(OMITTED + "".join(lines[mid:]), history_length)[0]) <= budget:
                high = mid
            else:
                low = mid + 1
        if lines and low < len(lines):
            self.budget.report(
                "memory",
                "Prompt of %d tokens over max_prompt_tokens=%d: dropped the %d oldest memory line(s).",
                full,
                budget,
                low,
            )
            return attempt(OMITTED + "".join(lines[low:]), history_length)
        ids, text = attempt("", 0)
        if len(ids) <= budget:
            self.budget.report(
                "memory", "Prompt of %d tokens over max_prompt_tokens=%d: dropped the whole memory.", full, budget
            )
            return ids, text
        ids, text = attempt("", 0, few_shot=False)
        if len(ids) <= budget:
            self.budget.report(
                "few-shot",
                "Prompt of %d tokens over max_prompt_tokens=%d: dropped memory and few-shot examples.",
                full,
                budget,
            )
            return ids, text
        self.budget.report(
            "cut",
            "Prompt of %d tokens over max_prompt_tokens=%d even without memory and few-shot examples: cut %d tokens "
            "from its middle.",
            full,
            budget,
            len(ids) - budget,
        )
        return truncate_ids(ids, budget), text

    def prefix_ids(self, tokenizer: Any, episode: Any) -> list[int]:
        """The ids of the episode's prefilled reply start (``response_prefix``), tokenized once per string."""
        prefix = episode.custom_data.get(RESPONSE_PREFIX_KEY, "")
        key = (id(tokenizer), prefix)
        if key not in self._prefix_ids:
            self._prefix_ids[key] = response_prefix_ids(tokenizer, prefix)
        return self._prefix_ids[key]

    def build_all(self, tokenizer: Any, episodes: list, memories: list[str], lengths: list[int]) -> list[tuple[list[int], str]]:
        """:meth:`build` for every episode, with the common case batched: every full prompt is rendered, the
        texts are encoded in one tokenizer call, and only a prompt over the budget goes through
        :meth:`build`'s cuts. A subclass with its own ``build`` (the prompt agent's returns messages) gets it
        called for each episode, as before."""
        if type(self).build is not ChatPromptBuilder.build:
            return [self.build(tokenizer, *args) for args in zip(episodes, memories, lengths, strict=True)]
        rendered = []
        for episode, memory, length in zip(episodes, memories, lengths, strict=True):
            messages = self.messages(episode, memory, length, image=self._wants_image(tokenizer, episode))
            rendered.append((render_chat(tokenizer, messages), user_text(messages)))
        built = []
        for i, ids in enumerate(encode_texts(tokenizer, [text for text, _ in rendered])):
            ids += self.prefix_ids(tokenizer, episodes[i])
            fits = len(ids) <= self.max_prompt_tokens
            built.append((ids, rendered[i][1]) if fits else self.build(tokenizer, episodes[i], memories[i], lengths[i]))
        return built

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        memories = batch.get(MEMORY) or [""] * len(episodes)
        lengths = batch.get(HISTORY_LENGTH) or [0] * len(episodes)
        before = self.budget.count
        built = self.build_all(rl_module.tokenizer, list(episodes), list(memories), list(lengths))
        self.budget.log_metric(metrics, before)
        batch[PROMPT_IDS] = [ids for ids, _ in built]
        batch[PROMPT_TEXT] = [text for _, text in built]
        batch[IMAGES] = [_image_of(ep.get_observations(-1)) for ep in episodes]
        return batch


def _image_of(observation: Any) -> Any:
    return observation.get("image") if isinstance(observation, dict) else None


class TruncatePrompt(ConnectorV2):
    """Cuts ``batch["prompt_ids"]`` to ``max_prompt_tokens`` (head and tail kept, see :func:`truncate_ids`)
    with a warning: a safety net after a custom prompt builder (ChatPromptBuilder keeps its own budget)."""

    def __init__(
        self, input_observation_space=None, input_action_space=None, *, max_prompt_tokens: int = 2048, **kwargs: Any
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.budget = _Budget(max_prompt_tokens)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        budget, before = self.budget.max_prompt_tokens, self.budget.count
        for i, ids in enumerate(batch[PROMPT_IDS]):
            if len(ids) > budget:
                self.budget.report(
                    "cut",
                    "Prompt of %d tokens over max_prompt_tokens=%d: cut %d tokens from its middle.",
                    len(ids),
                    budget,
                    len(ids) - budget,
                )
                batch[PROMPT_IDS][i] = truncate_ids(list(ids), budget)
        self.budget.log_metric(metrics, before)
        return batch
