"""Memory modules: env-to-module connectors that render a short history block for each step's prompt.

This is what keeps the rollout step-independent: the prompt at step t is the current observation plus what
a memory chooses to keep, never the concatenated dialogue, so context stays nearly constant over 50-step
episodes. A memory keeps per-episode state in the episode's ``custom_data`` (so a new episode starts fresh
and states never leak between the envs of a group); it is fed every completed step once, in order.

Write your own by subclassing :class:`Memory` and implementing ``update`` and ``render`` (and
``init_state`` when the state is not a list). Built-ins: :class:`SlidingWindowMemory` (the default),
:class:`FullHistoryMemory`, :class:`KeyEventMemory` and, in :mod:`.summary`, ``SummaryMemory``.

Several memories can run in one pipeline: their blocks are joined in pipeline order (e.g. key events, then
the last 3 steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.columns import HISTORY_LENGTH, MEMORY

INVALID_ACTION = "(invalid)"


def observation_text(observation: Any) -> str:
    """The text part of an observation (plain text, or a dict with a ``text`` entry)."""
    if isinstance(observation, dict):
        return str(observation.get("text", ""))
    return str(observation)


class Step(NamedTuple):
    """One completed step, as memories see it. Text only: images never enter a memory's state."""

    #: 0-based index of the step in its episode (rendered 1-based, "[Step 1]").
    t: int
    #: Text of the observation the action was taken in.
    observation: str
    #: The parsed action (text inside ``<action>``), None when the response had none.
    action: str | None
    #: The env's reward (episodes record it unshaped: the invalid-action penalty is the Learner's).
    reward: float
    #: The env's info of the step's result.
    info: dict
    #: The full model response (with ``<think>``), when the env runner recorded it.
    response: str | None = None
    #: Text of the observation the step led to.
    next_observation: str = ""


def format_step(step: Step, *, reward: bool = False, response: bool = False) -> str:
    """One history line: ``[Step 3] observation: ... | action: ...`` (shared by the built-ins)."""
    if response and step.response is not None:
        did = f"response: {step.response}"
    else:
        did = f"action: {step.action if step.action is not None else INVALID_ACTION}"
    line = f"[Step {step.t + 1}] observation: {step.observation} | {did}"
    if reward:
        line += f" | reward: {step.reward:g}"
    milestone = step.info.get("milestone")
    if isinstance(milestone, str) and milestone:
        line += f" | milestone: {milestone}"
    return line


def _extra(episode: Any, key: str) -> list | None:
    return episode.get_extra_model_outputs(key) if key in episode.extra_model_outputs else None


