"""The SQL stores' statements for the record of actions (see :mod:`treadle._stores._audit`).

An action's record is written in the transaction of its effect, after it:
the audit chain's last entry is read (:data:`LAST_ENTRY`), the next entry
is hashed from it in Python, the run's log gets the action's event
(:data:`LOG_ACTION`, numbered after the run's last event as every event
is) and the chain its entry (:data:`INSERT_ENTRY`).

The chain has one next seq for the whole store, so its writers must take
turns from reading the last entry to committing. SQLite has one writer at a
time anyway. PostgreSQL writers first lock the table against each other
(:data:`LOCK_CHAIN`: a mode that conflicts with itself and not with
readers), and do so last in their transaction, after the run row they
change, so that no two of them wait on each other in a cycle. A commit of
a superstep carrying no action never runs any of these statements.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from treadle._stores._audit import GENESIS
from treadle._stores._events import EventEntry
from treadle._stores._sql_events import LAST_SEQ

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._audit import Recorded

_COLUMNS = "seq, at, run_id, action, actor, door, detail, prev_hash, hash"

LOCK_CHAIN = "LOCK TABLE treadle_audit IN SHARE ROW EXCLUSIVE MODE"
"""PostgreSQL only: writers of the chain take turns until they commit; readers never wait."""

LAST_ENTRY = "SELECT seq, hash FROM treadle_audit ORDER BY seq DESC LIMIT 1"

INSERT_ENTRY = f"INSERT INTO treadle_audit ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"  # noqa: S608 - constants

# One event for the action, at the run's current superstep, numbered after the
# run's last. Parameters: the kind (as JSON text), the time, the data (JSON
# text), the run twice (for the last seq), the run.
LOG_ACTION = f"""
INSERT INTO treadle_events (run_id, first_seq, last_seq, events)
SELECT run_id, log.last + 1, log.last + 1,
    '[[' || superstep || ',' || CAST(? AS TEXT) || ',null,' || CAST(? AS TEXT) || ','
    || CAST(? AS TEXT) || ']]'
FROM treadle_runs, ({LAST_SEQ} AS last) AS log
WHERE run_id = ?"""  # noqa: S608 - constants only

SELECT_ENTRIES = f"SELECT {_COLUMNS} FROM treadle_audit WHERE seq > ? ORDER BY seq"  # noqa: S608 - constants
SELECT_RUN_ENTRIES = (
    f"SELECT {_COLUMNS} FROM treadle_audit WHERE run_id = ? AND seq > ? ORDER BY seq"  # noqa: S608 - constants
)


def entry_of(logged: tuple[Any, ...], superstep: int) -> EventEntry:
    """The event :data:`LOG_ACTION` would log with ``logged`` (its parameters), as an entry.

    For a run whose superstep is known (a new run's), so that it can share a
    row of the log with the events before it.
    """
    kind, at, data, *_ = logged
    return EventEntry(superstep, json.loads(kind), None, float(at), data)


def written(
    record: Recorded, last: Sequence[Any] | None, at: float
) -> tuple[tuple[Any, ...], tuple[Any, ...] | None]:
    """The parameters of :data:`INSERT_ENTRY` and :data:`LOG_ACTION` (``None``: not logged).

    ``last`` is the row :data:`LAST_ENTRY` read (``None``: the chain is empty).
    """
    seq, prev = (int(last[0]) + 1, str(last[1])) if last is not None else (1, GENESIS)
    entry = record.row(seq, at, prev)
    if not record.logged:
        return entry, None
    data = record.event_data(seq, entry[-1])
    run_id = record.run_id
    return entry, (json.dumps(record.action), repr(at), data, run_id, run_id, run_id)
