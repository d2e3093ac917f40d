"""The SQL stores' statements about runs and checkpoints, written once for both backends.

Templates in the neutral dialect of :mod:`treadle._stores._sql_dialect`
(``?`` parameters, ``{order}`` and ``{blob}`` for what differs), which each
backend renders with its own dialect. Their parameters and the records made
from the rows they select are :mod:`treadle._stores._sql_rows`'; the
statements about leases, the inbox and claims are
:mod:`treadle._stores._sql_ownership`'s.
"""

from __future__ import annotations

import functools
from typing import Any

from treadle._stores._sql_graphs import GRAPH_OF_RUN
from treadle._stores._sql_schema import DUE_AT

RUN_FIELDS = (
    "run_id",
    "workflow",
    "status",
    "superstep",
    "checkpoint_id",
    "parent_run_id",
    "parent_checkpoint_id",
    "created_at",
    "updated_at",
    "error",
    "wake_at",
    "deadline_at",
    "owner",
    "lease_until",
    "parked",
    "pause_requested",
    "version",
    "outcome",
    "outcome_summary",
    "started_by",
)
"""The run columns every run query selects, in ``RunRecord``'s field order."""

_RUN_COLUMNS = ", ".join(RUN_FIELDS)

INSERT_RUN = f"""
INSERT INTO treadle_runs ({_RUN_COLUMNS}, lease_epoch, graph, graph_digest)
VALUES ({", ".join(["?"] * (len(RUN_FIELDS) + 3))})
ON CONFLICT (run_id) DO NOTHING"""  # noqa: S608 - column names are constants


INSERT_CHECKPOINT = """
INSERT INTO treadle_checkpoints
    (checkpoint_id, run_id, superstep, status, parent_checkpoint_id, created_at, wake_at, blob,
    refs)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (checkpoint_id) DO NOTHING"""

_ONE_CHECKPOINT = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"


@functools.cache
def insert_checkpoints(count: int) -> str:
    """``INSERT_CHECKPOINT`` for ``count`` checkpoints at once: one statement, one round trip."""
    return INSERT_CHECKPOINT.replace(_ONE_CHECKPOINT, ", ".join([_ONE_CHECKPOINT] * count))


ADVANCE_RUN = """
UPDATE treadle_runs
SET status = ?, superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?, error = NULL,
    outcome = ?, outcome_summary = ?
WHERE run_id = ?"""

# ADVANCE_RUN in two statements, for SQLite: it rewrites an index entry (one more
# page in the write-ahead log, on every commit) whenever the SET list names an
# indexed column, changed or not, and most commits leave the status as it was.
ADVANCE_RUN_POSITION = """
UPDATE treadle_runs
SET superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?, error = NULL,
    outcome = ?, outcome_summary = ?
WHERE run_id = ?"""

# Moving a run to another version (under a lease: the fence is appended).
SET_VERSION = "UPDATE treadle_runs SET version = ?, graph = ?, graph_digest = ? WHERE run_id = ?"
# Whether a run holds deliveries no owner has applied (a migration waits for them).
HAS_UNAPPLIED = "SELECT 1 FROM treadle_inbox WHERE run_id = ? AND consumed_at IS NULL LIMIT 1"

CHANGE_STATUS = "UPDATE treadle_runs SET status = ? WHERE run_id = ? AND status <> ?"

SET_STATUS = "UPDATE treadle_runs SET status = ?, error = ?, updated_at = ? WHERE run_id = ?"

SELECT_RUN = f"SELECT {_RUN_COLUMNS} FROM treadle_runs WHERE run_id = ?"  # noqa: S608 - constants

SELECT_RUN_EXISTS = "SELECT 1 FROM treadle_runs WHERE run_id = ?"

SELECT_GRAPH = f"SELECT {GRAPH_OF_RUN} FROM treadle_runs AS r WHERE r.run_id = ?"  # noqa: S608 - constants

# The left join tells "no such run" (no row) from "no such checkpoint" (NULLs)
# in one statement, so the answer comes from a single consistent read.
SELECT_CHECKPOINT = """
SELECT c.checkpoint_id, c.superstep, c.status, c.parent_checkpoint_id, c.created_at, c.wake_at,
    c.blob, c.refs
FROM treadle_runs AS r
LEFT JOIN treadle_checkpoints AS c
    ON c.run_id = r.run_id AND c.checkpoint_id = COALESCE(?, r.checkpoint_id)
WHERE r.run_id = ?"""

# What a resume reads: the run row, its graph and a checkpoint of it.
_RESUMABLE = f"""
SELECT {", ".join("r." + column for column in RUN_FIELDS)}, {GRAPH_OF_RUN},
    c.checkpoint_id, c.superstep, c.status, c.parent_checkpoint_id, c.created_at, c.wake_at,
    c.blob, c.refs
FROM treadle_runs AS r
LEFT JOIN treadle_checkpoints AS c
    ON c.run_id = r.run_id"""  # noqa: S608 - column names are constants

# Everything a resume reads, in one statement: one round trip, one snapshot.
SELECT_RESUMABLE = (
    _RESUMABLE
    + """ AND c.checkpoint_id = COALESCE(?, r.checkpoint_id)
WHERE r.run_id = ?"""
)

# The same for many runs' latest checkpoints at once (a claim batch), in one statement.
SELECT_RESUMABLE_MANY = (
    _RESUMABLE
    + """ AND c.checkpoint_id = r.checkpoint_id
WHERE r.run_id IN ({ids})"""
)