class Memory(ConnectorV2):
    """Base memory connector. Adds to ``batch["memory"]`` / ``batch["history_length"]`` (one per episode).

    Args:
        name: Key of this memory's state in ``episode.custom_data`` (default: the class name). Give two
            memories of one class in a pipeline different names.
    """

    def __init__(
        self, input_observation_space=None, input_action_space=None, *, name: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._key = f"memory:{name or type(self).__name__}"

    # --- to implement --------------------------------------------------------------------------------

    def init_state(self) -> Any:
        """The state of a new episode."""
        return []

    def update(self, state: Any, observation: Any, action: str | None, reward: float, info: dict) -> Any:
        """The state after one more step; ``observation`` (text) is the one the action was taken in,
        ``reward`` the env's reward, ``info`` the env's info of the step's result."""
        raise NotImplementedError(f"{type(self).__name__} must implement update() (or update_step()).")

    def update_step(self, state: Any, step: Step) -> Any:
        """Like :meth:`update` with the full :class:`Step` record (index, response text, next observation).
        The built-ins override this one; a user memory usually overrides ``update``."""
        return self.update(state, step.observation, step.action, step.reward, step.info)

    def render(self, state: Any) -> str:
        """The history block for the prompt ('' for none: the template's no-history variant is used)."""
        raise NotImplementedError(f"{type(self).__name__} must implement render().")

    def history_length(self, state: Any) -> int:
        """How many past steps the rendered block covers (the ``{history_length}`` prompt slot)."""
        return len(state) if isinstance(state, list) else 0

    # --- connector plumbing --------------------------------------------------------------------------

    def state_of(self, episode: Any) -> Any:
        """Brings this episode's memory up to date with its completed steps and returns the state."""
        from rllib_llm.columns import RESPONSE_TEXT

        record = episode.custom_data.get(self._key)
        if record is None:
            record = episode.custom_data[self._key] = {"seen": 0, "state": self.init_state()}
        actions = episode.get_actions()
        if record["seen"] >= len(actions):
            return record["state"]
        observations = episode.get_observations()
        infos = episode.get_infos()
        rewards = episode.get_rewards()
        responses = _extra(episode, RESPONSE_TEXT)
        for t in range(record["seen"], len(actions)):
            step = Step(
                t=t,
                observation=observation_text(observations[t]),
                action=actions[t],
                reward=float(rewards[t]),
                info=infos[t + 1] or {},
                response=responses[t] if responses is not None else None,
                next_observation=observation_text(observations[t + 1]),
            )
            record["state"] = self.update_step(record["state"], step)
        record["seen"] = len(actions)
        return record["state"]

    def prepare(self, states: list[Any], rl_module: Any) -> None:
        """Batched work on the up-to-date states of all active episodes before rendering, with the module
        at hand (a no-op here; ``SummaryMemory`` summarizes here, in one generate call)."""

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        states = [self.state_of(episode) for episode in episodes]
        self.prepare(states, rl_module)
        blocks = [self.render(state) for state in states]
        lengths = [self.history_length(state) for state in states]
        previous = batch.get(MEMORY) or [""] * len(episodes)
        previous_lengths = batch.get(HISTORY_LENGTH) or [0] * len(episodes)
        batch[MEMORY] = [_join(before, block) for before, block in zip(previous, blocks, strict=True)]
        batch[HISTORY_LENGTH] = [max(a, b) for a, b in zip(previous_lengths, lengths, strict=True)]
        return batch


def _join(before: str, block: str) -> str:
    if before and block and not before.endswith("\n"):
        before += "\n"
    return before + block


def _block(header: str, lines: list[str]) -> str:
    return f"{header}\n" + "\n".join(lines) + "\n" if lines else ""


class SlidingWindowMemory(Memory):
    """The last ``window`` (observation, action) pairs: verl-agent's default memory, and ours."""

    def __init__(self, window: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if window < 0:
            raise ValueError(f"SlidingWindowMemory window must be >= 0, got {window}")
        self.window = window

    def update_step(self, state: list[Step], step: Step) -> list[Step]:
        return [*state, step][-self.window :] if self.window else []

    def render(self, state: list[Step]) -> str:
        return _block(f"Your last {len(state)} step(s):", [format_step(s) for s in state])


class FullHistoryMemory(Memory):
    """Every step since the episode began, the way RAGEN and Search-R1 concatenate the dialogue.

    For comparison only: the prompt grows linearly with the episode (the prompt builder's token budget
    then drops the oldest lines). ``include_responses`` shows the full responses (with ``<think>``)
    instead of just the actions.
    """

    def __init__(self, include_responses: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.include_responses = include_responses

    def update_step(self, state: list[Step], step: Step) -> list[Step]:
        return [*state, step]

    def render(self, state: list[Step]) -> str:
        return _block(
            f"All {len(state)} previous step(s):", [format_step(s, response=self.include_responses) for s in state]
        )


StepPredicate = Callable[[Step], bool]


def is_milestone(step: Step, min_abs_reward: float = 0.0) -> bool:
    """The default key-event test: an env reward above ``min_abs_reward`` in size, or a truthy
    ``info["milestone"]``."""
    return abs(step.reward) > min_abs_reward or bool(step.info.get("milestone"))


class KeyEventMemory(Memory):
    """Only the steps that mattered: non-zero env reward, ``info["milestone"]``, or ``predicate(step)``.

    Long episodes keep what a sliding window forgets (the key was picked up 30 steps ago) while the block
    stays bounded by ``max_events`` (the most recent ones are kept).

    Args:
        predicate: Extra test for a key event, called with the :class:`Step`; it is or-ed with the default
            one unless ``replace_default=True``.
        max_events: How many events to keep (None: all).
        min_abs_reward: Rewards up to this size are no event (Sokoban pays -0.1 every step: use 0.5 there).
    """

    def __init__(
        self,
        predicate: StepPredicate | None = None,
        max_events: int | None = 10,
        replace_default: bool = False,
        min_abs_reward: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_events is not None and max_events < 1:
            raise ValueError(f"KeyEventMemory max_events must be >= 1 or None, got {max_events}")
        if replace_default and predicate is None:
            raise ValueError("KeyEventMemory(replace_default=True) needs a predicate.")
        self.predicate = predicate
        self.max_events = max_events
        self.replace_default = replace_default
        self.min_abs_reward = min_abs_reward

    def is_key_event(self, step: Step) -> bool:
        custom = self.predicate is not None and bool(self.predicate(step))
        return custom if self.replace_default else custom or is_milestone(step, self.min_abs_reward)

    def update_step(self, state: list[Step], step: Step) -> list[Step]:
        if not self.is_key_event(step):
            return state
        state = [*state, step]
        return state[-self.max_events :] if self.max_events else state

    def render(self, state: list[Step]) -> str:
        return _block("Key events so far:", [format_step(s, reward=True) for s in state])
