"""Declared settings: each config field written once, where the algorithm that reads it lives.

A :class:`Setting` holds a field's name, default, what it means and what values it takes. The module that
owns an idea declares its fields (GiGPO's step groups in ``gigpo.py``, the critic in ``ppo.py``, dynamic
sampling in ``dynamic_sampling.py``, ...) with :func:`declare`, and everything else comes from that one
declaration: the default every :class:`~rllib_llm.algorithms.config.LLMConfig` starts from, the keyword
arguments of its builder methods (``.training(...)``, ``.group_rollouts(...)``, ``.evaluation(...)``, their
signatures included, so ``--set`` and an IDE see them), the validation message of a bad value, and the
reference table (``rllib-llm settings``, notes/settings.md). Rules between fields (``updates_per_rollout``
needs ``async_rollouts``) are declared by their owner too, with :func:`declare_rule`.

Every config carries every declared field (an estimator can be switched on any config, e.g.
``GRPOConfig().training(advantage_estimator="gigpo")``); an algorithm's config sets its own defaults.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ray.rllib.algorithms.algorithm_config import NotProvided

#: ``check(name, value)`` -> the error line for a bad value, or None.
Check = Callable[[str, Any], "str | None"]
#: ``rule(config)`` -> error lines about several fields at once.
Rule = Callable[[Any], list[str]]


@dataclass(frozen=True)
class Setting:
    """One config field: ``builder`` is the method that sets it (``training``, ``group_rollouts``,
    ``evaluation``); ``owner`` the module that declared it (filled by :func:`declare`)."""

    name: str
    default: Any
    doc: str
    check: Check | None = None
    builder: str = "training"
    owner: str = ""


_SETTINGS: dict[str, Setting] = {}
_RULES: list[tuple[str, Rule]] = []
_BUILDERS: dict[str, list[Callable]] = {}


def declare(owner: str, *settings: Setting) -> None:
    """Registers ``settings`` as ``owner``'s (a module name). A name declared twice is a ValueError;
    declaring the same settings again from the same owner (a module reloaded) replaces them."""
    for setting in settings:
        known = _SETTINGS.get(setting.name)
        if known is not None and known.owner != owner:
            raise ValueError(f"setting {setting.name!r} is declared by {known.owner} already")
        _SETTINGS[setting.name] = Setting(**{**vars(setting), "owner": owner})
    _refresh_signatures({s.builder for s in settings})


def forget(owner: str) -> None:
    """Removes ``owner``'s settings and rules (a plug-in unloaded, a test's module)."""
    gone = [s for s in _SETTINGS.values() if s.owner == owner]
    for setting in gone:
        del _SETTINGS[setting.name]
    _RULES[:] = [(o, rule) for o, rule in _RULES if o != owner]
    _refresh_signatures({s.builder for s in gone})


def _refresh_signatures(builders: set[str]) -> None:
    for builder in builders:
        for fn in _BUILDERS.get(builder, []):
            fn.__signature__ = _signature(fn, builder)


def declare_rule(owner: str, rule: Rule) -> None:
    """Registers a check over several fields (``rule(config)`` -> error lines), run by ``validate()``."""
    if (owner, rule) not in _RULES:
        _RULES.append((owner, rule))


def declared(builder: str | None = None) -> list[Setting]:
    """Every declared setting (of one builder method), in declaration order."""
    return [s for s in _SETTINGS.values() if builder is None or s.builder == builder]


def set_defaults(config: Any) -> None:
    """Gives ``config`` every declared field's default (a copy: a dict default is not shared)."""
    for setting in _SETTINGS.values():
        setattr(config, setting.name, copy.deepcopy(setting.default))


def take(config: Any, builder: str, values: dict[str, Any]) -> dict[str, Any]:
    """Sets the fields of ``values`` that ``builder`` declares (NotProvided skipped); returns the rest."""
    rest = {}
    for name, value in values.items():
        setting = _SETTINGS.get(name)
        if setting is None or setting.builder != builder:
            rest[name] = value
        elif value is not NotProvided:
            setattr(config, name, value)
    return rest


