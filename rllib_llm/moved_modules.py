"""Old import paths of modules that moved, kept working for one release with a deprecation warning.

The run tooling moved under :mod:`rllib_llm.run` (``rllib_llm.cli`` -> ``rllib_llm.run.cli``, ...), the policy and
its samplers under :mod:`rllib_llm.core` (``rllib_llm.rl_module`` -> ``rllib_llm.core.rl_module``, ...): tuned
examples, scripts and checkpoints (whose specs name the module's class by its import path) written against
the old layout failed with ``ModuleNotFoundError``. A finder on
``sys.meta_path`` (installed by the package's ``__init__``) answers an old name with the module at its new
place, after RLlib's deprecation warning (``ray._common.deprecation.deprecation_warning``, as RLlib's own
moved APIs warn), so ``import rllib_llm.cli`` and ``from rllib_llm.cli import main`` keep working.
Remove the entries one release after 0.1.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

#: Old module name -> where it lives now.
MOVED: dict[str, str] = {
    "rllib_llm.cli": "rllib_llm.run.cli",
    "rllib_llm.resume": "rllib_llm.run.checkpoints",
    "rllib_llm.plots": "rllib_llm.run.plots",
    "rllib_llm.progress": "rllib_llm.run.progress",
    "rllib_llm.quiet": "rllib_llm.run.quiet",
    "rllib_llm.stopping": "rllib_llm.run.stopping",
    "rllib_llm.sweeps": "rllib_llm.run.sweeps",
    "rllib_llm.tracking": "rllib_llm.run.tracking",
    "rllib_llm.trajectory_recorder": "rllib_llm.run.trajectory_recorder",
    "rllib_llm.group_env_runner": "rllib_llm.core.group_env_runner",
    "rllib_llm.env_runner": "rllib_llm.core.single_agent_env_runner",
    "rllib_llm.multi_agent.env_runner": "rllib_llm.core.multi_agent_env_runner",
    "rllib_llm.rl_module": "rllib_llm.core.rl_module",
    "rllib_llm.models": "rllib_llm.core.models",
    "rllib_llm.vision": "rllib_llm.core.vision",
    "rllib_llm.multi_agent.envs": "rllib_llm.envs.multi_agent",
    "rllib_llm.multi_agent.envs.base": "rllib_llm.envs.multi_agent.base",
    "rllib_llm.multi_agent.envs.points24": "rllib_llm.envs.multi_agent.points24",
    "rllib_llm.multi_agent.envs.tictactoe": "rllib_llm.envs.multi_agent.tictactoe",
    "rllib_llm.multi_agent.pettingzoo_adapter": "rllib_llm.envs.multi_agent.pettingzoo_adapter",
    "rllib_llm.action_parsing": "rllib_llm.env_connectors.action_parsing",
    "rllib_llm.http_safety": "rllib_llm.http.safety",
    "rllib_llm.retry": "rllib_llm.http.retry",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of :data:`MOVED`; loading one warns and returns the module at its new place."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        from ray._common.deprecation import deprecation_warning

        deprecation_warning(old=f"import {spec.name}", new=f"import {MOVED[spec.name]}", error=False)
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module returned by :meth:`create_module` is the new one, already executed."""


def install() -> None:
    """Puts the finder first on ``sys.meta_path``, once: a moved package's old submodule names
    (``rllib_llm.multi_agent.envs.base``) would otherwise be found again on the old parent's new ``__path__``
    and load a second copy of the module. It answers only the names of :data:`MOVED`."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
