"""Filters of runs as SQL, and the statements that keep the runs' search fields.

A filter (:mod:`treadle._values._filter`) becomes one ``WHERE`` over
``treadle_runs``, its values all parameters. A comparison of a search field
becomes ``run_id IN (SELECT run_id FROM treadle_run_fields WHERE name = ?
AND <the comparison>)``: the subquery reads the index on ``(name,
text_value)`` or ``(name, kind, num_value)`` from the field's name and
value on, and the runs it names are then read by their primary key. No
filter is answered by reading every run and testing it in Python.

The meaning is :mod:`treadle._values._filter_match`'s exactly; where SQL's
NULL would differ (``!(outcome == "a")`` for a run without an outcome), a
comparison says ``IS NOT NULL`` first, so every part is true or false,
never unknown.

Templates are in the neutral dialect (``?``, ``{order}``, ``{binary}``); the
stores render them uncached (a filter's shape is the user's to choose).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._stores._sql_statements import RUN_FIELDS
from treadle._values._filter import AllOf, AnyOf, Compare, Constant, Has, Node, Not, StartsWith
from treadle._values._search_fields import merged

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._records import CheckpointRecord
    from treadle._values._filter import Subject, Value

_RUN_COLUMNS = ", ".join(RUN_FIELDS)

UPSERT_FIELD = """
INSERT INTO treadle_run_fields (run_id, name, kind, text_value, num_value)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run_id, name) DO UPDATE SET
    kind = excluded.kind, text_value = excluded.text_value, num_value = excluded.num_value"""
"""Set one field of one run (a commit's write)."""

DELETE_FIELD = "DELETE FROM treadle_run_fields WHERE run_id = ? AND name = ?"
"""Unset one field of one run."""

DELETE_RUN_FIELDS = "DELETE FROM treadle_run_fields WHERE run_id = ?"
"""Delete every field of a run (with the run)."""

SELECT_RUN_FIELDS = (
    "SELECT name, kind, text_value, num_value FROM treadle_run_fields WHERE run_id = ?"
    " ORDER BY name"
)
"""A run's fields, by name."""


def field_writes(checkpoints: Sequence[CheckpointRecord]) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements (templates and parameters) that write the field values of commits.

    Several checkpoints of one run committed at once write each field once: its last value.
    """
    if not any(checkpoint.fields for checkpoint in checkpoints):
        return []
    run_id = checkpoints[-1].info.run_id
    writes: list[tuple[str, tuple[Any, ...]]] = []
    for value in merged(checkpoint.fields for checkpoint in checkpoints):
        if value.unset:
            writes.append((DELETE_FIELD, (run_id, value.name)))
        else:
            row = (run_id, value.name, value.kind, value.text, value.number)
            writes.append((UPSERT_FIELD, row))
    return writes


def select_matching(
    tree: Node, *, limit: int | None, before: tuple[float, str] | None
) -> tuple[str, tuple[Any, ...]]:
    """The template of the runs a filter keeps, newest first (as ``list_runs``), and parameters.

    ``before`` is a run's ``(created_at, run_id)``: only the runs listed after it.
    """
    where, parameters = compile_filter(tree)
    if before is not None:
        # Ties on created_at go by insertion order, as the listing's own order does.
        where += (
            " AND (created_at < ? OR (created_at = ? AND {order} <"
            " (SELECT {order} FROM treadle_runs WHERE run_id = ?)))"
        )
        parameters += (before[0], before[0], before[1])
    template = (
        f"SELECT {_RUN_COLUMNS} FROM treadle_runs WHERE {where}"  # noqa: S608 - parameters only
        " ORDER BY created_at DESC, {order} DESC"
    )
    if limit is not None:
        template += " LIMIT ?"
        parameters += (limit,)
    return template, parameters


def count_matching(tree: Node) -> tuple[str, tuple[Any, ...]]:
    """The template counting the runs a filter keeps, and its parameters."""
    where, parameters = compile_filter(tree)
    return f"SELECT COUNT(*) FROM treadle_runs WHERE {where}", parameters  # noqa: S608


def compile_filter(tree: Node) -> tuple[str, tuple[Any, ...]]:
    """A filter's tree as a condition on ``treadle_runs`` (a template) and its parameters."""
    parameters: list[Any] = []
    return _condition(tree, parameters), tuple(parameters)


def _condition(node: Node, parameters: list[Any]) -> str:
    match node:
        case Constant(value=value):
            return "1 = 1" if value else "1 = 0"
        case AllOf(parts=parts):
            return "(" + " AND ".join(_condition(part, parameters) for part in parts) + ")"
        case AnyOf(parts=parts):
            return "(" + " OR ".join(_condition(part, parameters) for part in parts) + ")"
        case Not(inner=inner):
            return f"NOT ({_condition(inner, parameters)})"
        case Has(subject=subject):
            parameters.append(subject.name)
            return "run_id IN (SELECT run_id FROM treadle_run_fields WHERE name = ?)"
        case StartsWith(subject=subject, prefix=prefix):
            return _starts_with(subject, prefix, parameters)
        case Compare(subject=subject, op=op, values=values):
            if subject.field:
                return _field_comparison(subject, op, values, parameters)
            return _column_comparison(subject, op, values, parameters)
    raise AssertionError(node)  # pragma: no cover - every node is matched above


def _column_comparison(
    subject: Subject, op: str, values: tuple[Value, ...], parameters: list[Any]
) -> str:
    column = subject.name  # one of the filter's COLUMNS: checked when read
    if op == "in":
        parameters.extend(value.value for value in values)
        marks = ", ".join("?" * len(values))
        return f"({column} IS NOT NULL AND {column} IN ({marks}))"
    value = values[0]
    if value.kind == "null":
        return f"{column} IS NULL" if op == "==" else f"{column} IS NOT NULL"
    parameters.append(value.value)
    sql_op = "<>" if op == "!=" else "=" if op == "==" else op
    binary = "{binary}" if value.kind == "text" and op not in ("==", "!=") else ""
    return f"({column} IS NOT NULL AND {column}{binary} {sql_op} ?)"


def _field_comparison(
    subject: Subject, op: str, values: tuple[Value, ...], parameters: list[Any]
) -> str:
    if op == "in":
        parts = [_field_comparison(subject, "==", (value,), parameters) for value in values]
        return "(" + " OR ".join(parts) + ")"
    value = values[0]
    parameters.append(subject.name)
    inside = "run_id IN (SELECT run_id FROM treadle_run_fields WHERE name = ?"
    if value.kind == "null":  # == null: the run has no such field; != null: it has one
        return f"{'NOT ' if op == '==' else ''}{inside})"
    sql_op = "<>" if op == "!=" else "=" if op == "==" else op
    if value.kind == "text":
        parameters.append(value.value)
        return f"{inside} AND text_value {sql_op} ?)"
    number = (1.0 if value.value else 0.0) if value.kind == "bool" else value.value
    parameters.extend((value.kind, number))
    return f"{inside} AND kind = ? AND num_value {sql_op} ?)"


def _starts_with(subject: Subject, prefix: str, parameters: list[Any]) -> str:
    """A text range ``[prefix, the next prefix)``, which an index reads as a range."""
    above = next_prefix(prefix)
    if subject.field:
        parameters.append(subject.name)
        head = "run_id IN (SELECT run_id FROM treadle_run_fields WHERE name = ? AND "
        column = "text_value"
    else:
        head = f"({subject.name} IS NOT NULL AND "
        column = subject.name + "{binary}"
    parameters.append(prefix)
    condition = f"{column} >= ?"
    if above is not None:
        parameters.append(above)
        condition += f" AND {column} < ?"
    return f"{head}{condition})"


_SURROGATES = range(0xD800, 0xE000)
_LAST_CHARACTER = 0x10FFFF


def next_prefix(prefix: str) -> str | None:
    """The least text above every text starting with ``prefix`` (``None``: there is none)."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code in _SURROGATES:  # no characters: skip to the first after them
            code = _SURROGATES.stop
        if code <= _LAST_CHARACTER:
            return "".join(chars) + chr(code)
    return None
