"""A run's log as its rows lie in a SQLite file: in ``treadle_events``, and in checkpoints.

A commit of one checkpoint keeps its superstep's events in the checkpoint's
row; every other write keeps a row of ``treadle_events`` (see
``treadle/_stores/_sql_events.py``). Tests that look at the rows themselves
read both, as the store does, through :data:`LOG_ROWS`: each row's run,
seqs, events and ``home`` (the table it lies in, for a test that damages one).
Tests comparing a SQLite store's log with the memory store's compare
:func:`comparable` events.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from treadle._stores._events import LoggedEvent

LOG_ROWS = (
    "(SELECT run_id, first_seq, last_seq, events, 'treadle_events' AS home"
    " FROM treadle_events UNION ALL"
    " SELECT run_id, first_seq, last_seq, events, 'treadle_checkpoints' AS home"
    " FROM treadle_checkpoints WHERE first_seq IS NOT NULL)"
)


def comparable(events: Iterable[LoggedEvent]) -> list[tuple[Any, ...]]:
    """The events, less what each store or process makes its own: ids, hashes, owners."""
    own = {"checkpoint_id", "audit", "by"}
    return [
        (
            e.seq,
            e.superstep,
            e.kind,
            e.executor_id,
            {k: v for k, v in e.data.items() if k not in own},
        )
        for e in events
    ]


def rows_of(path: Path, run_id: str, columns: str) -> list[tuple[Any, ...]]:
    """``columns`` of each row of the run's log in the file at ``path``, in seq order."""
    with sqlite3.connect(path) as db:
        return db.execute(
            f"SELECT {columns} FROM {LOG_ROWS} AS log WHERE run_id = ? ORDER BY first_seq",  # noqa: S608 - a test's columns
            (run_id,),
        ).fetchall()
