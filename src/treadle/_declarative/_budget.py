"""The budget of an expression's evaluation, and cel-python's errors said in CEL's words.

cel-python evaluates by walking the parse tree; :class:`BudgetedEvaluator`
counts every node it visits (a macro's body once per item) against one
budget shared with the evaluators it makes for macro bodies, and stops the
walk past :data:`MAX_STEPS` with :class:`OverBudget`. Steps rather than
seconds: the same data fails the same way on every machine and replay.

A step costs one whatever its values weigh, but ``+`` copies: over a
megabyte of run input, ``message.map(x, inputs.text + inputs.text)`` built
gigabytes within its steps. So what ``+`` builds (characters, bytes, list
items) is counted too, against :data:`MAX_BUILT`.

Nor does a step cost one when it compares: cel-python's ``in`` loops in
Python over every item of its container (a map's keys, a string's
characters), and ``==``/``!=`` on lists and maps over every item, nested
ones too. In a macro that is N x M comparisons for ~20 x N steps (400
items each ``in`` a list of 40,000 took 9 s within budget). So ``in``,
``==``, ``!=`` and ``.contains()`` are charged, before they run, a step per
item they may compare (:func:`weight`) and per :data:`CHARS_PER_STEP`
characters of a string compared or searched in C.
"""

from __future__ import annotations

import re
import sys
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from celpy.celtypes import BoolType, logical_and, logical_or
from celpy.evaluation import CELEvalError, Evaluator, eval_error
from lark import Tree

if TYPE_CHECKING:
    from collections.abc import Iterable

    from lark import Token

MAX_STEPS = 20_000
"""How many evaluation steps one evaluation of an expression may take."""

MAX_BUILT = 4_000_000
"""How many characters, bytes or list items ``+`` may build in one evaluation, all told.

What the evaluation gives, spelled out, may hold this more than it was given
(:func:`gives_too_much`).
"""

CHARS_PER_STEP = 1000
"""How many characters (or bytes) of a string compared or searched in C cost one step."""

_SIZED = (str, bytes, list, dict)  # what cel-python's strings, bytes, lists and maps are

_NO_OVERLOAD = re.compile(
    r"no matching overload for Token\('RULE', '(\w+)'\) applied to '\((.*)\)'"
)


class OverBudget(BaseException):
    """An evaluation spent its budget; a ``BaseException`` so cel-python's handlers let it pass.

    Its ``what`` says which: ``"steps"`` or ``"built"``.
    """

    def __init__(self, what: str = "steps") -> None:
        super().__init__(what)
        self.what = what


def new_budget() -> list[int]:
    """The budget of one evaluation: steps left, and what ``+`` may still build."""
    return [MAX_STEPS, MAX_BUILT]


class BudgetedEvaluator(Evaluator):
    """cel-python's evaluator, counting the tree nodes it visits against a shared budget."""

    def __init__(self, ast: Tree[Token], activation: Any, left: list[int]) -> None:
        super().__init__(ast, activation)
        self.left = left  # one budget for the evaluator and those it makes for macro bodies

    def _visit_tree(self, tree: Tree[Token]) -> Any:
        self.left[0] -= 1
        if self.left[0] < 0:
            raise OverBudget("steps")
        result = super()._visit_tree(tree)
        if tree.data == "addition" and len(tree.children) > 1 and isinstance(result, _SIZED):
            self.left[1] -= len(result)
            if self.left[1] < 0:
                raise OverBudget("built")
        return result

    def visit_children(self, tree: Tree[Token]) -> list[Any]:
        """The children's values, charged for the comparing their node is about to do with them."""
        values: list[Any] = super().visit_children(tree)
        cost = comparing_cost(tree, values, self.left[0])
        if cost:
            self.left[0] -= cost
            if self.left[0] < 0:
                raise OverBudget("steps")
        return values

    def sub_evaluator(self, ast: Tree[Token]) -> Evaluator:
        return BudgetedEvaluator(ast, self.activation, self.left)

    def member_dot_arg(self, tree: Tree[Token]) -> Any:
        """cel-python's, but ``all`` and ``exists`` keep one error of their items, not each.

        cel-python joins two errors' texts into a new one as it reduces an
        ``all`` (``exists``) whose items fail, so the text doubled with each
        item: 40 items without the field a condition reads took 24 GB. In
        CEL an error and an error is an error, whichever: the first is kept.
        Otherwise as cel-python reduces (``false`` in ``all``, ``true`` in
        ``exists``, wins over an error).
        """
        member, name = tree.children[0], str(getattr(tree.children[1], "value", ""))
        if name not in _REDUCED or not isinstance(member, Tree):
            return super().member_dot_arg(tree)
        members = self.visit(member)
        if isinstance(members, CELEvalError):
            return members
        body = self.build_ss_macro_eval(tree)
        join = _REDUCED[name]
        result: Any = BoolType(name == "all")
        for item in members:
            value = body(item)
            if not (isinstance(result, CELEvalError) and isinstance(value, CELEvalError)):
                result = join(result, value)
        return result