SELECT_CHECKPOINTS = """
SELECT c.checkpoint_id, c.superstep, c.status, c.parent_checkpoint_id, c.created_at, c.wake_at
FROM treadle_runs AS r
LEFT JOIN treadle_checkpoints AS c ON c.run_id = r.run_id
WHERE r.run_id = ?
ORDER BY c.superstep, c.created_at, c.{order}"""

# The checkpoints retention deletes: all but the ``?`` most recently inserted of the
# run, and never its latest whatever its position, so retention can never leave a
# run without a head. Parameters: the run, the run, how many newer ones stay, the run.
_OLD_CHECKPOINTS = """
WHERE run_id = ?
    AND {order} < (
        SELECT {order} FROM treadle_checkpoints WHERE run_id = ?
        ORDER BY {order} DESC LIMIT 1 OFFSET ?
    )
    AND checkpoint_id <> (SELECT checkpoint_id FROM treadle_runs WHERE run_id = ?)"""

# Deletes them. Returns the pieces each named, for the store to collect.
DELETE_OLD_CHECKPOINTS = f"""
DELETE FROM treadle_checkpoints{_OLD_CHECKPOINTS}
RETURNING run_id, checkpoint_id, refs"""  # noqa: S608 - constants only

# First, the events their rows hold go to the log's table (see _sql_events); the
# webhooks' feed, which fed them with their checkpoint, passes them by (_sql_outbox).
MOVE_OLD_EVENTS = f"""
INSERT INTO treadle_events (run_id, first_seq, last_seq, events)
SELECT run_id, first_seq, last_seq, events FROM treadle_checkpoints{_OLD_CHECKPOINTS}
    AND first_seq IS NOT NULL"""  # noqa: S608 - constants only


# What the metrics' treadle_runs gauge reads at each scrape: a few rows, however many runs.
COUNT_RUNS = "SELECT workflow, status, COUNT(*) FROM treadle_runs GROUP BY workflow, status"


def select_runs(
    *,
    status: str | None,
    workflow: str | None,
    parent_run_id: str | None,
    limit: int | None,
    id_prefix: str | None = None,
    before: tuple[float, str] | None = None,
    outcome: str | None = None,
) -> tuple[str, tuple[Any, ...]]:
    """The ``list_runs`` template for the filters given, newest first, with its parameters.

    Each of ``status``, ``workflow``, ``parent_run_id`` and ``outcome`` that
    is not ``None`` is a column's wanted value; ``id_prefix`` is the start of the
    wanted ids; ``before`` a run's ``(created_at, run_id)``, of which only
    the runs listed after it are wanted; ``limit``, when given, caps the
    number of rows.
    """
    given = {
        "status": status,
        "workflow": workflow,
        "parent_run_id": parent_run_id,
        "outcome": outcome,
    }
    wanted = {column: value for column, value in given.items() if value is not None}
    filters = [f"{column} = ?" for column in wanted]
    parameters: tuple[Any, ...] = tuple(wanted.values())
    if id_prefix is not None:
        filters.append("SUBSTR(run_id, 1, ?) = ?")
        parameters += (len(id_prefix), id_prefix)
    if before is not None:
        # Ties on created_at go by insertion order, as the listing's own order does.
        filters.append(
            "(created_at < ? OR (created_at = ? AND {order} <"
            " (SELECT {order} FROM treadle_runs WHERE run_id = ?)))"
        )
        parameters += (before[0], before[0], before[1])
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    template = (
        f"SELECT {_RUN_COLUMNS} FROM treadle_runs{where}"  # noqa: S608 - constant column names only
        f" ORDER BY created_at DESC, {{order}} DESC"
    )
    return _limited(template, parameters, limit)


def scans_runs(
    *,
    status: str | None,
    workflow: str | None,
    parent_run_id: str | None,
    limit: int | None,
    id_prefix: str | None,
    outcome: str | None,
) -> bool:
    """Whether :func:`select_runs`'s query for these filters reads rows in proportion to the store.

    Not when it reads a run's forks (the index on ``parent_run_id``), nor a
    limit's worth of runs from the newest on (the index on ``created_at``
    gives them in order; ``before`` skips the newer of its entries). A column's
    value or an id prefix keeps runs no index gives in that order: all of
    them are read and sorted before the first is returned; so is every run
    without a limit.
    """
    if parent_run_id is not None:
        return False
    narrowed = status is not None or workflow is not None or outcome is not None
    return limit is None or narrowed or id_prefix is not None


COUNT_DUE = f"SELECT COUNT(*) FROM treadle_runs WHERE {DUE_AT} <= ?"  # noqa: S608 - a constant
"""How many runs are due, counted on the index that holds only runs that can fall due."""


def select_due_runs(now: float, limit: int | None) -> tuple[str, tuple[Any, ...]]:
    """The ``due_runs`` template, due first (then by creation), with its parameters."""
    template = (
        f"SELECT {_RUN_COLUMNS} FROM treadle_runs"  # noqa: S608 - constant column names only
        f" WHERE {DUE_AT} <= ? ORDER BY {DUE_AT}, {{order}}"
    )
    return _limited(template, (now,), limit)


def _limited(
    template: str, parameters: tuple[Any, ...], limit: int | None
) -> tuple[str, tuple[Any, ...]]:
    if limit is None:
        return template, parameters
    return f"{template} LIMIT ?", (*parameters, limit)
