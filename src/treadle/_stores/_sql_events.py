"""The SQL stores' statements for event logs (see :mod:`treadle._stores._events`).

Events are appended inside the transaction that writes what they belong
to, after that transaction has written the run's row: a writer then holds
the row (PostgreSQL locks it; SQLite has one writer), so the log's last
``seq`` it reads cannot change before it commits, and seqs follow commit
order with no gap and no repeat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._events import EventEntry
    from treadle._stores._records import CheckpointRecord

LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM treadle_events WHERE run_id = ?"

_COLUMNS = "(run_id, seq, superstep, kind, executor_id, at, data)"
_ROW = "(?, ?, ?, ?, ?, ?, ?)"

SELECT_EVENTS = (
    "SELECT seq, superstep, kind, executor_id, at, data FROM treadle_events"
    " WHERE run_id = ? AND seq > ? ORDER BY seq"
)
SELECT_SOME_EVENTS = SELECT_EVENTS + " LIMIT ?"

DELETE_EVENTS = "DELETE FROM treadle_events WHERE run_id = ?"


def insert_events(count: int) -> str:
    """One INSERT for ``count`` events (a template)."""
    rows = ", ".join([_ROW] * count)
    return f"INSERT INTO treadle_events {_COLUMNS} VALUES {rows}"  # noqa: S608 - constants only


def entries_of(checkpoints: Sequence[CheckpointRecord]) -> list[EventEntry]:
    """The events the checkpoints carry, in commit order."""
    if len(checkpoints) == 1:
        return list(checkpoints[0].events)
    return [entry for checkpoint in checkpoints for entry in checkpoint.events]


def event_parameters(run_id: str, last_seq: int, entries: Sequence[EventEntry]) -> list[Any]:
    """The parameters of :func:`insert_events`, numbering the entries after ``last_seq``."""
    parameters: list[Any] = []
    for offset, (superstep, kind, executor_id, at, data) in enumerate(entries, 1):
        parameters += (run_id, last_seq + offset, superstep, kind, executor_id, at, data)
    return parameters


# The store's own record that it changed a run's status on a caller's behalf
# (``by``: "cancel", "pause", "unpause"), at the run's current superstep and
# status; run in the transaction that changed it, after the change. (Braces are
# doubled: templates are format strings.)
LOG_STATUS = """
INSERT INTO treadle_events (run_id, seq, superstep, kind, executor_id, at, data)
SELECT run_id,
    (SELECT COALESCE(MAX(seq), 0) + 1 FROM treadle_events WHERE run_id = ?),
    superstep, 'status_changed', NULL, ?,
    '{{"status": "' || status || '", "by": "' || CAST(? AS TEXT) || '"}}'
FROM treadle_runs WHERE run_id = ?"""


def log_status_parameters(run_id: str, at: float, by: str) -> tuple[Any, ...]:
    """The parameters of :data:`LOG_STATUS`."""
    return (run_id, at, by, run_id)


# What delete_run reads and deletes.
SELECT_DELETABLE = "SELECT owner, lease_until FROM treadle_runs WHERE run_id = ?"
SELECT_FORKS = "SELECT run_id FROM treadle_runs WHERE parent_run_id = ? ORDER BY created_at"
DELETE_CHECKPOINTS = "DELETE FROM treadle_checkpoints WHERE run_id = ? RETURNING refs"
DELETE_RUN = (
    "DELETE FROM treadle_inbox WHERE run_id = ?",
    DELETE_EVENTS,
    "DELETE FROM treadle_runs WHERE run_id = ?",
)