# How ``all`` and ``exists`` join their items' values: as cel-python does (a TypeError,
# two values neither of them a bool, is the error "no such overload").
_REDUCED = MappingProxyType(
    {
        "all": eval_error("no such overload", TypeError)(logical_and),
        "exists": eval_error("no such overload", TypeError)(logical_or),
    }
)


_COMPARING = frozenset({"relation_eq", "relation_ne", "relation_in"})


def comparing_cost(tree: Tree[Token], values: list[Any], cap: int) -> int:
    """The steps a node's comparison of ``values`` may take, counted up to just past ``cap``.

    ``values`` are its children's, as cel-python's ``relation`` (``[[left],
    right]``) and ``member_dot_arg`` (``[member, name, [args]]``) get them.
    """
    rule = tree.data
    if rule == "relation" and len(values) == 2:  # noqa: PLR2004 - an operator and its right
        operator = tree.children[0]
        op = getattr(operator, "data", None)
        if op not in _COMPARING or not isinstance(values[0], list) or not values[0]:
            return 0
        left, right = values[0][0], values[1]
        if op == "relation_in":  # loops over the container, comparing each item with ``left``
            if isinstance(right, str | bytes | dict):
                return len(right)  # a Python loop over its characters, or a map's keys
            return weight(right, cap) - 1 if isinstance(right, list) else 0
        if not isinstance(left, list | dict | str | bytes):
            return 0
        return min(weight(left, cap), weight(right, cap)) - 1
    if rule == "member_dot_arg" and len(values) == 3 and str(values[1]) == "contains":  # noqa: PLR2004
        member = values[0]
        if isinstance(member, str | bytes):
            return len(member) // CHARS_PER_STEP  # a search in C
        if isinstance(member, list):
            return weight(member, cap) - 1
    return 0


def gives_too_much(result: Any, given: Iterable[Any], left: int) -> bool:
    """Whether ``result``, spelled out, holds more than what was ``given`` and ``left`` to build.

    Checked first against ``left`` alone: only a result that large makes
    the inputs be counted (a condition gives a bool, and is never walked).
    """
    if not isinstance(result, _SIZED) or spelled_out(result, left) <= left:
        return False
    allowed = left + spelled_out(list(given), sys.maxsize)
    return spelled_out(result, allowed) > allowed


def spelled_out(value: Any, cap: int) -> int:
    """The characters, bytes and items ``value`` holds, a value held twice counted twice.

    What its plain form and any text of it will hold: a result that holds
    one large value many times (``message.items.map(i, message.text)``)
    is small for cel-python, but a copy each time once it is plain data
    (600 KB given 1,500 times: 900 MB). Walked without recursion, and only
    until it passes ``cap``.
    """
    total = 0
    stack = [value]
    while stack and total <= cap:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, dict):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            total += len(item)
            stack.extend(item)
    return total


def weight(value: Any, cap: int) -> int:
    """How many items comparing ``value`` may visit (itself, nested items, string chunks).

    Walked without recursion and only until it passes ``cap``: finding the
    weight must not cost more than the budget it is charged against.
    """
    total = 0
    stack = [value]
    while stack and total <= cap:
        item = stack.pop()
        total += 1
        if isinstance(item, str | bytes):
            total += len(item) // CHARS_PER_STEP
        elif isinstance(item, list | dict):
            total += len(item) if isinstance(item, dict) else 0  # a map's keys compare too
            if total + len(item) > cap:
                return total + len(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return total


_CEL_TYPES = MappingProxyType(
    {
        "IntType": "int",
        "UintType": "uint",
        "DoubleType": "double",
        "StringType": "string",
        "BoolType": "bool",
        "BytesType": "bytes",
        "ListType": "list",
        "MapType": "map",
        "NoneType": "null",
        "DurationType": "duration",
        "TimestampType": "timestamp",
    }
)
_OPERATORS = MappingProxyType(
    {
        "relation_lt": "<",
        "relation_le": "<=",
        "relation_gt": ">",
        "relation_ge": ">=",
        "relation_eq": "==",
        "relation_ne": "!=",
        "relation_in": "in",
        "addition_add": "+",
        "addition_sub": "-",
        "multiplication_mul": "*",
        "multiplication_div": "/",
        "multiplication_mod": "%",
    }
)


def explained(error: CELEvalError) -> str:
    """cel-python's complaint in CEL's own words (``cannot apply >= to int and double``)."""
    text = str(error.args[0]) if error.args else str(error)
    found = _NO_OVERLOAD.search(text)
    if found is None:
        return text
    operator = _OPERATORS.get(found.group(1), found.group(1))
    kinds = [_CEL_TYPES.get(k, k) for k in re.findall(r"celtypes\.(\w+)'>", found.group(2))]
    if not kinds:
        return text
    hint = ""
    if sorted(kinds) in (["double", "int"], ["double", "uint"]):
        hint = " (CEL never mixes them: write both as one, e.g. 1000.0 or double(...))"
    return f"cannot apply {operator} to {' and '.join(kinds)}{hint}"
