"""The sync driver of the SQL stores' write plans, and ``SqliteStore``'s writes through it.

:func:`drive` executes a plan's steps (see
:mod:`treadle._stores._write_steps`) with sqlite3 on the store's writer
connection, blocking, inside the transaction its caller began; the other
functions start the plan of one write with :data:`SQLITE_WRITES`, so that the
store's work items stay ``(connection) -> result`` callables it can retry
(a plan runs once: each call makes a new one).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._stores import _write_parts, _write_plans
from treadle._stores._sql_dialect import SQLITE
from treadle._stores._write_steps import ALL, COUNT, ONE, SQLITE_WRITES

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence

    from treadle._stores._audit import Recorded
    from treadle._stores._records import CheckpointRecord, Lease
    from treadle._stores._write_plans import Owned
    from treadle._stores._write_steps import Plan, Step

_T = TypeVar("_T")

# Each template is rendered once; the driver then caches the prepared statement.
_render = functools.cache(SQLITE.render)


def drive(plan: Plan[_T], connection: sqlite3.Connection) -> _T:
    """Execute ``plan`` on ``connection``, in its caller's transaction; return its outcome.

    A step wanting one row reads them all: a write's ``RETURNING`` rows must
    be read for its statement to finish before the transaction commits.
    """
    execute = connection.execute
    try:
        template, parameters, want, _ = next(plan)
        while True:
            cursor = execute(_render(template), parameters)
            got: Any = None
            if want is COUNT:
                got = cursor.rowcount
            elif want is ONE:
                rows = cursor.fetchall()
                got = rows[0] if rows else None
            elif want is ALL:
                got = cursor.fetchall()
            template, parameters, want, _ = plan.send(got)
    except StopIteration as done:
        outcome: _T = done.value
        return outcome


def run_batch(steps: Sequence[Step], connection: sqlite3.Connection) -> list[Any]:
    """Execute ``steps`` in order, in the caller's transaction; each one's answer, in order."""

    def each() -> Plan[list[Any]]:
        answers = []
        for step in steps:
            answers.append((yield step))  # noqa: PERF401 - no yield in a comprehension
        return answers

    return drive(each(), connection)


def commit(
    checkpoints: Sequence[CheckpointRecord],
    keep_last: int | None,
    owned: Owned | None,
    connection: sqlite3.Connection,
) -> bool:
    """Commit checkpoints of one run; ``True`` when that paused the run (a pause was asked)."""
    return drive(_write_plans.commit(checkpoints, keep_last, owned, SQLITE_WRITES), connection)


def record(connection: sqlite3.Connection, records: Iterable[Recorded], at: float) -> None:
    """Write each action's audit entry and its event in its run's log, in this transaction."""
    drive(_write_parts.record(records, at, SQLITE_WRITES), connection)


def refusal(connection: sqlite3.Connection, run_id: str, lease: Lease | None) -> Exception:
    """Why a write changed no row: no such run, or (under a lease) the lease is gone."""
    return drive(_write_parts.refusal(run_id, lease), connection)
