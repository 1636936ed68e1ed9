"""Old import paths of modules that moved, kept working for one release with a deprecation warning.

The run tooling moved under :mod:`rllib_llm.run` (``rllib_llm.cli`` -> ``rllib_llm.run.cli``, ...): tuned
examples and scripts written against the old layout failed with ``ModuleNotFoundError``. A finder on
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
    """Puts the finder on ``sys.meta_path`` once."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
