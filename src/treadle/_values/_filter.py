"""The filter language for runs: a small subset of CEL, read into a tree a store can compile.

One language for ``treadle runs --where``, ``GET /api/runs?where=``, the
page's search box and the bulk actions. It is CEL (the Common Expression
Language) narrowed to what an index can answer, so every filter is a valid
CEL expression and reads as one::

    fields.customer == "42" && status == "awaiting_input"
    fields.amount >= 1000 && outcome == null
    status in ["failed", "stalled"] || fields.region.startsWith("eu-")
    created_at > timestamp("2026-01-01T00:00:00Z") && has(fields.ticket)

The names are the run's columns (``status``, ``outcome``, ``workflow``:
text; ``created_at``, ``updated_at``: times) and ``fields.NAME`` (or
``fields["NAME"]``), the workflow's search fields. A comparison sets a name
against a value (a string, a number, ``true``, ``false``, ``null``,
``timestamp("RFC 3339")``); ``&&``, ``||``, ``!`` and parentheses combine
them; ``x in [values]``, ``x.startsWith("prefix")`` and ``has(fields.x)``
complete it. A comparison with a field the run lacks, or holds as another
kind, is false (``has`` asks whether it has it).

Read by hand, not by a general CEL parser: every input is read in one pass
with a bounded stack, so a filter of any length or depth is answered or
refused in bounded time (:data:`MAX_LENGTH`, :data:`MAX_DEPTH`,
:data:`MAX_TERMS`, :data:`MAX_LIST`, the limits of
``treadle._declarative._budget``'s idea), and a fault is a
:class:`~treadle.errors.FilterError` naming its column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from treadle._exceptions import FilterError
from treadle._values._text import lone_surrogate

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

MAX_LENGTH = 2000
"""The longest filter, in characters."""
MAX_DEPTH = 16
"""How deeply parentheses and ``!`` may nest."""
MAX_TERMS = 32
"""How many comparisons one filter may hold."""
MAX_LIST = 100
"""How many values an ``in [...]`` list may hold."""

COLUMNS = MappingProxyType(
    {
        "status": "text",
        "outcome": "text",
        "workflow": "text",
        "created_at": "time",
        "updated_at": "time",
    }
)
"""The run's columns a filter may name, with their kinds."""

OPERATORS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True, slots=True)
class Value:
    """A literal: its kind (``text``, ``number``, ``bool``, ``time``, ``null``) and value.

    Times are seconds since the epoch; bools are ``True``/``False``.
    """

    kind: str
    value: str | float | bool | None


@dataclass(frozen=True, slots=True)
class Subject:
    """What a comparison reads: a column of the run, or one of its search fields."""

    name: str
    field: bool  # a search field (``fields.name``), not a column

    @property
    def label(self) -> str:
        """How the filter names it."""
        return f"fields.{self.name}" if self.field else self.name


@dataclass(frozen=True, slots=True)
class Compare:
    """``subject op value``; with ``op`` ``"in"``, ``values`` holds the list."""

    subject: Subject
    op: str
    values: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class StartsWith:
    """``subject.startsWith(prefix)`` (text only)."""

    subject: Subject
    prefix: str


@dataclass(frozen=True, slots=True)
class Has:
    """``has(fields.name)``: the run has the field set."""

    subject: Subject


@dataclass(frozen=True, slots=True)
class Not:
    """``!inner``."""

    inner: Node


@dataclass(frozen=True, slots=True)
class AllOf:
    """``a && b && ...``."""

    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    """``a || b || ...``."""

    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Constant:
    """``true`` or ``false`` on its own."""

    value: bool


Node: TypeAlias = Compare | StartsWith | Has | Not | AllOf | AnyOf | Constant


