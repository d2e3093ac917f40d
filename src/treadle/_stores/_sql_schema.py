"""How a database gets the SQL stores' tables: the schema's version and its migrations.

:data:`MIGRATIONS` lists every step a database has ever taken, oldest first,
and :func:`upgrade` says which of them a database still needs; each backend
runs those in one transaction when it opens. The steps are templates, which a
:class:`~treadle._stores._sql_dialect.Dialect` renders for its database; the
tables they create are :mod:`treadle._stores._sql_tables`'.

:data:`DUE_AT` lives here rather than with the statements because a
migration indexes it: the statements that ask for due runs must spell the
expression exactly as the index does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._exceptions import DurabilityError
from treadle._stores import _sql_tables as tables

if TYPE_CHECKING:
    from collections.abc import Sequence

CREATE_SCHEMA_TABLE = "CREATE TABLE IF NOT EXISTS treadle_schema (version INTEGER NOT NULL)"
SELECT_SCHEMA_VERSION = "SELECT version FROM treadle_schema"
INSERT_SCHEMA_VERSION = "INSERT INTO treadle_schema (version) VALUES (?)"
UPDATE_SCHEMA_VERSION = "UPDATE treadle_schema SET version = ?"

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
        tables.CREATE_RUNS,
        "CREATE INDEX treadle_runs_status ON treadle_runs (status)",
        "CREATE INDEX treadle_runs_parent ON treadle_runs (parent_run_id)",
        tables.CREATE_CHECKPOINTS,
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
        tables.CREATE_INBOX,
        "CREATE INDEX treadle_inbox_run ON treadle_inbox (run_id)",
    ),
    (  # 4: one owner per run on every store; answers decided once; parked runs
        "ALTER TABLE treadle_runs ADD COLUMN parked TEXT",
        "ALTER TABLE treadle_inbox ADD COLUMN consumed_at DOUBLE PRECISION",
        # The first answer to a request is the only one, applied or not.
        "CREATE UNIQUE INDEX treadle_inbox_answers"  # noqa: ISC004 - one statement
        " ON treadle_inbox (run_id, target) WHERE kind = 'answer'",
    ),
    (  # 5: checkpoints store what changed, as pieces that checkpoints and forks share
        tables.CREATE_PIECES,
        "CREATE INDEX treadle_pieces_extends ON treadle_pieces (extends)"  # noqa: ISC004 - one statement
        " WHERE extends IS NOT NULL",
        # The ids of the pieces a checkpoint's frame names (a JSON array; NULL: none,
        # as in every checkpoint written before this step: each holds all it needs).
        "ALTER TABLE treadle_checkpoints ADD COLUMN refs TEXT",
    ),
    (  # 6: pausing runs; a paused run is status 'paused', which needs no column
        # When a pause was asked of a run its owner was advancing (NULL: none):
        # the owner's next commit pauses it.
        "ALTER TABLE treadle_runs ADD COLUMN pause_requested DOUBLE PRECISION",
    ),
    (  # 7: each run's event log (see treadle._stores._events)
        tables.CREATE_EVENTS,
        # Newest runs first, for listing and paging through them.
        "CREATE INDEX treadle_runs_created ON treadle_runs (created_at, run_id)",
    ),
    (  # 8: workflow versions: the version of its workflow each run goes on with
        "ALTER TABLE treadle_runs ADD COLUMN version INTEGER NOT NULL DEFAULT 1",
    ),
    (  # 9: people and accountability: who started a run, how it ended, the audit log
        # The actor (JSON, see treadle._values._actors) that started the run: four eyes.
        "ALTER TABLE treadle_runs ADD COLUMN started_by TEXT",
        # A run's named outcome ('approved', 'rejected', ...) and its one-line summary.
        "ALTER TABLE treadle_runs ADD COLUMN outcome TEXT",
        "ALTER TABLE treadle_runs ADD COLUMN outcome_summary TEXT",
        "CREATE INDEX treadle_runs_outcome ON treadle_runs (outcome) WHERE outcome IS NOT NULL",
        tables.CREATE_AUDIT,
        "CREATE INDEX treadle_audit_run ON treadle_audit (run_id, seq)",
        tables.CREATE_TOKENS,
    ),
    (  # 10: reaching people: webhooks, their outbox, answer links
        tables.CREATE_WEBHOOKS,
        tables.CREATE_OUTBOX,
        # The sender's claim: pending rows by due time.
        "CREATE INDEX treadle_outbox_due ON treadle_outbox (state, due_at)",
        # Order per run and endpoint: the earlier pending row of a run and endpoint.
        "CREATE INDEX treadle_outbox_order"  # noqa: ISC004 - one statement
        " ON treadle_outbox (endpoint_id, run_id, state{tiebreak})",
        tables.CREATE_LINKS,
        tables.CREATE_SECRETS,
    ),
    (  # 11: searchable run fields
        tables.CREATE_RUN_FIELDS,
        # Each ends with run_id, which is all a filter's subquery selects: read from the
        # index alone, never from the table row by row.
        "CREATE INDEX treadle_run_fields_text"  # noqa: ISC004 - one statement
        " ON treadle_run_fields (name, text_value, run_id)",
        "CREATE INDEX treadle_run_fields_number"  # noqa: ISC004 - one statement
        " ON treadle_run_fields (name, kind, num_value, run_id)",
    ),
    (  # 12: start policies: deduplication, singletons and queues per key, debounce
        tables.CREATE_STARTS,
        tables.CREATE_START_GATES,
        "CREATE UNIQUE INDEX treadle_starts_dedup"  # noqa: ISC004 - one statement
        " ON treadle_starts (workflow, dedup_id) WHERE dedup_id IS NOT NULL",
        # What an admission reads: the workflow's queued and holding starts.
        "CREATE INDEX treadle_starts_state ON treadle_starts (workflow, state, start_key)",
        # What a service looks for: queued starts whose time has come.
        "CREATE INDEX treadle_starts_due ON treadle_starts (admit_at) WHERE state = 'queued'",
    ),
    (  # 13: call limits: each limit's row and its line of calls (see _stores/_sql_limits.py)
        tables.CREATE_LIMITS,
        tables.CREATE_LIMIT_SLOTS,
        # The head of a line: waiting calls by priority, turn and arrival.
        "CREATE INDEX treadle_limit_slots_line"  # noqa: ISC004 - one statement
        " ON treadle_limit_slots (limit_name, granted_at, priority, turn, arrival)",
        "CREATE INDEX treadle_limit_slots_run ON treadle_limit_slots (run_id)",
    ),
    (  # 14: schedules and the record of their ticks
        tables.CREATE_SCHEDULES,
        "CREATE INDEX treadle_schedules_due ON treadle_schedules (fire_at)",
        tables.CREATE_SCHEDULE_TICKS,
        # Started ticks whose run is not known to exist yet: what a server finishes.
        "CREATE INDEX treadle_schedule_ticks_unstarted"  # noqa: ISC004 - one statement
        " ON treadle_schedule_ticks (schedule_id, nominal_ms)"
        " WHERE action = 'started' AND started = 0",
    ),
    (  # 15: a limit's line keeps its own clock: a change to it is one batch, one round trip
        "ALTER TABLE treadle_limits ADD COLUMN clock DOUBLE PRECISION",
    ),
    (  # 16: a graph description kept once, not in every run row (see _stores/_sql_graphs.py)
        tables.CREATE_GRAPHS,
        "CREATE INDEX treadle_graphs_digest ON treadle_graphs (digest)",
        # NULL: its own ``graph`` column holds it (runs written before this step; pending runs).
        "ALTER TABLE treadle_runs ADD COLUMN graph_digest {blob}",
    ),
    (),  # 17: SQLite packs large event rows (_event_packing.py); older treadles refuse it
    (),  # 18: SQLite writes event rows in layout 2 (_event_rows.py); older treadles refuse it
    (  # 19: sessions signed out, refused by every process serving the store
        tables.CREATE_ENDED_SESSIONS,
        # What a sign-out's sweep reads: the rows whose time has passed.
        "CREATE INDEX treadle_ended_sessions_expiry ON treadle_ended_sessions (expires_at)",
    ),
    (  # 20: a superstep's events in its checkpoint's row (_sql_events.py); older treadles refuse it
        "ALTER TABLE treadle_checkpoints ADD COLUMN first_seq BIGINT",
        "ALTER TABLE treadle_checkpoints ADD COLUMN last_seq BIGINT",
        "ALTER TABLE treadle_checkpoints ADD COLUMN events TEXT",
        # A run's checkpoints, and the rows of its log among them, by one index: every
        # read by run orders its few rows itself, and a commit writes one index, not two.
        "DROP INDEX treadle_checkpoints_run",
        "CREATE INDEX treadle_checkpoints_log ON treadle_checkpoints (run_id, first_seq)",
    ),
)

"""Schema steps in order: step ``i`` takes a database from version ``i`` to ``i + 1``.

The schema version is the number of steps. Only ever append a step; a
released step is never edited, because databases made by it exist. Each
store applies the missing steps in one transaction on open (see :func:`upgrade`).
"""


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


CREATE_NAMED_SCHEMA = "CREATE SCHEMA {}"
"""A PostgreSQL schema for the tables, its name filled in as an identifier (``psycopg.sql``)."""
