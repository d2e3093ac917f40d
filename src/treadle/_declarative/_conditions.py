"""Conditions and selectors in CEL, the Common Expression Language (cel-python).

Why CEL: it was designed to be evaluated on untrusted input. It has no
loops, no recursion, no assignment and no user-defined functions; the only
iteration is a macro (``all``, ``exists``, ``exists_one``, ``map``,
``filter``) over a list that already exists, so every expression
terminates, in time polynomial in its data. Its values are plain data
(numbers, strings, lists, maps), so there is no object whose attributes an
expression could climb to reach Python (the road of every Jinja sandbox
escape).

Treadle narrows cel-python further, at load time:

* the only names are ``message``, ``state`` and ``inputs`` (and ``targets``
  in a fan-out's ``select``), plus the variables of macros;
* only CEL's standard functions, minus ``matches``: cel-python runs it on
  Python's backtracking ``re``, where a crafted pattern takes exponential
  time (CEL's RE2 does not);
* no field whose name starts with ``_``, no message construction
  (``Type{...}``), no leading-dot names;
* macros nest at most :data:`MAX_MACRO_DEPTH` deep, which bounds the
  polynomial;
* brackets nest at most :data:`MAX_BRACKETS` deep, counted on the text
  before the parser sees it, and the parse tree is at most
  :data:`MAX_TREE_DEPTH` levels deep (a chain of 900 ``+`` is as deep as
  900 parentheses): cel-python checks and evaluates by recursion, so depth
  is what would exhaust the stack.

Evaluation has a budget, :data:`MAX_STEPS` steps of cel-python's
evaluator (one step a node of the parse tree, each time it is visited, so a
macro's body counts once per item; ``in``, ``==``, ``!=`` and ``.contains()``
also a step per item they may compare, see ``_budget.py``). An expression that passes every rule
above may still be quadratic in its data (``message.map(x, message.map(y,
x + y))`` over 300 strings is 1.3 million steps, about ten seconds): past
the budget the evaluation stops and fails with :class:`ExpressionError`,
which fails the invocation of the node that sent the message (its retries,
then its ``on_error`` route, apply as to any failure). Steps, not seconds,
so the same data fails the same way on every machine and every replay.

What the expression sees is converted to plain data first (``plain``):
mappings, lists, strings, numbers, booleans, null. A dataclass or pydantic
model becomes the mapping of its fields; any other object is refused.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError
from lark import Token, Tree

from treadle._declarative._budget import (
    MAX_BUILT,
    MAX_STEPS,
    BudgetedEvaluator,
    OverBudget,
    explained,
    gives_too_much,
    new_budget,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

MAX_MACRO_DEPTH = 2
"""How deeply ``all``/``exists``/``map``/``filter`` may nest in one expression."""

MAX_BRACKETS = 16
"""How deeply ``(``, ``[`` and ``{`` may nest in one expression."""

MAX_TREE_DEPTH = 200
"""How many levels deep an expression's parse tree may be (``message == 1`` is 12)."""

MAX_LENGTH = 2000
"""The longest expression, in characters (the schema's bound, held here too)."""

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_FUNCTIONS = frozenset(
    {
        "has",
        "size",
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "bytes",
        "duration",
        "timestamp",
        "type",
        "dyn",
    }
)
_METHODS = frozenset(
    {
        *_MACROS,
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getMonth",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getSeconds",
    }
)
_REFUSED_RULES = MappingProxyType(
    {
        "member_object": "message construction (Type{...}) is not allowed",
        "dot_ident": "names starting with '.' are not allowed",
        "dot_ident_arg": "names starting with '.' are not allowed",
    }
)


class ExpressionError(ValueError):
    """A condition could not be evaluated (its data has no such key, a wrong type, its budget).

    Its message names the node, the expression and what went wrong; the
    frames under it are treadle's own, not the definition's, so the record
    of the failure keeps no traceback (``one_line``) and shows it in one line.
    """

    one_line = True


@functools.cache
def _environment() -> celpy.Environment:
    """The one CEL environment (made once: building its parser takes about 0.1 s).

    cel-python sets the interpreter's recursion limit to 2500 (deep
    expressions parse recursively); a higher limit set by the program stays.
    """
    before = sys.getrecursionlimit()
    made = celpy.Environment()
    sys.setrecursionlimit(max(before, sys.getrecursionlimit()))
    return made


@dataclass(frozen=True, slots=True)
class Expression:
    """A checked, compiled CEL expression and the names it reads."""

    source: str
    program: celpy.Runner
    names: frozenset[str]

    def evaluate(self, values: dict[str, Any]) -> Any:
        """The expression's value (plain data) over ``values`` (name → plain data).

        Raises:
            ExpressionError: The evaluation failed (a missing key, a type mismatch).
        """
        activation = {name: json_to_cel(values[name]) for name in self.names}
        budget = new_budget()
        evaluator = BudgetedEvaluator(self.program.ast, self.program.new_activation(), budget)
        try:
            result = evaluator.evaluate(activation)
            if gives_too_much(result, activation.values(), budget[1]):
                raise OverBudget("built")  # noqa: TRY301 - said below, as any over budget
        except CELEvalError as error:
            msg = f"{self.source!r} failed: {explained(error)}"
            raise ExpressionError(msg) from None
        except OverBudget as over:
            msg = (
                f"{self.source!r} went over its budget of {MAX_STEPS:,} evaluation steps "
                f"(a macro over a large list, inside another?) and was stopped"
            )
            if over.what == "built":
                msg = (
                    f"{self.source!r} built more than {MAX_BUILT:,} characters or items "
                    f"with + or in what it gives (large values joined, or given again, in a "
                    f"macro?) and was stopped"
                )
            raise ExpressionError(msg) from None
        if isinstance(result, CELEvalError):
            msg = f"{self.source!r} failed: {explained(result)}"
            raise ExpressionError(msg)
        return _python(result)


def compile_expression(
    source: str, names: Iterable[str], declared: Mapping[str, Collection[str]] | None = None
) -> Expression:
    """Parse and check ``source``, which may read only ``names`` (and macro variables).

    ``declared`` gives, for a name whose fields a definition declares
    (``state``, ``inputs``), the fields there are: ``state.totl`` for a
    declared ``total`` is refused here, at load time, not when a run reads it.

    Raises:
        ValueError: A syntax error or something CEL allows that treadle does not;
            the message says what and where in the expression.
    """
    shown = source if len(source) <= 80 else f"{source[:77]}..."  # noqa: PLR2004 - a line
    if len(source) > MAX_LENGTH:
        msg = f"the expression {shown!r} is longer than {MAX_LENGTH} characters"
        raise ValueError(msg)
    if bracket_depth(source) > MAX_BRACKETS:
        msg = f"the expression {shown!r} nests too deeply: at most {MAX_BRACKETS} brackets"
        raise ValueError(msg + " inside one another")
    try:
        tree = _environment().compile(source)
    except CELParseError as error:
        column = getattr(error, "column", None) or 1
        msg = f"CEL syntax error in {shown!r} at column {column}"
        raise ValueError(msg) from None
    depth = tree_depth(tree)
    if depth > MAX_TREE_DEPTH:
        msg = (
            f"the expression {shown!r} nests too deeply: its operators, calls and fields "
            f"chain {depth} levels deep, at most {MAX_TREE_DEPTH}"
        )
        raise ValueError(msg)
    allowed = frozenset(names)
    used: set[str] = set()
    problems: list[str] = []
    _check(tree, _Rules(allowed, declared or {}), set(), used, problems, 0)
    if problems:
        raise ValueError(f"in {source!r}: " + "; ".join(dict.fromkeys(problems)))
    return Expression(source, _environment().program(tree), frozenset(used))


def bracket_depth(source: str) -> int:
    """How deeply brackets nest in ``source``, string literals skipped (a bound, not a parse)."""
    depth = deepest = 0
    index, end = 0, len(source)
    while index < end:
        char = source[index]
        if char in "\"'":
            quote = (
                source[index : index + 3] if source[index : index + 3] in {'"""', "'''"} else char
            )
            raw = index > 0 and source[index - 1] in "rR"
            index += len(quote)
            while index < end and not source.startswith(quote, index):
                index += 2 if source[index] == "\\" and not raw else 1
            index += len(quote)
            continue
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
        index += 1
    return deepest


def tree_depth(tree: Tree[Token]) -> int:
    """How many levels deep a parse tree is, found without recursion."""
    deepest = 0
    stack: list[tuple[Tree[Token], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))
    return deepest


@dataclass(frozen=True)
class _Rules:
    """What an expression may read: its names, and the fields declared of some of them."""

    allowed: frozenset[str]
    declared: Mapping[str, Collection[str]]


# What a declared field is called in a problem, by the name it is read from.
_FIELD_NOUN: Final = MappingProxyType({"state": "state key", "inputs": "input"})


def _root_name(member: Tree[Token] | Token) -> str | None:
    """The name a ``member`` is, when it is a bare name (``state`` in ``state.total``)."""
    if not isinstance(member, Tree) or len(member.children) != 1:
        return None
    primary = member.children[0]
    if not isinstance(primary, Tree) or str(primary.data) != "primary":
        return None
    ident = primary.children[0] if len(primary.children) == 1 else None
    if not isinstance(ident, Tree) or str(ident.data) != "ident":
        return None
    return str(ident.children[0])


def _undeclared(
    member_dot: Sequence[Tree[Token] | Token], rules: _Rules, bound: set[str]
) -> str | None:
    """What is wrong with ``name.field`` when ``name`` declares its fields and lacks ``field``."""
    root, field = _root_name(member_dot[0]), str(member_dot[1])
    if root is None or root not in rules.allowed or root in bound:
        return None
    fields = rules.declared.get(root)
    if fields is None or field in fields:
        return None
    return f"no {_FIELD_NOUN.get(root, 'field')} {field!r} is declared"


def _check(
    tree: Tree[Token] | Token,
    rules: _Rules,
    bound: set[str],
    used: set[str],
    problems: list[str],
    depth: int,
) -> None:
    """Walk the parse tree, refusing what CEL allows but treadle does not."""
    if not isinstance(tree, Tree):
        return
    rule = str(tree.data)
    children = tree.children
    allowed = rules.allowed
    if rule in _REFUSED_RULES:
        problems.append(_REFUSED_RULES[rule])
        return
    if rule == "member_dot" and (undeclared := _undeclared(children, rules, bound)):
        problems.append(undeclared)
    if rule == "ident":
        name = str(children[0])
        if name in allowed:
            used.add(name)
        elif name not in bound:
            problems.append(f"unknown name {name!r} (use {', '.join(sorted(allowed))})")
        return
    if rule == "ident_arg":
        name = str(children[0])
        if name not in _FUNCTIONS:
            problems.append(f"the function {name}() is not allowed")
    elif rule == "member_dot" and str(children[1]).startswith("_"):
        problems.append(f"the field {str(children[1])!r} is not allowed (it starts with '_')")
    elif rule == "member_dot_arg":
        method = str(children[1])
        if method not in _METHODS:
            problems.append(f"the method .{method}() is not allowed")
        elif method in _MACROS:
            if depth >= MAX_MACRO_DEPTH:
                problems.append(f"macros nest at most {MAX_MACRO_DEPTH} deep")
                return
            variable = _macro_variable(children)
            inner = {*bound, variable} if variable else bound
            _check(children[0], rules, bound, used, problems, depth)
            for child in children[2:]:
                _check(child, rules, inner, used, problems, depth + 1)
            return
    for child in children:
        _check(child, rules, bound, used, problems, depth)


def _macro_variable(children: Sequence[Tree[Token] | Token]) -> str | None:
    """The variable a macro binds (``x`` in ``list.all(x, ...)``)."""
    args = children[2] if len(children) > 2 else None  # noqa: PLR2004 - member, name, args
    if not isinstance(args, Tree) or not args.children:
        return None
    first = args.children[0]
    idents = (
        [t for t in first.iter_subtrees() if str(t.data) == "ident"]
        if isinstance(first, Tree)
        else []
    )
    return str(idents[0].children[0]) if idents else None


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` as plain data for an expression: no Python object gets through.

    Raises:
        ExpressionError: It holds an object that is not data.
    """
    if depth > 64:  # noqa: PLR2004 - deeper data is a mistake, not a message
        raise ExpressionError("the value nests more than 64 levels deep")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return plain(value.value, depth + 1)
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, depth + 1) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict):
        return {name: plain(getattr(value, name), depth + 1) for name in fields}
    msg = f"a {type(value).__name__} is not data an expression can read"
    raise ExpressionError(msg)


def _python(value: Any) -> Any:
    """A CEL result back as plain Python."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.MapType):
        return {_python(k): _python(v) for k, v in value.items()}
    if isinstance(value, celtypes.ListType):
        return [_python(v) for v in value]
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    return value


@dataclass(frozen=True, slots=True)
class CelCondition:
    """An edge condition or switch case: ``when`` as a callable of the message.

    ``scope`` gives the ``state`` and ``inputs`` the expression reads, from
    the invocation sending the message (see ``_nodes.py``); ``node`` is the
    id of the node whose edge it is, named by every error.
    """

    expression: Expression
    scope: Callable[[frozenset[str]], dict[str, Any]]
    node: str = "?"

    @property
    def source(self) -> str:
        """The expression's text, as written in the definition."""
        return self.expression.source

    def __call__(self, message: Any) -> bool:
        """Whether ``message`` takes the edge (the expression must give a boolean).

        Raises:
            ExpressionError: One line naming the node, the condition and what went wrong.
        """
        values = self.scope(self.expression.names)
        if "message" in self.expression.names:
            values["message"] = plain(message)
        try:
            result = self.expression.evaluate(values)
        except ExpressionError as error:
            raise ExpressionError(f"node {self.node!r}: the condition {error}") from None
        if not isinstance(result, bool):
            msg = f"node {self.node!r}: the condition {self.source!r} gave {result!r}, not a bool"
            raise ExpressionError(msg)
        return result


@dataclass(frozen=True, slots=True)
class CelSelector:
    """A fan-out's ``select``: the expression lists the ids of the targets to take."""

    expression: Expression
    scope: Callable[[frozenset[str]], dict[str, Any]]
    node: str = "?"

    @property
    def source(self) -> str:
        """The expression's text, as written in the definition."""
        return self.expression.source

    def __call__(self, message: Any, targets: Sequence[str]) -> list[str]:
        """The targets the expression chose (a list of ids)."""
        values = self.scope(self.expression.names)
        if "message" in self.expression.names:
            values["message"] = plain(message)
        values["targets"] = list(targets)
        try:
            result = self.expression.evaluate(values)
        except ExpressionError as error:
            raise ExpressionError(f"node {self.node!r}: the selector {error}") from None
        if not isinstance(result, list) or not all(isinstance(t, str) for t in result):
            msg = f"node {self.node!r}: the selector {self.source!r} gave {result!r}, not a list"
            raise ExpressionError(msg)
        return result
