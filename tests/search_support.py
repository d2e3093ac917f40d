"""Runs with search fields, filters over them, and the brute-force answer tests compare against.

``filters()`` draws a filter's text together with a predicate that says, in
plain Python written apart from treadle's own matcher, which runs it keeps:
a comparison with a field the run lacks (or holds as another kind) is
false, ``!`` negates, numbers and times compare as numbers, text by code
point. ``sample_runs()`` makes runs with a spread of fields and columns;
``populate_sqlite`` and ``populate_postgres`` write many of them at once
(the test helper for big stores: one transaction, no workflow runs).
"""

from __future__ import annotations

import dataclasses
import operator
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from treadle._stores._records import CheckpointInfo, CheckpointRecord, RunRecord
from treadle._stores._sql_dialect import SQLITE
from treadle._stores._sql_search import UPSERT_FIELD
from treadle._stores._sql_statements import INSERT_RUN, RUN_FIELDS
from treadle._values._search_fields import FieldKind, FieldValue, typed

if TYPE_CHECKING:
    from collections.abc import Sequence

STATUSES = ("completed", "waiting", "awaiting_input", "failed", "running")
OUTCOMES = (None, "approved", "rejected")
WORKFLOWS = ("orders", "refunds")
CUSTOMERS = ("a", "b", "ab", "abc", "b\u00e9", "z", "")
AMOUNTS = (-3.0, 0.0, 5.0, 10.0, 100.5, 1000.0, 2500.0)
BASE = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
DAYS = tuple(BASE + day * 86400.0 for day in range(6))


@dataclasses.dataclass(frozen=True)
class SampleRun:
    """A run as the brute force sees it: its columns and its fields' plain values."""

    run_id: str
    status: str
    outcome: str | None
    workflow: str
    created_at: float
    fields: dict[str, Any]  # name -> str, float, bool or ("time", seconds)

    def field_values(self) -> tuple[FieldValue, ...]:
        """The fields as a commit writes them."""
        values = []
        for name, value in self.fields.items():
            if isinstance(value, tuple):
                moment = datetime.fromtimestamp(value[1], UTC)
                values.append(typed(name, FieldKind.TIME, moment, self.run_id))
            elif isinstance(value, bool):
                values.append(typed(name, FieldKind.BOOL, value, self.run_id))
            elif isinstance(value, str):
                values.append(typed(name, FieldKind.TEXT, value, self.run_id))
            else:
                values.append(typed(name, FieldKind.NUMBER, value, self.run_id))
        return tuple(values)

    def record(self) -> RunRecord:
        """Its run row."""
        return RunRecord(
            run_id=self.run_id,
            workflow=self.workflow,
            status=self.status,
            superstep=1,
            checkpoint_id=f"c-{self.run_id}",
            parent_run_id=None,
            parent_checkpoint_id=None,
            created_at=self.created_at,
            updated_at=self.created_at,
            outcome=self.outcome,
        )

    def first_checkpoint(self) -> CheckpointRecord:
        """A first checkpoint carrying its fields (through the store's own ``create_run``)."""
        info = CheckpointInfo(f"c-{self.run_id}", self.run_id, 1, self.status, None, 0.0)
        return CheckpointRecord(info, b"sealed elsewhere", fields=self.field_values())


def sample_runs(count: int, seed: int = 7) -> list[SampleRun]:
    """``count`` runs with fields drawn from small sets (so filters both keep and drop)."""
    draw = random.Random(seed)
    runs = []
    for number in range(count):
        fields: dict[str, Any] = {}
        if draw.random() < 0.85:
            fields["customer"] = draw.choice(CUSTOMERS)
        if draw.random() < 0.85:
            fields["amount"] = draw.choice(AMOUNTS)
        if draw.random() < 0.6:
            fields["vip"] = draw.random() < 0.5
        if draw.random() < 0.6:
            fields["due"] = ("time", draw.choice(DAYS))
        if draw.random() < 0.05:
            fields["odd"] = draw.choice(("amount", 3.0))  # one name, two kinds across runs
        # Selective ones: a ticket per run, a batch of about count / 1000 runs.
        fields["ticket"] = f"t{number}"
        fields["batch"] = float(number % 1000)
        runs.append(
            SampleRun(
                run_id=f"run-{number:06d}",
                status=draw.choice(STATUSES),
                outcome=draw.choice(OUTCOMES),
                workflow=draw.choice(WORKFLOWS),
                created_at=BASE + number,
                fields=fields,
            )
        )
    return runs


