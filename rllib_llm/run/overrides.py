"""``--set METHOD.ARG=VALUE``: any argument of a config builder method from the command line.

A tuned example is a config built by calls such as ``.training(lr=2e-4)`` or ``.generation(backend="hf")``;
``--set training.lr=5e-5`` makes the same call on it after the example is loaded, so every setting a user can
write in Python is reachable without editing the file (RLlib's example scripts expose a fixed handful of flags;
this is their open-ended counterpart). A deeper path merges into the dict the argument holds instead of
replacing it: ``--set environment.env_config.max_steps=10`` keeps the rest of ``env_config``, ``--set
llm.lora.r=8`` the rest of the LoRA settings. Values are Python literals (``5e-5``, ``8``, ``"hf"``, ``[1, 2]``,
``{"r": 8}``, ``True``/``true``, ``None``/``none``); anything else is a string (``generation.backend=vllm``).
"""

from __future__ import annotations

import ast
import copy
import difflib
import inspect
from typing import Any

#: The builder methods ``--set`` may call: RLlib's ``AlgorithmConfig`` ones and ours (``LLMConfig``).
BUILDER_METHODS = (
    "environment", "env_runners", "learners", "training", "evaluation", "debugging", "reporting",
    "checkpointing", "fault_tolerance", "multi_agent", "rl_module", "callbacks",
    "llm", "generation", "group_rollouts",
)
_WORDS = {"true": True, "false": False, "none": None, "null": None}


class OverrideError(ValueError):
    """A ``--set`` that names no builder argument or cannot be applied (one line, with the closest names)."""


def parse_value(text: str) -> Any:
    """A Python literal, ``true``/``false``/``none`` in any case, else the text itself."""
    if text.strip().lower() in _WORDS:
        return _WORDS[text.strip().lower()]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_override(text: str) -> tuple[str, str, list[str], Any]:
    """``"training.lr=5e-5"`` -> ``("training", "lr", [], 5e-5)``; a deeper path's keys come third."""
    path, sep, value = text.partition("=")
    parts = path.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise OverrideError(f"--set {text!r}: expected METHOD.ARG=VALUE (e.g. training.lr=5e-5)")
    return parts[0], parts[1], parts[2:], parse_value(value)


def settable_arguments(config: Any) -> dict[str, list[str]]:
    """Each builder method of ``config`` and the keyword arguments it takes (its own and those of the parents'
    methods it passes ``**kwargs`` on to; ``generation``'s sampling fields)."""
    out = {}
    for method in BUILDER_METHODS:
        if not callable(getattr(config, method, None)):
            continue
        names: list[str] = []
        for cls in type(config).__mro__:  # an override that passes **kwargs on takes its parents' arguments too
            fn = cls.__dict__.get(method)
            if fn is None:
                continue
            for p in inspect.signature(fn).parameters.values():
                named = p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
                if named and p.name not in names:
                    names.append(p.name)
        if method == "generation":  # .generation(**sampling): SamplingParams' fields
            from dataclasses import fields

            from rllib_llm.generation import SamplingParams

            names += [f.name for f in fields(SamplingParams) if f.name not in names]
        out[method] = names
    return out


def _closest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def current_value(config: Any, method: str, arg: str) -> Any:
    """What ``method(arg=...)`` set last: the attribute ``<method>_<arg>`` (``llm_model``,
    ``generation_backend_options``; first, since RLlib's own ``model`` is another dict), the attribute ``arg``
    (``env_config``) or, for ``llm``, the model spec's field (``lora``, ``dtype``)."""
    for attr in (f"{method}_{arg}", arg):
        if hasattr(config, attr):
            return getattr(config, attr)
    if method == "llm" and arg in config.llm_model:
        return config.llm_model[arg]
    raise OverrideError(f"--set {method}.{arg}.*: cannot find the current value of {arg!r} to merge into; "
                        f"set the whole value: --set {method}.{arg}={{...}}")


def apply_override(config: Any, text: str, arguments: dict[str, list[str]]) -> None:
    """One ``--set``: calls ``config.<method>(<arg>=value)``, merging a deeper path into the current dict
    (``arguments``: :func:`settable_arguments` of ``config``)."""
    method, arg, keys, value = parse_override(text)
    if method not in arguments:
        raise OverrideError(f"--set {text!r}: {method!r} is not a config builder method{_closest(method, list(arguments))}")
    if arg not in arguments[method]:
        raise OverrideError(f"--set {text!r}: {method}() has no argument {arg!r}{_closest(arg, arguments[method])}")
    if keys:
        merged = copy.deepcopy(current_value(config, method, arg))
        target = merged
        for key in keys[:-1]:
            if target.get(key) is None:
                target[key] = {}
            target = target[key]
            if not isinstance(target, dict):
                raise OverrideError(f"--set {text!r}: {key!r} holds {type(target).__name__}, not a dict")
        if not isinstance(target, dict):
            raise OverrideError(f"--set {text!r}: {method}.{arg} holds {type(target).__name__}, not a dict")
        target[keys[-1]] = value
        value = merged
    try:
        getattr(config, method)(**{arg: value})
    except (TypeError, ValueError) as e:
        raise OverrideError(f"--set {text!r}: {e}") from e


def apply_overrides(config: Any, overrides: list[str] | None) -> Any:
    if overrides:
        arguments = settable_arguments(config)
        for text in overrides:
            apply_override(config, text, arguments)
    return config


def describe_settable(config: Any) -> str:
    """The ``--set list`` text: each builder method and its arguments."""
    lines = ["Settable with --set METHOD.ARG=VALUE (a deeper path merges into a dict argument):"]
    lines += [f"  {method}: {', '.join(args)}" for method, args in settable_arguments(config).items()]
    return "\n".join(lines)