def setting_errors(config: Any) -> list[str]:
    """One line per field whose value its check refuses, then the rules' lines."""
    errors = []
    for setting in _SETTINGS.values():
        if setting.check is not None:
            message = setting.check(setting.name, getattr(config, setting.name))
            if message:
                errors.append(message)
    for _, rule in _RULES:
        errors.extend(rule(config))
    return errors


def unknown_argument_error(config: Any, builder: str, names: Iterable[str], known: Iterable[str]) -> TypeError:
    """Python's own message for an unexpected keyword (which the CLI turns into one line with the allowed
    fields), plus the closest known names."""
    name = next(iter(names))
    close = difflib.get_close_matches(name, sorted(set(known)), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return TypeError(f"{type(config).__name__}.{builder}() got an unexpected keyword argument '{name}'{hint}")


def settings_builder(builder: str) -> Callable[[Callable], Callable]:
    """Marks a builder method whose keyword arguments include the declared settings of ``builder``: its
    signature (``inspect.signature``, ``--set``, IDEs) lists them, kept current as modules declare more."""

    def mark(fn: Callable) -> Callable:
        _BUILDERS.setdefault(builder, []).append(fn)
        fn.__own_signature__ = inspect.signature(fn)
        fn.__signature__ = _signature(fn, builder)
        return fn

    return mark


def _signature(fn: Callable, builder: str) -> inspect.Signature:
    own = fn.__own_signature__
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    taken = {p.name for p in params}
    params += [
        inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=NotProvided)
        for s in declared(builder)
        if s.name not in taken
    ]
    params += [p for p in own.parameters.values() if p.kind is p.VAR_KEYWORD]
    return own.replace(parameters=params)


# --- checks: each returns the error line for a bad value, naming the field and what it takes ----------


def number(
    low: float | None = None,
    high: float | None = None,
    *,
    optional: bool = False,
    low_open: bool = False,
    integer: bool = False,
) -> Check:
    """A finite number (an int with ``integer``) >= low (> low with ``low_open``) and <= high; None too with
    ``optional``."""

    def check(name: str, value: Any) -> str | None:
        if optional and value is None:
            return None
        kind = int if integer else (int, float)
        ok = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (low is None or (value > low if low_open else value >= low)) and (high is None or value <= high)
        if ok:
            return None
        left = "(" if low_open else "["
        span = f"in {left}{low}, {high}]" if high is not None else f"{'>' if low_open else '>='} {low}"
        what = ("an int" if integer else "a number") + (" or None" if optional else "")
        return f"{name} must be {span} ({what}), got {value!r}"

    return check


def choice(allowed: Iterable[str] | Callable[[], Iterable[str]]) -> Check:
    """One of ``allowed`` (a registry's names: pass the dict or a function, read when checked)."""

    def check(name: str, value: Any) -> str | None:
        names = allowed() if callable(allowed) else allowed
        names = tuple(sorted(names)) if isinstance(names, dict) else tuple(names)
        return None if value in names else f"{name} must be one of {names}, got {value!r}"

    return check


def flag(optional: bool = False) -> Check:
    """True or False (or None with ``optional``)."""

    def check(name: str, value: Any) -> str | None:
        ok = isinstance(value, bool) or (optional and value is None)
        return None if ok else f"{name} must be {'True, False or None' if optional else 'True or False'}, got {value!r}"

    return check


def open_interval(low: float, high: float) -> Check:
    """A number strictly between ``low`` and ``high``."""

    def check(name: str, value: Any) -> str | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and low < value < high
        return None if ok else f"{name} must be in ({low}, {high}), got {value!r}"

    return check


def settings_table(builder: str | None = None, config: Any = None) -> str:
    """The declared settings as a markdown table (field, builder method, default, owner, meaning); with
    ``config``, its values stand in the default column (an algorithm's config: that algorithm's defaults)."""
    rows = ["| setting | set with | default | declared in | meaning |", "| --- | --- | --- | --- | --- |"]
    for s in declared(builder):
        value = s.default if config is None else getattr(config, s.name)
        doc = " ".join(s.doc.split()).replace("|", "\\|")
        rows.append(f"| `{s.name}` | `.{s.builder}()` | `{value!r}` | `{s.owner}` | {doc} |")
    return "\n".join(rows)
