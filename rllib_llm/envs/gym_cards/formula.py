"""Safe arithmetic for the card-formula games: parse with ``ast`` (numbers, + - * /, parentheses only),
evaluate with exact fractions, check that the cards are used exactly once, and search for a solution.

Nothing is ever passed to ``eval``: the AST is walked by hand and any other node type is rejected.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable
from fractions import Fraction

OPS: dict[str, type[ast.operator]] = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div}
MAX_FORMULA_CHARS = 200
_FACES = {"A": 1, "J": 11, "Q": 12, "K": 13}


class FormulaError(ValueError):
    """The formula is not a well-formed use of the cards (the action is invalid).

    ``numbers``: the numbers a well-formed formula used when the only fault is the card check (else None)."""

    def __init__(self, message: str, numbers: list[int] | None = None) -> None:
        super().__init__(message)
        self.numbers = numbers


def card_overlap(numbers: Iterable[int], cards: Iterable[int]) -> float:
    """How close a formula's numbers are to the cards: shared numbers (as multisets) over the larger of the two
    counts, so 1.0 exactly when it uses each card once, and extra or missing numbers both lower it."""
    used, dealt = sorted(numbers), sorted(cards)
    shared = sum(min(used.count(n), dealt.count(n)) for n in set(used))
    return shared / max(len(used), len(dealt), 1)


def _normalise(text: str, face_values: dict[str, int]) -> str:
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    text = re.sub(r"(?<=[\d)\s])[xX](?=[\s\d(])", "*", text)
    return re.sub(r"\b([AJQKajqk])\b", lambda m: str(face_values[m.group(1).upper()]), text)


#: How a formula is computed: ``"exact"`` with fractions (``8/(3-8/3)`` is 24), ``"float"`` as Python's ``eval``
#: does in verl-agent / RL4VLM (the same formula is 23.99999999999999 there, not 24).
ARITHMETIC = {"exact": Fraction, "float": float}


def _eval(
    node: ast.AST, allowed: tuple[type[ast.operator], ...], numbers: list[int], number: type = Fraction
) -> Fraction | float:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        numbers.append(node.value)
        return number(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, allowed):
        left, right = _eval(node.left, allowed, numbers, number), _eval(node.right, allowed, numbers, number)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise FormulaError("division by zero")
        return left / right
    raise FormulaError(f"only whole numbers and {' '.join(_names(allowed))} with parentheses are allowed")


def _names(allowed: tuple[type[ast.operator], ...]) -> list[str]:
    return [sym for sym, op in OPS.items() if op in allowed]


def evaluate_formula(
    text: str,
    cards: Iterable[int],
    ops: str = "+-*/",
    face_values: dict[str, int] | None = None,
    arithmetic: str = "exact",
) -> Fraction | float:
    """Value of ``text`` if it is a formula over exactly ``cards`` with operators from ``ops``, computed as
    ``arithmetic`` says (:data:`ARITHMETIC`: a Fraction, or a float).

    A trailing ``= <number>`` is accepted and ignored (the value is what counts). Face letters
    (A, J, Q, K) are read with ``face_values``. Raises :class:`FormulaError` otherwise.
    """
    if not isinstance(text, str) or not text.strip():
        raise FormulaError("empty formula")
    if len(text) > MAX_FORMULA_CHARS:
        raise FormulaError("formula too long")
    text = _normalise(text, {**_FACES, **(face_values or {})})
    lhs, *rhs = text.split("=")
    if len(rhs) > 1 or (rhs and not re.fullmatch(r"\s*\d+\s*", rhs[0])):
        raise FormulaError("write one formula, optionally followed by '= <number>'")
    try:
        tree = ast.parse(lhs.strip(), mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"not a formula: {e.msg}") from None
    numbers: list[int] = []
    value = _eval(tree.body, tuple(OPS[o] for o in ops), numbers, ARITHMETIC[arithmetic])
    if sorted(numbers) != sorted(cards):
        raise FormulaError(
            f"use each card exactly once (cards: {sorted(cards)}, formula uses {sorted(numbers)})", numbers
        )
    return value


def find_solution(cards: Iterable[int], target: int, ops: str = "+-*/") -> str | None:
    """A formula over ``cards`` that equals ``target`` (exhaustive search over pairings), or None."""
    start = [(Fraction(c), str(c)) for c in cards]
    seen: set[tuple[Fraction, ...]] = set()

    def search(items: list[tuple[Fraction, str]]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        key = tuple(sorted(v for v, _ in items))
        if key in seen:
            return None
        seen.add(key)
        for i, j in itertools.permutations(range(len(items)), 2):
            (a, ea), (b, eb) = items[i], items[j]
            rest = [items[k] for k in range(len(items)) if k not in (i, j)]
            for op in ops:
                if op == "/" and b == 0:
                    continue
                value = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else a}[op]
                found = search([*rest, (value, f"({ea}{op}{eb})")])
                if found:
                    return found
        return None

    found = search(start)
    # The outermost pair of parentheses always wraps the whole expression; drop it for readability.
    return found[1:-1] if found and len(start) > 1 else found
