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
from treadle._values._filter import (
    COLUMNS,
    AllOf,
    AnyOf,
    Compare,
    Constant,
    Has,
    Node,
    Not,
    StartsWith,
    Subject,
)
from treadle._values._search_fields import merged

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._records import CheckpointRecord
    from treadle._values._filter import Value
    from treadle._values._search_fields import FieldValue

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
    return value_writes(run_id, merged(checkpoint.fields for checkpoint in checkpoints))


def value_writes(run_id: str, values: Sequence[FieldValue]) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements (templates and parameters) that set or unset ``values`` of one run."""
    writes: list[tuple[str, tuple[Any, ...]]] = []
    for value in values:
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
    return _condition(tree, parameters, probe=False), tuple(parameters)


# Which comparison of a field drives an ``&&`` (lower first): the one an index
# narrows most, whatever the planner guesses without statistics of the data. A
# bool has two values, so its equality narrows about as much as a range.
_EQUAL, _PREFIX, _RANGE, _PRESENT, _DIFFERENT = range(5)


def _driving_rank(node: Node) -> int | None:
    """How well ``node`` can drive an ``&&`` through a field's index (``None``: it cannot)."""
    match node:
        case Compare(subject=Subject(field=True), op=op, values=values):
            if values[0].kind == "null":
                return _PRESENT if op == "!=" else None
            if op in ("==", "in"):
                return _RANGE if values[0].kind == "bool" else _EQUAL
            return _DIFFERENT if op == "!=" else _RANGE
        case StartsWith(subject=Subject(field=True)):
            return _PREFIX
        case Has():
            return _PRESENT
    return None


def _condition(node: Node, parameters: list[Any], *, probe: bool) -> str:
    """``node`` as SQL; with ``probe``, written to be checked per run another term found.

    In an ``&&``, one comparison of a field *drives*: its subquery reads the
    field's index and names the runs. The other terms *probe* each of those
    runs: a field through the primary key ``(run_id, name)``, a column with
    its index set aside (``status || ''``), so that no planner starts from a
    column's index or builds the whole set of a wide range instead.
    """
    match node:
        case Constant(value=value):
            return "1 = 1" if value else "1 = 0"
        case AllOf(parts=parts):
            return _all_of(parts, parameters, probe=probe)
        case AnyOf(parts=parts):
            return "(" + " OR ".join(_condition(p, parameters, probe=probe) for p in parts) + ")"
        case Not(inner=inner):
            return f"NOT ({_condition(inner, parameters, probe=probe)})"
        case Has(subject=subject):
            return _field_test(subject, "", (), parameters, probe=probe)
        case StartsWith(subject=subject, prefix=prefix):
            return _starts_with(subject, prefix, parameters, probe=probe)
        case Compare(subject=subject, op=op, values=values):
            if subject.field:
                return _field_comparison(subject, op, values, parameters, probe=probe)
            return _column_comparison(subject, op, values, parameters, probe=probe)
    raise AssertionError(node)  # pragma: no cover - every node is matched above


def _all_of(parts: tuple[Node, ...], parameters: list[Any], *, probe: bool) -> str:
    """An ``&&``: driven by its best comparisons of fields, the rest probing what they find."""
    ranked = [
        (rank, i) for i, part in enumerate(parts) if (rank := _driving_rank(part)) is not None
    ]
    if probe or not ranked:
        written = [_condition(part, parameters, probe=probe) for part in parts]
        return "(" + " AND ".join(written) + ")"
    best = min(ranked)[0]
    drivers = [parts[i] for rank, i in ranked if rank == best]
    if best != _EQUAL:
        drivers = drivers[:1]
    rest = [part for part in parts if not any(part is d for d in drivers)]
    written = [_driving(drivers, parameters)]
    written += [_condition(part, parameters, probe=True) for part in rest]
    return "(" + " AND ".join(written) + ")"


_DRIVEN = "run_id IN ("


def _driving(drivers: list[Node], parameters: list[Any]) -> str:
    """The runs that pass every one of ``drivers`` (comparisons of fields), from their indexes.

    Several equalities drive together, as one ``INTERSECT`` of their
    subqueries: which one keeps fewest runs is unknown without statistics
    of the data, and the intersection costs the sum of them, never a probe
    of each run the least selective one keeps.
    """
    written = [_condition(driver, parameters, probe=False) for driver in drivers]
    if len(written) == 1:
        return written[0]
    selects = []
    for text in written:  # each is run_id IN (SELECT ...): a field's test, as it drives
        assert text.startswith(_DRIVEN), text  # noqa: S101 - every driving rank is written so
        selects.append(text[len(_DRIVEN) : -1])
    return _DRIVEN + " INTERSECT ".join(selects) + ")"


