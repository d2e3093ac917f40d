"""What the SQL stores share: schema, migrations and statements.

Every statement is written once, in the subset of SQL that SQLite and
PostgreSQL agree on (``TEXT``, ``BIGINT``, ``DOUBLE PRECISION``,
``INSERT ... ON CONFLICT DO NOTHING``, ``LIMIT``), as a template. A
:class:`Dialect` (:data:`SQLITE`, :data:`POSTGRES`) fills in the few parts
that differ: the bytes column type, the driver's parameter marker, and the
column that records insertion order. A backend renders the templates it
needs once, with its own dialect.

Insertion order matters twice: it breaks ties between rows with equal
timestamps, and retention keeps the most recently *committed* checkpoints,
which is the order a run actually moved in even when it was resumed from an
older point and so went back to a smaller superstep.

The port's own rules come at the end: the argument checks and when a run is
due, shared by every store (``MemoryStore`` included) so that all refuse the
same calls and wake the same runs alike. Ownership (leases, fencing, the
inbox) has its statements and rules in :mod:`treadle._stores._sql_ownership`;
parameters and records from rows are :mod:`treadle._stores._sql_rows`'.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._exceptions import DurabilityError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord


@dataclass(frozen=True, slots=True)
class Dialect:
    """The parts of the SQL that differ between backends, and nothing else.

    Attributes:
        blob_type: Column type for opaque bytes (``BLOB``, ``BYTEA``).
        placeholder: The driver's parameter marker (``?``, ``%s``); templates
            use ``?``.
        insertion_order: A column that grows with every insert, in both
            tables (SQLite's implicit ``rowid``; an identity column elsewhere).
        insertion_order_column: DDL declaring that column, followed by a
            comma; empty when the database provides it implicitly, as then
            (SQLite's ``rowid``) every index ends with it implicitly too.
    """

    blob_type: str
    placeholder: str
    insertion_order: str
    insertion_order_column: str

    def render(self, template: str) -> str:
        """Turn a template of this module into SQL for this dialect."""
        # An explicit order column must be named where an index breaks ties by it.
        tiebreak = f", {self.insertion_order}" if self.insertion_order_column else ""
        sql = template.format(
            blob=self.blob_type,
            order=self.insertion_order,
            order_column=self.insertion_order_column,
            tiebreak=tiebreak,
        )
        # Templates hold no literal question marks, so the rewrite is exact.
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)


SQLITE = Dialect(
    blob_type="BLOB", placeholder="?", insertion_order="rowid", insertion_order_column=""
)
"""SQLite: ``rowid`` never decreases here because the newest row of a run is never deleted."""

POSTGRES = Dialect(
    blob_type="BYTEA",
    placeholder="%s",
    insertion_order="seq",
    insertion_order_column="seq BIGINT GENERATED ALWAYS AS IDENTITY,",
)
"""PostgreSQL: an identity column, in commit order per run (a commit locks its run row first)."""

# --- schema -----------------------------------------------------------------

CREATE_SCHEMA_TABLE = "CREATE TABLE IF NOT EXISTS treadle_schema (version INTEGER NOT NULL)"
SELECT_SCHEMA_VERSION = "SELECT version FROM treadle_schema"
INSERT_SCHEMA_VERSION = "INSERT INTO treadle_schema (version) VALUES (?)"
UPDATE_SCHEMA_VERSION = "UPDATE treadle_schema SET version = ?"

_CREATE_RUNS = """
CREATE TABLE treadle_runs (
    {order_column}
    run_id TEXT NOT NULL PRIMARY KEY,
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    superstep BIGINT NOT NULL,
    checkpoint_id TEXT,
    parent_run_id TEXT,
    parent_checkpoint_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    error TEXT,
    graph {blob} NOT NULL
)"""

_CREATE_CHECKPOINTS = """
CREATE TABLE treadle_checkpoints (
    {order_column}
    checkpoint_id TEXT NOT NULL PRIMARY KEY,
    run_id TEXT NOT NULL,
    superstep BIGINT NOT NULL,
    status TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    blob {blob} NOT NULL
)"""

# What clients deliver to a run while no worker holds it (or while one does):
# its start input, answers to requests, session messages. A worker applies a
# run's items and deletes them in the transaction of the run's next commit.
_CREATE_INBOX = """
CREATE TABLE treadle_inbox (
    {order_column}
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    payload {blob} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
)"""

# When due_runs counts a run as due: for a waiting or awaiting_input run, the
# earlier of its wake_at and deadline_at that is set (LEAST() in PostgreSQL,
# which SQLite lacks); NULL for any other run, or one with neither.
#
# Migration 2 indexes this very expression, and due_runs asks for
# ``DUE_AT <= ?`` ordered by it, so the index holds only runs that can fall
# due, already in due order: due_runs reads it from its start and stops at
# ``now`` or at its limit, sorting nothing. Nothing else can serve that query,
# so even SQLite's planner without statistics picks this index (with the status
# spelled outside, it takes the status index and sorts). Ties go by insertion
# order, which ends every SQLite index implicitly and this one explicitly in
# PostgreSQL. A planner only matches an index on an expression to the same
# expression, hence one constant; as migration 2 is made of it, changing it
# takes a migration of its own.
DUE_AT = (
    "(CASE WHEN status IN ('waiting', 'awaiting_input') THEN"
    " (CASE WHEN wake_at IS NULL OR deadline_at < wake_at THEN deadline_at ELSE wake_at END)"
    " END)"
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: runs and checkpoints
        _CREATE_RUNS,
        "CREATE INDEX treadle_runs_status ON treadle_runs (status)",
        "CREATE INDEX treadle_runs_parent ON treadle_runs (parent_run_id)",
        _CREATE_CHECKPOINTS,
        "CREATE INDEX treadle_checkpoints_run"  # noqa: ISC004 - one statement, split for width
        " ON treadle_checkpoints (run_id, superstep, created_at)",
    ),
    (  # 2: durable timers and deadlines
        "ALTER TABLE treadle_runs ADD COLUMN wake_at DOUBLE PRECISION",
        "ALTER TABLE treadle_runs ADD COLUMN deadline_at DOUBLE PRECISION",
        "ALTER TABLE treadle_checkpoints ADD COLUMN wake_at DOUBLE PRECISION",
        f"CREATE INDEX treadle_runs_due ON treadle_runs ({DUE_AT}{{tiebreak}})"  # noqa: ISC004 - one statement
        f" WHERE {DUE_AT} IS NOT NULL",
    ),
    (  # 3: runs as a queue for workers (leases, fencing) and their inbox
        "ALTER TABLE treadle_runs ADD COLUMN owner TEXT",
        "ALTER TABLE treadle_runs ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE treadle_runs ADD COLUMN lease_until DOUBLE PRECISION",
        "ALTER TABLE treadle_runs ADD COLUMN ready_at DOUBLE PRECISION",
        "ALTER TABLE treadle_runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX treadle_runs_ready ON treadle_runs (ready_at) WHERE ready_at IS NOT NULL",
        _CREATE_INBOX,
        "CREATE INDEX treadle_inbox_run ON treadle_inbox (run_id)",
    ),
    (  # 4: one owner per run on every store; answers decided once; parked runs
        "ALTER TABLE treadle_runs ADD COLUMN parked TEXT",
        "ALTER TABLE treadle_inbox ADD COLUMN consumed_at DOUBLE PRECISION",
        # The first answer to a request is the only one, applied or not.
        "CREATE UNIQUE INDEX treadle_inbox_answers"  # noqa: ISC004 - one statement
        " ON treadle_inbox (run_id, target) WHERE kind = 'answer'",
    ),
)
"""Schema steps in order: step ``i`` takes a database from version ``i`` to ``i + 1``.

The schema version is the number of steps. Only ever append a step; a
released step is never edited, because databases made by it exist. Each
store applies the missing steps in one transaction on open (see :func:`upgrade`).
"""

# --- statements ---------------------------------------------------------------

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
)
"""The run columns every run query selects, in ``RunRecord``'s field order."""

_RUN_COLUMNS = ", ".join(RUN_FIELDS)

INSERT_RUN = f"""
INSERT INTO treadle_runs ({_RUN_COLUMNS}, lease_epoch, graph)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id) DO NOTHING"""  # noqa: S608 - column names are constants

INSERT_CHECKPOINT = """
INSERT INTO treadle_checkpoints
    (checkpoint_id, run_id, superstep, status, parent_checkpoint_id, created_at, wake_at, blob)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (checkpoint_id) DO NOTHING"""

_ONE_CHECKPOINT = "(?, ?, ?, ?, ?, ?, ?, ?)"


@functools.cache
def insert_checkpoints(count: int) -> str:
    """``INSERT_CHECKPOINT`` for ``count`` checkpoints at once: one statement, one round trip."""
    return INSERT_CHECKPOINT.replace(_ONE_CHECKPOINT, ", ".join([_ONE_CHECKPOINT] * count))


ADVANCE_RUN = """
UPDATE treadle_runs
SET status = ?, superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?, error = NULL
WHERE run_id = ?"""

# ADVANCE_RUN in two statements, for SQLite: it rewrites an index entry (one more
# page in the write-ahead log, on every commit) whenever the SET list names an
# indexed column, changed or not, and most commits leave the status as it was.
ADVANCE_RUN_POSITION = """
UPDATE treadle_runs
SET superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?, error = NULL
WHERE run_id = ?"""

CHANGE_STATUS = "UPDATE treadle_runs SET status = ? WHERE run_id = ? AND status <> ?"

SET_STATUS = "UPDATE treadle_runs SET status = ?, error = ?, updated_at = ? WHERE run_id = ?"

SELECT_RUN = f"SELECT {_RUN_COLUMNS} FROM treadle_runs WHERE run_id = ?"  # noqa: S608 - constants

SELECT_RUN_EXISTS = "SELECT 1 FROM treadle_runs WHERE run_id = ?"

SELECT_GRAPH = "SELECT graph FROM treadle_runs WHERE run_id = ?"

# The left join tells "no such run" (no row) from "no such checkpoint" (NULLs)
# in one statement, so the answer comes from a single consistent read.
SELECT_CHECKPOINT = """
SELECT c.checkpoint_id, c.superstep, c.status, c.parent_checkpoint_id, c.created_at, c.wake_at,
    c.blob
FROM treadle_runs AS r
LEFT JOIN treadle_checkpoints AS c
    ON c.run_id = r.run_id AND c.checkpoint_id = COALESCE(?, r.checkpoint_id)
WHERE r.run_id = ?"""

# Everything a resume reads, in one statement: one round trip, one snapshot.
SELECT_RESUMABLE = f"""
SELECT {", ".join("r." + column for column in RUN_FIELDS)}, r.graph,
    c.checkpoint_id, c.superstep, c.status, c.parent_checkpoint_id, c.created_at, c.wake_at,
    c.blob
FROM treadle_runs AS r
LEFT JOIN treadle_checkpoints AS c
    ON c.run_id = r.run_id AND c.checkpoint_id = COALESCE(?, r.checkpoint_id)
WHERE r.run_id = ?"""  # noqa: S608 - column names are constants

SELECT_CHECKPOINTS = """
SELECT c.checkpoint_id, c.superstep, c.status, c.parent_checkpoint_id, c.created_at, c.wake_at
FROM treadle_runs AS r
LEFT JOIN treadle_checkpoints AS c ON c.run_id = r.run_id
WHERE r.run_id = ?
ORDER BY c.superstep, c.created_at, c.{order}"""

# Keeps the ``?`` most recently inserted checkpoints of the run, and its latest
# whatever its position, so retention can never leave a run without a head.
DELETE_OLD_CHECKPOINTS = """
DELETE FROM treadle_checkpoints
WHERE run_id = ?
    AND {order} < (
        SELECT {order} FROM treadle_checkpoints WHERE run_id = ?
        ORDER BY {order} DESC LIMIT 1 OFFSET ?
    )
    AND checkpoint_id <> (SELECT checkpoint_id FROM treadle_runs WHERE run_id = ?)"""


def select_runs(
    *, status: str | None, workflow: str | None, parent_run_id: str | None, limit: int | None
) -> tuple[str, tuple[Any, ...]]:
    """The ``list_runs`` template for the filters given, newest first, with its parameters.

    Each argument but ``limit`` that is not ``None`` is a column's wanted
    value; ``limit``, when given, caps the number of rows.
    """
    given = {"status": status, "workflow": workflow, "parent_run_id": parent_run_id}
    wanted = {column: value for column, value in given.items() if value is not None}
    filters = " AND ".join(f"{column} = ?" for column in wanted)
    where = f" WHERE {filters}" if filters else ""
    template = (
        f"SELECT {_RUN_COLUMNS} FROM treadle_runs{where}"  # noqa: S608 - constant column names only
        f" ORDER BY created_at DESC, {{order}} DESC"
    )
    return _limited(template, tuple(wanted.values()), limit)


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


def upgrade(
    found: int | None, location: str, steps: Sequence[Sequence[str]]
) -> list[tuple[str, tuple[int, ...]]]:
    """What takes a database from schema version ``found`` to the newest of ``steps``.

    Args:
        found: The version recorded in the database; ``None`` when none is
            (a new database, or one made before versions were recorded).
        location: Names the database in errors.
        steps: The migrations, normally :data:`MIGRATIONS`.

    Returns:
        Templates with their parameters, to run in order in one transaction;
        empty when the database is current.

    Raises:
        DurabilityError: The database was written by a newer treadle.
    """
    version = found or 0
    if version > len(steps):
        raise DurabilityError(
            f"{location} has schema version {version}, newer than version {len(steps)} "
            f"that this treadle knows; upgrade treadle to open it"
        )
    if version == len(steps):
        return []
    statements: list[tuple[str, tuple[int, ...]]] = [
        (statement, ()) for step in steps[version:] for statement in step
    ]
    record = INSERT_SCHEMA_VERSION if found is None else UPDATE_SCHEMA_VERSION
    statements.append((record, (len(steps),)))
    return statements


# --- the port's rules, which every store applies ------------------------------


def due_at(run: RunRecord) -> float | None:
    """When ``due_runs`` counts ``run`` as due; ``None``: never, as it stands.

    The earlier of its ``wake_at`` and ``deadline_at`` that is set, for a run
    that is ``waiting`` or ``awaiting_input``: ``DUE_AT`` in Python.
    """
    if run.status not in {"waiting", "awaiting_input"}:
        return None
    times = [time for time in (run.wake_at, run.deadline_at) if time is not None]
    return min(times, default=None)


def check_keep_last(keep_last: int | None) -> None:
    """Refuse a retention setting that would have to delete a run's latest checkpoint.

    Raises:
        ValueError: ``keep_last`` is below 1.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError(
            f"keep_last must be at least 1 (the latest is always kept), got {keep_last}"
        )


def check_limit(limit: int | None) -> None:
    """Refuse a negative ``list_runs`` or ``due_runs`` limit.

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")


def last_of_one_run(checkpoints: Sequence[CheckpointRecord]) -> CheckpointInfo:
    """The last of checkpoints that ``commit_many`` takes, once they are found fit to take.

    Raises:
        ValueError: there are none, they belong to more than one run, or an
            id appears twice.
    """
    if not checkpoints:
        raise ValueError("commit_many needs at least one checkpoint")
    last = checkpoints[-1].info
    runs = {c.info.run_id for c in checkpoints}
    if len(runs) > 1:
        raise ValueError(f"checkpoints committed together belong to one run, not {sorted(runs)}")
    if len({c.info.checkpoint_id for c in checkpoints}) < len(checkpoints):
        raise ValueError(f"checkpoints committed together to run {last.run_id!r} repeat an id")
    return last


def taken_ids_message(checkpoints: Sequence[CheckpointRecord]) -> str:
    """What a store says when an insert of ``checkpoints`` found an id already taken."""
    if len(checkpoints) == 1:
        return f"checkpoint id {checkpoints[0].info.checkpoint_id!r} is taken"
    ids = ", ".join(repr(c.info.checkpoint_id) for c in checkpoints)
    return f"one of the checkpoint ids {ids} is taken"


def first_checkpoint_id(run: RunRecord, first: CheckpointInfo) -> str:
    """The id ``create_run`` stores as the new run's latest: the first checkpoint's.

    Raises:
        ValueError: ``first`` belongs to another run, or ``run`` names another
            checkpoint as its latest.
    """
    if first.run_id != run.run_id:
        raise ValueError(
            f"first checkpoint {first.checkpoint_id!r} belongs to run {first.run_id!r}, "
            f"not to {run.run_id!r}"
        )
    if run.checkpoint_id not in {None, first.checkpoint_id}:
        raise ValueError(
            f"run {run.run_id!r} names checkpoint {run.checkpoint_id!r} as its latest, "
            f"but its first checkpoint is {first.checkpoint_id!r}"
        )
    return first.checkpoint_id