# --- filters, each with its brute-force predicate ---------------------------------------

Predicate = Callable[[SampleRun], bool]
_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _literal(kind: str, value: Any) -> str:
    if kind == "text":
        return _quoted(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "time":
        return f'timestamp("{_iso(value)}")'
    return repr(float(value)) if value != int(value) else str(int(value))


def _kind_of(value: Any) -> tuple[str, Any]:
    if isinstance(value, tuple):
        return "time", value[1]
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, str):
        return "text", value
    return "number", float(value)


def _field_test(name: str, op: str, kind: str, wanted: Any) -> Predicate:
    def test(run: SampleRun) -> bool:
        if name not in run.fields:
            return False
        got_kind, got = _kind_of(run.fields[name])
        return got_kind == kind and _OPS[op](got, wanted)

    return test


@st.composite
def _field_comparison(draw: st.DrawFn) -> tuple[str, Predicate]:
    name, kind, values = draw(
        st.sampled_from(
            [
                ("customer", "text", CUSTOMERS),
                ("amount", "number", AMOUNTS),
                ("vip", "bool", (True, False)),
                ("due", "time", DAYS),
                ("odd", "number", (3.0,)),
                ("odd", "text", ("amount",)),
                ("customer", "number", (5.0,)),  # a kind the field never has
            ]
        )
    )
    value = draw(st.sampled_from(values))
    ops = ("==", "!=") if kind == "bool" else tuple(_OPS)
    op = draw(st.sampled_from(ops))
    text = f"fields.{name} {op} {_literal(kind, value)}"
    return text, _field_test(name, op, kind, value)


@st.composite
def _column_comparison(draw: st.DrawFn) -> tuple[str, Predicate]:
    column = draw(st.sampled_from(["status", "outcome", "workflow", "created_at"]))
    op = draw(st.sampled_from(tuple(_OPS)))
    if column == "created_at":
        value = BASE + draw(st.integers(0, 80))
        return f"created_at {op} {_literal('time', value)}", lambda r: _OPS[op](r.created_at, value)
    choices = {"status": STATUSES, "outcome": OUTCOMES[1:], "workflow": WORKFLOWS}[column]
    wanted = draw(st.sampled_from(choices))

    def test(run: SampleRun) -> bool:
        got = getattr(run, column)
        return got is not None and _OPS[op](got, wanted)

    return f"{column} {op} {_quoted(wanted)}", test


@st.composite
def _other_term(draw: st.DrawFn) -> tuple[str, Predicate]:
    which = draw(st.sampled_from(["has", "null", "in", "starts", "bare", "status_in"]))
    if which == "has":
        name = draw(st.sampled_from(["customer", "amount", "vip", "due", "odd", "none"]))
        return f"has(fields.{name})", lambda r: name in r.fields
    if which == "null":
        op = draw(st.sampled_from(["==", "!="]))
        if draw(st.booleans()):
            return f"outcome {op} null", lambda r: (r.outcome is None) == (op == "==")
        return f"fields.vip {op} null", lambda r: ("vip" not in r.fields) == (op == "==")
    if which == "in":
        wanted = draw(st.lists(st.sampled_from(CUSTOMERS), min_size=1, max_size=3))
        literal = ", ".join(_quoted(w) for w in wanted)
        tests = [_field_test("customer", "==", "text", w) for w in wanted]
        return f"fields.customer in [{literal}]", lambda r: any(test(r) for test in tests)
    if which == "starts":
        prefix = draw(st.sampled_from(["a", "ab", "b", "", "z", "\u00e9"]))
        if draw(st.booleans()):
            return (
                f"fields.customer.startsWith({_quoted(prefix)})",
                lambda r: (
                    isinstance(r.fields.get("customer"), str)
                    and r.fields["customer"].startswith(prefix)
                ),
            )
        return f"status.startsWith({_quoted(prefix)})", lambda r: r.status.startswith(prefix)
    if which == "bare":
        return "fields.vip", lambda r: r.fields.get("vip") is True
    wanted = draw(st.lists(st.sampled_from(STATUSES), min_size=1, max_size=3))
    literal = ", ".join(_quoted(w) for w in wanted)
    return f"status in [{literal}]", lambda r: r.status in wanted