@dataclass(frozen=True, slots=True)
class RunFilter:
    """A filter read and checked: its text and its tree."""

    text: str
    tree: Node


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\],.\-])
    )""",
    re.VERBOSE,
)
_ESCAPES = MappingProxyType({"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"})


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, string, name, op, end
    text: str
    column: int  # 1-based


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            found.append(_Token("end", "", position + 1))
            return found
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            _fail(position + 1, f"unexpected character {text[position]!r}")
        kind = match.lastgroup
        found.append(_Token(kind, match.group(kind), match.start(kind) + 1))
        position = match.end()


def _fail(column: int, message: str) -> NoReturn:
    raise FilterError(f"column {column}: {message}", column)


def parse_filter(text: str, known: Mapping[str, Collection[str]] | None = None) -> RunFilter:
    """Read a filter; refuse it, naming the fault and its column, if it is not one.

    ``known``: for a column whose values are few and fixed (a run's
    ``status``), the values it may hold: a comparison with any other (a
    misspelt status) is refused, naming them, rather than matching nothing.

    Raises:
        FilterError: The text is not a filter this language reads.
    """
    if not isinstance(text, str):
        msg = f"a filter is a string, got {type(text).__name__}"
        raise TypeError(msg)
    if not text.strip():
        raise FilterError("the filter is empty", 1)
    if len(text) > MAX_LENGTH:
        raise FilterError(f"the filter is longer than {MAX_LENGTH} characters", MAX_LENGTH + 1)
    reader = _Reader(_tokens(text), known or {})
    tree = reader.expression(0)
    end = reader.peek()
    if end.kind != "end":
        _fail(end.column, f"expected && or || or the end, found {end.text!r}")
    return RunFilter(text, tree)


class _Reader:
    """A recursive-descent reader over the tokens; depth is bounded by MAX_DEPTH."""

    def __init__(self, tokens: list[_Token], known: Mapping[str, Collection[str]]) -> None:
        self.tokens = tokens
        self.at = 0
        self.terms = 0
        self.known = known

    def check_known(self, subject: Subject, value: Value, column: int) -> None:
        """Refuse a value a column of fixed values never holds (``known``)."""
        allowed = None if subject.field else self.known.get(subject.name)
        if allowed is not None and value.kind == "text" and value.value not in allowed:
            names = ", ".join(sorted(allowed))
            _fail(column, f"no {subject.name} is {value.value!r} (it is one of: {names})")

    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        if token.kind != "end":
            self.at += 1
        return token

    def expect(self, text: str, what: str) -> _Token:
        token = self.take()
        if token.text != text or token.kind not in ("op", "name"):
            _fail(token.column, f"expected {what}, found {_shown(token)}")
        return token

    def expression(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            _fail(self.peek().column, f"parentheses and ! nest deeper than {MAX_DEPTH}")
        parts = [self.conjunction(depth)]
        while self.peek().text == "||" and self.peek().kind == "op":
            self.take()
            parts.append(self.conjunction(depth))
        return parts[0] if len(parts) == 1 else AnyOf(tuple(parts))

    def conjunction(self, depth: int) -> Node:
        parts = [self.unary(depth)]
        while self.peek().text == "&&" and self.peek().kind == "op":
            self.take()
            parts.append(self.unary(depth))
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def unary(self, depth: int) -> Node:
        token = self.peek()
        if token.kind == "op" and token.text == "!":
            self.take()
            if depth + 1 > MAX_DEPTH:
                _fail(token.column, f"parentheses and ! nest deeper than {MAX_DEPTH}")
            return Not(self.unary(depth + 1))
        if token.kind == "op" and token.text == "(":
            self.take()
            inner = self.expression(depth + 1)
            self.expect(")", "')'")
            return inner
        if token.kind == "name" and token.text in ("true", "false"):
            self.take()
            return Constant(token.text == "true")
        if token.kind == "name" and token.text == "has":
            return self.has()
        return self.comparison()

    def has(self) -> Node:
        self.take()
        self.expect("(", "'(' after has")
        token = self.peek()
        subject = self.subject()
        if not subject.field:
            _fail(token.column, f"has() takes a search field (fields.NAME), not {subject.label}")
        self.expect(")", "')' closing has(")
        self.count(token)
        return Has(subject)

    def count(self, token: _Token) -> None:
        self.terms += 1
        if self.terms > MAX_TERMS:
            _fail(token.column, f"a filter holds at most {MAX_TERMS} comparisons")

    def subject(self) -> Subject:
        token = self.take()
        if token.kind != "name":
            _fail(
                token.column, f"expected a name (status, fields.NAME, ...), found {_shown(token)}"
            )
        if token.text in COLUMNS:
            return Subject(token.text, field=False)
        if token.text != "fields":
            known = ", ".join([*COLUMNS, "fields.NAME"])
            _fail(token.column, f"unknown name {token.text!r} (names: {known})")
        after = self.take()
        if after.text == "." and after.kind == "op":
            name = self.take()
            if name.kind != "name":
                _fail(name.column, f"expected a field's name after 'fields.', found {_shown(name)}")
            return Subject(name.text, field=True)
        if after.text == "[" and after.kind == "op":
            name = self.take()
            if name.kind != "string":
                _fail(name.column, f"expected a field's name as a string, found {_shown(name)}")
            self.expect("]", "']'")
            return Subject(_string(name), field=True)
        _fail(after.column, f"expected '.NAME' or '[\"NAME\"]' after fields, found {_shown(after)}")

    def comparison(self) -> Node:
        first = self.peek()
        subject = self.subject()
        self.count(first)
        token = self.take()
        if token.kind == "op" and token.text == "." and self.peek().text == "startsWith":
            self.take()
            self.expect("(", "'(' after startsWith")
            prefix = self.take()
            if prefix.kind != "string":
                _fail(prefix.column, f"startsWith takes a string, found {_shown(prefix)}")
            self.expect(")", "')' closing startsWith(")
            _check_kind(subject, Value("text", ""), prefix.column)
            return StartsWith(subject, _string(prefix))
        if token.kind == "name" and token.text == "in":
            return _as_shown(Compare(subject, "in", self.values(subject)))
        if token.kind != "op" or token.text not in OPERATORS:
            if (
                subject.field
                and token.kind in ("op", "end")
                and token.text in ("&&", "||", ")", "")
            ):
                self.at -= 1 if token.kind != "end" else 0
                return Compare(subject, "==", (Value("bool", value=True),))  # fields.vip
            _fail(
                token.column,
                f"expected ==, !=, <, <=, >, >=, in or .startsWith after "
                f"{subject.label}, found {_shown(token)}",
            )
        value = self.value()
        _check_kind(subject, value, self.tokens[self.at - 1].column)
        if token.text in ("==", "!="):
            self.check_known(subject, value, self.tokens[self.at - 1].column)
        if value.kind == "null" and token.text not in ("==", "!="):
            _fail(token.column, f"null is compared with == or != only, not {token.text}")
        if value.kind == "bool" and token.text not in ("==", "!="):
            _fail(token.column, f"true and false are compared with == or != only, not {token.text}")
        return _as_shown(Compare(subject, token.text, (value,)))

    def values(self, subject: Subject) -> tuple[Value, ...]:
        self.expect("[", "'[' after in")
        items: list[Value] = []
        while True:
            column = self.peek().column
            item = self.value()
            if item.kind == "null":
                _fail(column, "null cannot be in a list")
            _check_kind(subject, item, column)
            self.check_known(subject, item, column)
            items.append(item)
            if len(items) > MAX_LIST:
                _fail(column, f"a list holds at most {MAX_LIST} values")
            token = self.take()
            if token.text == "]" and token.kind == "op":
                return tuple(items)
            if token.text != "," or token.kind != "op":
                _fail(token.column, f"expected ',' or ']' in the list, found {_shown(token)}")

    def value(self) -> Value:
        token = self.take()
        if token.kind == "string":
            return Value("text", _string(token))
        negative = token.kind == "op" and token.text == "-"
        if negative:
            token = self.take()
        if token.kind == "number":
            number = float(token.text)
            return Value("number", -number if negative else number)
        if not negative and token.kind == "name":
            if token.text in ("true", "false"):
                return Value("bool", token.text == "true")
            if token.text == "null":
                return Value("null", None)
            if token.text == "timestamp":
                return self.timestamp()
        _fail(
            token.column,
            f"expected a value (a string, a number, true, false, null or "
            f'timestamp("...")), found {_shown(token)}',
        )

    def timestamp(self) -> Value:
        self.expect("(", "'(' after timestamp")
        token = self.take()
        if token.kind != "string":
            _fail(token.column, f"timestamp takes a string, found {_shown(token)}")
        text = _string(token)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            _fail(token.column, f"{text!r} is not an RFC 3339 time (2026-01-31T09:00:00Z)")
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        self.expect(")", "')' closing timestamp(")
        return Value("time", moment.timestamp())


_HALF_MICROSECOND = 5e-7


def _as_shown(compare: Compare) -> Node:
    """A comparison with times, made against each time as it is shown: to the microsecond.

    A stored time has digits past the microsecond that no answer shows
    (``2026-11-27T03:29:32.245521+00:00``), so a time copied from a run
    would miss that very run: ``created_at <= T`` must hold for the run
    shown at ``T``. Each time ``T`` stands for every stored time shown as
    ``T``, ``[T - 0.5 µs, T + 0.5 µs)``; a comparison with it is one with
    that interval, the same on every store.
    """
    if compare.values[0].kind != "time":
        return compare
    subject, op = compare.subject, compare.op

    def bound(value: Value, edge: str, side: float) -> Compare:
        assert isinstance(value.value, float)  # noqa: S101 - a time is seconds
        return Compare(subject, edge, (Value("time", value.value + side),))

    def shown_as(value: Value) -> Node:
        return AllOf((bound(value, ">=", -_HALF_MICROSECOND), bound(value, "<", _HALF_MICROSECOND)))

    value = compare.values[0]
    if op == "in":
        return AnyOf(tuple(shown_as(each) for each in compare.values))
    if op == "==":
        return shown_as(value)
    if op == "!=":  # either side of it: a run without the field is kept by neither
        return AnyOf((bound(value, "<", -_HALF_MICROSECOND), bound(value, ">=", _HALF_MICROSECOND)))
    if op in ("<=", ">"):  # up to, or past, the whole interval
        return bound(value, "<" if op == "<=" else ">=", _HALF_MICROSECOND)
    return bound(value, "<" if op == "<" else ">=", -_HALF_MICROSECOND)  # before, or from, it


def _check_kind(subject: Subject, value: Value, column: int) -> None:
    """A column is compared with values of its own kind (a field's kind is known per run)."""
    if subject.field or (value.kind == "null" and subject.name == "outcome"):
        return
    kind = COLUMNS[subject.name]
    if value.kind != kind:
        wanted = "a string" if kind == "text" else 'a timestamp("...")'
        _fail(column, f"{subject.name} is a {kind}: compare it with {wanted}, not a {value.kind}")


def _string(token: _Token) -> str:
    body = token.text[1:-1]
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out.append(char)
            index += 1
            continue
        escape = body[index + 1]
        if escape in _ESCAPES:
            out.append(_ESCAPES[escape])
            index += 2
        elif escape == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[index + 2 : index + 6]):
            out.append(chr(int(body[index + 2 : index + 6], 16)))
            index += 6
        else:
            _fail(token.column + index + 1, f"unknown escape \\{escape} in a string")
    # Escaped pairs (\ud83d\ude00) are one character, as JSON reads them.
    text = "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    at = lone_surrogate(text)
    if at is not None:  # \ud800 alone, or a surrogate sent raw: no text, and no store's
        _fail(token.column, f"the string holds half a surrogate pair (U+{ord(text[at]):04X})")
    return text


def _shown(token: _Token) -> str:
    return "the end" if token.kind == "end" else repr(token.text)
