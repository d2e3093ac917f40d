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
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from celpy.evaluation import CELEvalError, Evaluator

if TYPE_CHECKING:
    from lark import Token, Tree

MAX_STEPS = 20_000
"""How many evaluation steps one evaluation of an expression may take."""

MAX_BUILT = 4_000_000
"""How many characters, bytes or list items ``+`` may build in one evaluation, all told."""

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

    def sub_evaluator(self, ast: Tree[Token]) -> Evaluator:
        return BudgetedEvaluator(ast, self.activation, self.left)


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
