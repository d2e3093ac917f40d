"""A filter's answer for one run, in Python: what ``MemoryStore`` searches with.

The SQL stores never read runs one by one to filter them: they compile the
filter to SQL (:mod:`treadle._stores._sql_search`). This is the same meaning
over values already in memory, and it is the reference both are tested
against: a comparison with a field the run lacks, or holds as another kind,
is false; ``!`` negates what is left; numbers compare as numbers, times as
seconds since the epoch, text by code point.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeAlias

from treadle._values._filter import AllOf, AnyOf, Compare, Constant, Has, Node, Not, StartsWith

if TYPE_CHECKING:
    from treadle._values._filter import Subject, Value
    from treadle._values._search_fields import FieldValue

# A column's value as a comparison sees it: text, seconds, or None (no outcome).
Columns: TypeAlias = Mapping[str, str | float | None]


def matches(node: Node, columns: Columns, fields: Mapping[str, FieldValue]) -> bool:
    """Whether a run with these ``columns`` and search ``fields`` passes the filter ``node``."""
    match node:
        case Constant(value=value):
            return value
        case AllOf(parts=parts):
            return all(matches(part, columns, fields) for part in parts)
        case AnyOf(parts=parts):
            return any(matches(part, columns, fields) for part in parts)
        case Not(inner=inner):
            return not matches(inner, columns, fields)
        case Has(subject=subject):
            held = fields.get(subject.name)
            return held is not None and not held.unset
        case StartsWith(subject=subject, prefix=prefix):
            kind, text = _read(subject, columns, fields)
            return kind == "text" and isinstance(text, str) and text.startswith(prefix)
        case Compare(subject=subject, op=op, values=values):
            kind, found = _read(subject, columns, fields)
            if op == "in":
                return any(_compare(kind, found, "==", each) for each in values)
            return _compare(kind, found, op, values[0])
    raise AssertionError(node)  # pragma: no cover - every node is matched above


def _read(
    subject: Subject, columns: Columns, fields: Mapping[str, FieldValue]
) -> tuple[str, str | float | bool | None]:
    """The kind and value a subject has on this run (kind ``null``: it has none)."""
    if not subject.field:
        value = columns.get(subject.name)
        if value is None:
            return "null", None
        return ("text" if isinstance(value, str) else "time"), value
    found = fields.get(subject.name)
    if found is None or found.unset:
        return "null", None
    if found.kind == "text":
        return "text", found.text
    if found.kind == "bool":
        return "bool", found.number != 0
    return found.kind, found.number


_ORDER = MappingProxyType(
    {
        "==": operator.eq,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }
)


def _compare(kind: str, value: str | float | bool | None, op: str, against: Value) -> bool:
    if against.kind == "null":
        return (kind == "null") == (op == "==")
    if kind != against.kind or value is None or against.value is None:
        return False  # a field the run lacks, or holds as another kind
    result: bool = _ORDER[op](value, against.value)
    return result
