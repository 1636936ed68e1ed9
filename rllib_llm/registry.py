"""One kind of registry for every plug-in point: envs, advantage estimators, policy losses, generation
backends, prompt templates.

A :class:`Registry` is a dict from name to entry with the three things each plug-in point needs: adding an
entry (:meth:`Registry.register`), entries given as ``"module:attribute"`` strings that are imported only when
used (a backend whose engine is a heavy optional dependency, as gymnasium's entry points), and one line for an
unknown name with the closest registered one (:meth:`Registry.lookup`).
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any


class Registry(dict):
    """Name -> entry for one ``kind`` of plug-in (``"generation backend"``, ``"advantage estimator"``, ...)."""

    def __init__(self, kind: str, entries: dict[str, Any] | None = None) -> None:
        super().__init__(entries or {})
        self.kind = kind

    def register(self, name: str, entry: Any) -> Any:
        """Adds (or replaces) ``name``; ``entry`` may be a ``"module:attribute"`` string, imported at
        :meth:`lookup`. Returns the entry."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        self[name] = entry
        return entry

    def lookup(self, name: str) -> Any:
        """The entry of ``name`` (a ``"module:attribute"`` string imported, once); an unknown name is a
        ValueError of one line naming the closest registered names."""
        if name not in self:
            raise ValueError(self.unknown(name))
        entry = self[name]
        if isinstance(entry, str) and ":" in entry:
            module, _, attribute = entry.partition(":")
            entry = getattr(importlib.import_module(module), attribute)
            self[name] = entry
        return entry

    def unknown(self, name: Any, elsewhere: str = "") -> str:
        """The line for a name that is not registered: the closest registered one and all of them."""
        return unknown_name_error(self.kind, name, sorted(self), elsewhere)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self)})"


def unknown_name_error(kind: str, name: Any, known: list[str], elsewhere: str = "") -> str:
    """One line for a name that is not registered: the closest registered one and all of them."""
    close = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {kind} {name!r}{hint}; registered: {', '.join(known) or 'none'}{elsewhere}"
