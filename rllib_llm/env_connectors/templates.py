"""Prompt templates per env, as data: a history variant and a no-history variant (step 0, empty memory).

Like verl-agent's ``*_TEMPLATE`` / ``*_TEMPLATE_NO_HIS`` pairs, but ours and for our envs. Templates are
``str.format`` strings; the slots are those of the seed's WebShop prompt plus a few:

- ``{task_description}`` (the env's per-episode instruction), ``{step_count}`` (steps taken so far),
  ``{current_step}`` (``step_count + 1``), ``{history_length}`` (steps the memory covers),
  ``{action_history}`` / ``{memory}`` (the memory block), ``{current_observation}``,
  ``{available_actions}`` (comma-joined, so templates write ``[{available_actions}]``),
  ``{admissible_actions}`` (each quoted, one per line: verl-agent's ALFWorld and WebShop lists);
- ``{output_format}``: the answer-format instruction (:data:`THINK_ACTION_FORMAT` by default, set on the
  prompt builder), so one template serves think-then-act and act-only prompting;
- any key the env puts in ``info["prompt_slots"]`` (NumberLine: ``max_position``; Sokoban: ``legend``; AppWorld: ``supervisor_name``, ``supervisor_email``, ``supervisor_phone``;
  the Points games: ``game``, ``target``, ``operators``, ``face_rule``, ``example``; Search: ``max_turns``).

Pick one with ``ChatPromptBuilder(template="Sokoban")`` or, since the env runner passes the config's template
through ``episode.custom_data``, with ``config.group_rollouts(prompt_template="Sokoban")``. Add your own with
:func:`register_template`; a plain string or ``{"history": ..., "no_history": ...}`` dict works anywhere a
template is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rllib_llm.registry import Registry

THINK_ACTION_FORMAT = (
    "First reason step by step about the current situation inside <think> </think> tags. Then give exactly "
    "one action for this step inside <action> </action> tags."
)
ACTION_ONLY_FORMAT = "Give exactly one action for this step inside <action> </action> tags."


def verl_agent_format(what_to_weigh: str = "") -> str:
    """verl-agent's think-then-act instruction, word for word but for ``what_to_weigh`` (its per-env hint on
    what to reason about)."""
    about = f", {what_to_weigh}" if what_to_weigh else ""
    return (f"You should first reason step-by-step about the current situation{about}. This reasoning process MUST "
            "be enclosed within <think> </think> tags.\nOnce you've finished your reasoning, you should choose an "
            "admissible action for current step and present it within <action> </action> tags.")


@dataclass(frozen=True)
class PromptTemplate:
    """A user-message template pair; ``system`` (optional) is the system message that goes with it."""

    history: str
    no_history: str
    #: None: the prompt builder's default system message; "": none (the model's chat template adds its own).
    system: str | None = None

    @classmethod
    def from_any(cls, value: PromptTemplate | str | dict[str, Any]) -> PromptTemplate:
        """A template from itself, a single format string (used for both variants) or a dict."""
        if isinstance(value, PromptTemplate):
            return value
        if isinstance(value, str):
            return cls(history=value, no_history=value)
        if isinstance(value, dict):
            unknown = set(value) - {"history", "no_history", "system"}
            if unknown or "history" not in value:
                raise ValueError(
                    f"A template dict needs 'history' (and optionally 'no_history', 'system'); got {sorted(value)}"
                )
            return cls(value["history"], value.get("no_history", value["history"]), value.get("system"))
        raise TypeError(f"A prompt template must be a str, a dict or a PromptTemplate, got {type(value).__name__}")

    def pick(self, has_history: bool) -> str:
        return self.history if has_history else self.no_history


_HISTORY = "Before this step you took {step_count} step(s); your memory below covers {history_length} of them.\n{action_history}"


def _pair(intro: str, current: str, answer: str = "{output_format}", system: str | None = None) -> PromptTemplate:
    """The two variants of one env's prompt: they differ only by the history paragraph."""
    return PromptTemplate(
        history=f"{intro}\n{_HISTORY}\n{current}\n{answer}",
        no_history=f"{intro}\n{current}\n{answer}",
        system=system,
    )


_STEP = "You are now at step {current_step}. "
_ADMISSIBLE = "Your admissible actions are [{available_actions}]."
_POINTS = _pair(
    "You are playing {game}. Your task: {task_description} Write one formula that uses each card's number "
    "exactly once, with only the operators {operators} and parentheses, so that it equals {target}. {face_rule}",
    _STEP + "Current observation: {current_observation}\nYour action is the formula, e.g. <action>{example}</action>.",
)