_terms = st.one_of(_field_comparison(), _column_comparison(), _other_term())


def _extend(inner: st.SearchStrategy[tuple[str, Predicate]]) -> st.SearchStrategy[Any]:
    def negate(part: tuple[str, Predicate]) -> tuple[str, Predicate]:
        text, test = part
        return f"!({text})", lambda r: not test(r)

    def combine(parts: list[tuple[str, Predicate]], joiner: str) -> tuple[str, Predicate]:
        text = f" {joiner} ".join(f"({t})" for t, _ in parts)
        tests = [test for _, test in parts]
        if joiner == "&&":
            return text, lambda r: all(test(r) for test in tests)
        return text, lambda r: any(test(r) for test in tests)

    pair = st.lists(inner, min_size=2, max_size=3)
    return st.one_of(
        inner.map(negate),
        pair.map(lambda parts: combine(parts, "&&")),
        pair.map(lambda parts: combine(parts, "||")),
    )


def filters() -> st.SearchStrategy[tuple[str, Predicate]]:
    """A filter's text and its brute-force predicate (nested ``&&``, ``||``, ``!``)."""
    return st.recursive(_terms, _extend, max_leaves=8)


def brute_force(runs: Sequence[SampleRun], test: Predicate) -> set[str]:
    """The ids of the runs ``test`` keeps, by looking at every one."""
    return {run.run_id for run in runs if test(run)}


# --- many runs at once --------------------------------------------------------------------


def _rows(runs: Sequence[SampleRun]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    run_rows = []
    field_rows = []
    for run in runs:
        record = run.record()
        run_rows.append((*(getattr(record, name) for name in RUN_FIELDS), 1, b"", None))
        field_rows.extend(
            (run.run_id, v.name, v.kind, v.text, v.number) for v in run.field_values()
        )
    return run_rows, field_rows


def populate_sqlite(path: str, runs: Sequence[SampleRun]) -> None:
    """Write ``runs`` (rows and fields) into a SQLite store's file in one transaction.

    The store must have opened the file first (its schema is made then).
    Bypasses workflows and checkpoints: only what searching reads is written.
    """
    import sqlite3  # noqa: PLC0415

    run_rows, field_rows = _rows(runs)
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA synchronous = OFF")  # one bulk load: durability is moot
        connection.executemany(SQLITE.render(INSERT_RUN), run_rows)
        connection.executemany(SQLITE.render(UPSERT_FIELD), field_rows)
    connection.close()


async def populate_postgres(dsn: str, schema: str, runs: Sequence[SampleRun]) -> None:
    """Write ``runs`` into a PostgreSQL store's schema with COPY, then ANALYZE the tables.

    ANALYZE is what autovacuum does after a bulk load anyway; the planner then knows the sizes.
    """
    import psycopg  # noqa: PLC0415
    from psycopg import sql  # noqa: PLC0415

    run_rows, field_rows = _rows(runs)
    columns = [*RUN_FIELDS, "lease_epoch", "graph", "graph_digest"]
    async with await psycopg.AsyncConnection.connect(dsn) as connection:
        await connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        copy_runs = sql.SQL("COPY treadle_runs ({}) FROM STDIN").format(
            sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        async with connection.cursor() as cursor:
            async with cursor.copy(copy_runs) as copy:
                for row in run_rows:
                    await copy.write_row(row)
            fields = (
                "COPY treadle_run_fields (run_id, name, kind, text_value, num_value) FROM STDIN"
            )
            async with cursor.copy(fields) as copy:
                for row in field_rows:
                    await copy.write_row(row)
        await connection.commit()
        await connection.set_autocommit(True)
        await connection.execute("ANALYZE treadle_runs")
        await connection.execute("ANALYZE treadle_run_fields")
