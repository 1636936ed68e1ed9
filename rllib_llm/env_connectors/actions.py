"""Module-to-env: the reply text -> the env's action, as a ConnectorV2 a user can swap.

The EnvRunners generate a reply per active episode, then run the config's module-to-env pipeline on
``batch["response_text"]``; :class:`ParseActions` (the default pipeline, :func:`default_module_to_env`) writes
``batch["actions"]`` (RLlib's column), one env action per episode: the text inside the last
``<action>...</action>`` pair of the response prefix + reply (``None``: no parseable action, an invalid
action), or the whole reply for envs that take raw text (``action_format = "raw"``, e.g. a search env whose
reply is a tool call). Another projection -- verl-agent's substring match against the admissible actions,
JSON tool calls -- is ``ParseActions(parser=fn)``::

    config.env_runners(module_to_env_connector=lambda env, spaces: [ParseActions(parser=my_parser)])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.rllib.connectors.connector_v2 import ConnectorV2

from rllib_llm.columns import ACTION_FORMAT_KEY, ACTIONS, RESPONSE_PREFIX_KEY, RESPONSE_TEXT
from rllib_llm.env_connectors.action_parsing import parse_action


class ParseActions(ConnectorV2):
    """``batch["response_text"]`` -> ``batch["actions"]`` with ``parser(prefix + reply) -> action | None``."""

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        parser: Callable[[str], Any] = parse_action,
        **kwargs: Any,
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.parser = parser

    def action(self, episode: Any, text: str) -> Any:
        """One episode's env action from its reply."""
        reply = episode.custom_data.get(RESPONSE_PREFIX_KEY, "") + text
        return reply if episode.custom_data.get(ACTION_FORMAT_KEY) == "raw" else self.parser(reply)

    def __call__(self, *, rl_module, batch, episodes, explore=None, shared_data=None, metrics=None, **kwargs):
        batch[ACTIONS] = [self.action(ep, text) for ep, text in zip(episodes, batch[RESPONSE_TEXT], strict=True)]
        return batch


def default_module_to_env(env: Any = None, spaces: Any = None) -> list[ConnectorV2]:
    """The default module-to-env pipeline: ``[ParseActions()]``."""
    return [ParseActions()]