#: Built-in templates, keyed by env alias ("generic" fits any :class:`~rllib_llm.envs.base.TextEnv`).
TEMPLATES = Registry("prompt template", {
    "generic": _pair(
        "You are an agent acting in a text environment. Your task: {task_description}",
        _STEP + "Current observation:\n{current_observation}\n" + _ADMISSIBLE,
    ),
    "NumberLine": _pair(
        "You move a pointer along a number line with positions 0 to {max_position}. Your task: {task_description} "
        "The action '+' moves the pointer up by 1 and '-' moves it down by 1.",
        _STEP + "Current observation: {current_observation}\n" + _ADMISSIBLE,
    ),
    # verl-agent's Sokoban prompt (agent_system/environments/prompts/sokoban.py) with our legend: the whole
    # instruction in the user turn, no system message of ours (the model's chat template adds its default).
    "Sokoban": _pair(
        "You are an expert agent operating in the Sokoban environment.\n\n# Symbols and Their Meaning\n{legend}.\n\n"
        "# Your Goal\nYour goal is to push all the boxes onto the target spots. Once all boxes are on the targets, "
        "you win!\n\n# Rules\nYou can only push boxes. You can't pull them, so plan ahead to avoid getting stuck.\n"
        "You can't walk through or push boxes into walls.\nTo avoid traps, do not push boxes into corners or "
        "against walls where they can't be moved again.\n\n# Current Step",
        _STEP + "Your current observation is:\n{current_observation}\nYour admissible actions are [{available_actions}].",
        "Now it's your turn to make a move (choose ONE action only for the current step).\n"
        + verl_agent_format("observe the positions of boxes and targets, plan a path to push a box toward a target, "
                            "and avoid traps like corners or walls"),
        system="",
    ),
    "EZPoints": _POINTS,
    "Points24": _POINTS,
    "Blackjack": _pair(
        "You are playing Blackjack against a dealer. Your task: {task_description} Get a hand total closer to 21 "
        "than the dealer without going over. Aces count 1 or 11, face cards 10. 'hit' takes another card; 'stand' "
        "ends your turn and the dealer draws until reaching 17.",
        _STEP + "Current observation: {current_observation}\n" + _ADMISSIBLE,
    ),
    # verl-agent's WebShop prompt: admissible actions one per line, no example action to copy.
    "WebShop": _pair(
        "You are an expert autonomous agent operating in the WebShop e-commerce environment.\nYour task is to: "
        "{task_description}.",
        _STEP + "Your current observation is: {current_observation}.\nYour admissible actions of the current "
        "situation are:\n[\n{admissible_actions}\n].",
        "Now it's your turn to take one action for the current step.\n"
        + verl_agent_format("think carefully which admissible action best advances the shopping goal"),
        system="",
    ),
    # verl-agent's ALFWorld prompt: admissible actions quoted, one per line.
    "ALFWorld": _pair(
        "You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task_description}",
        _STEP + "Your current observation is: {current_observation}\nYour admissible actions of the current "
        "situation are: [{admissible_actions}].",
        "Now it's your turn to take an action.\n" + verl_agent_format(),
        system="",
    ),
    "AppWorld": _pair(
        "I am your supervisor, {supervisor_name} (email {supervisor_email}, phone {supervisor_phone}), and you are "
        "an AI assistant that completes my day-to-day tasks autonomously by writing Python code that the "
        "environment executes. Call the apps' APIs through the `apis` object (start with "
        "apis.api_docs.show_app_descriptions()) and print what you need to see. When the task is done, call "
        "apis.supervisor.complete_task() (with answer=... if the task asks a question).\nTask: {task_description}",
        _STEP + "Current observation:\n{current_observation}",
        "Reason inside <think> </think> tags, then write the code for this step inside <action> </action> tags.",
    ),
    # Tool calling (verl-agent's Search prompt): the env parses the raw reply, so the answer format is the
    # env's own tags, not <action>; and no system message of ours, whose <action> rule would contradict it.
    "Search": _pair(
        "You are an expert agent tasked with answering the given question step-by-step.\nYour question: "
        "{task_description}",
        "This is turn {current_step} of {max_turns}. Current observation:\n{current_observation}",
        "Now it's your turn to respond for the current step.\nYou should first conduct a reasoning process. This "
        "process MUST be enclosed within <think> </think> tags.\nAfter completing your reasoning, choose only one "
        "of the following actions (do not perform both):\n(1) If you find you lack some knowledge, you can call a "
        "search engine to get more external information using format: <search> your query </search>.\n(2) If you "
        "have enough knowledge to answer the question confidently, provide your final answer within <answer> "
        "</answer> tags, without detailed illustrations. For example, <answer>Beijing</answer>.",
        system="",
    ),
})


def register_template(name: str, template: PromptTemplate | str | dict[str, Any]) -> PromptTemplate:
    """Adds (or replaces) the template called ``name``; returns it as a :class:`PromptTemplate`."""
    return TEMPLATES.register(name, PromptTemplate.from_any(template))


def get_template(name: str) -> PromptTemplate:
    """The registered template ``name`` (case-insensitive), with the known names in the error."""
    if name in TEMPLATES:
        return TEMPLATES[name]
    by_lower = {key.lower(): value for key, value in TEMPLATES.items()}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    raise KeyError(f"No prompt template {name!r}; registered: {sorted(TEMPLATES)}")


def resolve_template(value: PromptTemplate | str | dict[str, Any]) -> PromptTemplate:
    """A template from a registered name, a format string, a dict or a PromptTemplate.

    A string is a name when it is registered (names have no ``{slots}``), else a format string: so the
    env's own ``prompt_template`` strings keep working as single-variant templates.
    """
    if isinstance(value, str) and "{" not in value:
        return get_template(value)
    return PromptTemplate.from_any(value)