def _column(subject: Subject, *, probe: bool) -> str:
    """A run column, as compared; when probing, in a form no index serves."""
    name = subject.name  # one of the filter's COLUMNS: checked when read
    if not probe:
        return name
    return f"({name} || '')" if COLUMNS[name] == "text" else f"({name} + 0)"


def _column_comparison(
    subject: Subject, op: str, values: tuple[Value, ...], parameters: list[Any], *, probe: bool
) -> str:
    column = _column(subject, probe=probe)
    name = subject.name
    if op == "in":
        parameters.extend(value.value for value in values)
        marks = ", ".join("?" * len(values))
        return f"({name} IS NOT NULL AND {column} IN ({marks}))"
    value = values[0]
    if value.kind == "null":
        return f"{name} IS NULL" if op == "==" else f"{name} IS NOT NULL"
    parameters.append(value.value)
    sql_op = "<>" if op == "!=" else "=" if op == "==" else op
    binary = "{binary}" if value.kind == "text" and op not in ("==", "!=") else ""
    return f"({name} IS NOT NULL AND {column}{binary} {sql_op} ?)"


def _field_test(
    subject: Subject, condition: str, values: tuple[Any, ...], parameters: list[Any], *, probe: bool
) -> str:
    """Whether the run has the field ``subject`` with ``condition`` (on its columns) holding."""
    parameters.append(subject.name)
    parameters.extend(values)
    more = f" AND {condition}" if condition else ""
    if probe:  # one run at a time, through the primary key (run_id, name)
        correlated = "treadle_run_fields.run_id = treadle_runs.run_id"
        return f"EXISTS (SELECT 1 FROM treadle_run_fields WHERE {correlated} AND name = ?{more})"  # noqa: S608
    return f"run_id IN (SELECT run_id FROM treadle_run_fields WHERE name = ?{more})"  # noqa: S608


def _field_comparison(
    subject: Subject, op: str, values: tuple[Value, ...], parameters: list[Any], *, probe: bool
) -> str:
    if op == "in":
        texts = [value.value for value in values if value.kind == "text"]
        kinds = sorted({value.kind for value in values} - {"text"})
        conditions, given = [], []
        if texts:
            conditions.append(f"text_value IN ({', '.join('?' * len(texts))})")
            given.extend(texts)
        for kind in kinds:
            numbers = [_number(value) for value in values if value.kind == kind]
            conditions.append(f"(kind = ? AND num_value IN ({', '.join('?' * len(numbers))}))")
            given.extend((kind, *numbers))
        either = conditions[0] if len(conditions) == 1 else "(" + " OR ".join(conditions) + ")"
        return _field_test(subject, either, tuple(given), parameters, probe=probe)
    value = values[0]
    if value.kind == "null":  # == null: the run has no such field; != null: it has one
        has = _field_test(subject, "", (), parameters, probe=probe)
        return f"NOT {has}" if op == "==" else has
    sql_op = "<>" if op == "!=" else "=" if op == "==" else op
    if value.kind == "text":
        return _field_test(
            subject, f"text_value {sql_op} ?", (value.value,), parameters, probe=probe
        )
    condition = f"kind = ? AND num_value {sql_op} ?"
    return _field_test(subject, condition, (value.kind, _number(value)), parameters, probe=probe)


def _number(value: Value) -> Any:
    """A value as ``num_value`` keeps it (a bool as 1.0 or 0.0)."""
    return (1.0 if value.value else 0.0) if value.kind == "bool" else value.value


def _starts_with(subject: Subject, prefix: str, parameters: list[Any], *, probe: bool) -> str:
    """A text range ``[prefix, the next prefix)``, which an index reads as a range."""
    above = next_prefix(prefix)
    bounds = (prefix,) if above is None else (prefix, above)
    if subject.field:
        condition = "text_value >= ?" + ("" if above is None else " AND text_value < ?")
        return _field_test(subject, condition, bounds, parameters, probe=probe)
    column = _column(subject, probe=probe) + "{binary}"
    parameters.extend(bounds)
    condition = f"{column} >= ?" + ("" if above is None else f" AND {column} < ?")
    return f"({subject.name} IS NOT NULL AND {condition})"


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
