"""The SQL stores' tables and how a database gets them: the schema and its migrations.

:data:`MIGRATIONS` lists every step a database has ever taken, oldest first,
and :func:`upgrade` says which of them a database still needs; each backend
runs those in one transaction when it opens. The steps are templates, which a
:class:`~treadle._stores._sql_dialect.Dialect` renders for its database.

:data:`DUE_AT` lives here rather than with the statements because a
migration indexes it: the statements that ask for due runs must spell the
expression exactly as the index does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._exceptions import DurabilityError

if TYPE_CHECKING:
    from collections.abc import Sequence

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

# The parts checkpoints share (see treadle._stores._store.Piece). A piece is
# found by its id, and by the id of the piece it extends when retention asks
# whether anything still extends it.
_CREATE_PIECES = """
CREATE TABLE treadle_pieces (
    piece_id TEXT NOT NULL PRIMARY KEY,
    extends TEXT,
    blob {blob} NOT NULL
)"""

# A run's event log, a row per write: the seqs of its events (their places in
# the run's log, 1, 2, ..., given in commit order by the transaction that
# writes them) and the events as a JSON array (see _sql_events).
_CREATE_EVENTS = """
CREATE TABLE treadle_events (
    run_id TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
)"""

# The store's audit log: every action taken on any run, with its actor, kept
# after the run is deleted or pruned. Entries are numbered 1, 2, 3, ... across
# the store and hash-chained: ``hash`` is the SHA-256 of ``prev_hash`` and the
# entry's other fields, so an edited, reordered or removed entry breaks the
# chain (``treadle audit --verify``). The entry of seq N is written in the
# transaction of the action's effect, after reading the entry of seq N - 1,
# which the primary key makes one writer's at a time.
_CREATE_AUDIT = """
CREATE TABLE treadle_audit (
    seq BIGINT NOT NULL PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
    run_id TEXT,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    door TEXT NOT NULL,
    detail TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
)"""

# Named API tokens for treadle serve: only a hash of each token is kept.
_CREATE_TOKENS = """
CREATE TABLE treadle_tokens (
    name TEXT NOT NULL PRIMARY KEY,
    role TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL,
    expires_at DOUBLE PRECISION,
    last_used_at DOUBLE PRECISION,
    revoked_at DOUBLE PRECISION
)"""

# Outbound webhooks (see treadle._stores._outbox): the endpoints, each with the
# events it wants (comma-separated), its signing secret, and the answer link its
# request.created messages carry (JSON; NULL: none).
_CREATE_WEBHOOKS = """
CREATE TABLE treadle_webhooks (
    endpoint_id TEXT NOT NULL PRIMARY KEY,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    backoff DOUBLE PRECISION NOT NULL,
    deadline_lead DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    answer_links TEXT
)"""

# The webhooks' outbox: a row per message and endpoint, written by a trigger on
# treadle_events in the transaction of the event that causes it (the trigger
# exists while an endpoint does). ``event`` is the logged event as the log keeps
# it ([superstep, kind, executor_id, at, data]); ``state`` is 'pending' until
# sent (the row is then deleted), 'dead' past the endpoint's attempts.
_CREATE_OUTBOX = """
CREATE TABLE treadle_outbox (
    {order_column}
    endpoint_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    event_seq BIGINT NOT NULL,
    event_type TEXT NOT NULL,
    event TEXT NOT NULL,
    due_at DOUBLE PRECISION NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION,
    last_error TEXT
)"""

# Signed single-use answer links: a row per link, its nonce the key; ``used_at``
# set by the one use the link gets.
_CREATE_LINKS = """
CREATE TABLE treadle_links (
    nonce TEXT NOT NULL PRIMARY KEY,
    run_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL,
    used_at DOUBLE PRECISION,
    used_by TEXT
)"""

# The store's own secrets (the answer links' signing key), made on first use.
_CREATE_SECRETS = """
CREATE TABLE treadle_secrets (
    name TEXT NOT NULL PRIMARY KEY,
    secret TEXT NOT NULL
)"""

# Searchable run fields (see treadle._values._search_fields): a row per run and
# field its workflow declares, written by the commits of the run in their
# transaction. A text in ``text_value`` (ordered by code point: {binary}); a
# number, a time (epoch seconds) or a bool (1 or 0) in ``num_value``, ``kind``
# saying which. A filter's comparison of a field reads one of the two indexes
# from the field's name and the value on (treadle._stores._sql_search).
# Start policies (see treadle._stores._starts): a row per run started under
# one. ``start_key`` is the key its policy computed ('' for none); ``per_key``
# and ``concurrency`` how many runs of one key and of the workflow may hold a
# slot at once (NULL: no cap); ``debounce`` its window in seconds (NULL: none).
# ``state`` is 'queued' (waiting to start, from ``admit_at`` on), 'holding'
# (admitted: it holds a slot until its run ends) or 'done'. ``dedup_id`` is
# unique per workflow: a second start with it finds the first run.
_CREATE_STARTS = """
CREATE TABLE treadle_starts (
    {order_column}
    run_id TEXT NOT NULL PRIMARY KEY,
    workflow TEXT NOT NULL,
    start_key TEXT NOT NULL,
    dedup_id TEXT,
    per_key INTEGER,
    concurrency INTEGER,
    debounce DOUBLE PRECISION,
    state TEXT NOT NULL,
    admit_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL
)"""

# One row per workflow started under a policy: the lock its admissions take
# turns on (PostgreSQL's FOR UPDATE; SQLite's one writer takes turns already).
_CREATE_START_GATES = """
CREATE TABLE treadle_start_gates (
    workflow TEXT NOT NULL PRIMARY KEY
)"""

_CREATE_RUN_FIELDS = """
CREATE TABLE treadle_run_fields (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    text_value TEXT{binary},
    num_value DOUBLE PRECISION,
    PRIMARY KEY (run_id, name)
)"""

# Call limits (DESIGN 18): a limit's terms as last used, the counter of arrivals in
# its line, the turn being served (round robin across keys) and a slow-down.
_CREATE_LIMITS = """
CREATE TABLE treadle_limits (
    limit_name TEXT NOT NULL PRIMARY KEY,
    concurrency BIGINT,
    calls BIGINT,
    per DOUBLE PRECISION,
    arrivals BIGINT NOT NULL,
    serving BIGINT NOT NULL,
    paused_until DOUBLE PRECISION
)"""

# A limit's line: a row per call waiting (granted_at NULL), holding a slot
# (released_at NULL) or released within the rate's window. A slot counts while
# the lease it was taken under (run_id, lease_epoch) is its run's and current.
_CREATE_LIMIT_SLOTS = """
CREATE TABLE treadle_limit_slots (
    limit_name TEXT NOT NULL,
    call_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    lease_epoch BIGINT NOT NULL,
    call_key TEXT NOT NULL,
    priority BIGINT NOT NULL,
    turn BIGINT NOT NULL,
    arrival BIGINT NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    entered_at DOUBLE PRECISION NOT NULL,
    gate TEXT NOT NULL,
    noticed INTEGER NOT NULL,
    granted_at DOUBLE PRECISION,
    released_at DOUBLE PRECISION,
    PRIMARY KEY (limit_name, call_id)
)"""


# Schedules (see treadle._stores._schedules): a row per schedule, its spec as JSON
# the store never reads, its cursor (the next tick's nominal time and when it is due,
# the ticks buffered for a running run as a JSON array, the run it started last),
# and a revision that every change moves on: a tick is decided against it.
_CREATE_SCHEDULES = """
CREATE TABLE treadle_schedules (
    schedule_id TEXT NOT NULL PRIMARY KEY,
    workflow TEXT NOT NULL,
    spec TEXT NOT NULL,
    paused INTEGER NOT NULL,
    note TEXT,
    next_at DOUBLE PRECISION,
    fire_at DOUBLE PRECISION,
    buffered TEXT NOT NULL,
    last_run_id TEXT,
    revision BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    updated_by TEXT NOT NULL
)"""

# The record of a schedule's ticks, one row per nominal time (whole milliseconds):
# the key that makes a tick decided once. ``started`` is 1 once the run a
# started tick names is known to exist.
_CREATE_SCHEDULE_TICKS = """
CREATE TABLE treadle_schedule_ticks (
    schedule_id TEXT NOT NULL,
    nominal_ms BIGINT NOT NULL,
    source TEXT NOT NULL,
    action TEXT NOT NULL,
    run_id TEXT,
    decided_at DOUBLE PRECISION NOT NULL,
    detail TEXT,
    started INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, nominal_ms)
)"""

# Graph descriptions (see treadle._stores._sql_graphs): each distinct one once, by
# its digest, which the runs started with it name in ``graph_digest``. Not unique:
# two PostgreSQL transactions that first store one description at once each add a
# row (the same bytes) rather than one waiting on the other.
_CREATE_GRAPHS = """
CREATE TABLE treadle_graphs (
    digest {blob} NOT NULL,
    graph {blob} NOT NULL
)"""

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
    (  # 5: checkpoints store what changed, as pieces that checkpoints and forks share
        _CREATE_PIECES,
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
        _CREATE_EVENTS,
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
        _CREATE_AUDIT,
        "CREATE INDEX treadle_audit_run ON treadle_audit (run_id, seq)",
        _CREATE_TOKENS,
    ),
    (  # 10: reaching people: webhooks, their outbox, answer links
        _CREATE_WEBHOOKS,
        _CREATE_OUTBOX,
        # The sender's claim: pending rows by due time.
        "CREATE INDEX treadle_outbox_due ON treadle_outbox (state, due_at)",
        # Order per run and endpoint: the earlier pending row of a run and endpoint.
        "CREATE INDEX treadle_outbox_order"  # noqa: ISC004 - one statement
        " ON treadle_outbox (endpoint_id, run_id, state{tiebreak})",
        _CREATE_LINKS,
        _CREATE_SECRETS,
    ),
    (  # 11: searchable run fields
        _CREATE_RUN_FIELDS,
        # Each ends with run_id, which is all a filter's subquery selects: read from the
        # index alone, never from the table row by row.
        "CREATE INDEX treadle_run_fields_text"  # noqa: ISC004 - one statement
        " ON treadle_run_fields (name, text_value, run_id)",
        "CREATE INDEX treadle_run_fields_number"  # noqa: ISC004 - one statement
        " ON treadle_run_fields (name, kind, num_value, run_id)",
    ),
    (  # 12: start policies: deduplication, singletons and queues per key, debounce
        _CREATE_STARTS,
        _CREATE_START_GATES,
        "CREATE UNIQUE INDEX treadle_starts_dedup"  # noqa: ISC004 - one statement
        " ON treadle_starts (workflow, dedup_id) WHERE dedup_id IS NOT NULL",
        # What an admission reads: the workflow's queued and holding starts.
        "CREATE INDEX treadle_starts_state ON treadle_starts (workflow, state, start_key)",
        # What a service looks for: queued starts whose time has come.
        "CREATE INDEX treadle_starts_due ON treadle_starts (admit_at) WHERE state = 'queued'",
    ),
    (  # 13: call limits: each limit's row and its line of calls (see _stores/_sql_limits.py)
        _CREATE_LIMITS,
        _CREATE_LIMIT_SLOTS,
        # The head of a line: waiting calls by priority, turn and arrival.
        "CREATE INDEX treadle_limit_slots_line"  # noqa: ISC004 - one statement
        " ON treadle_limit_slots (limit_name, granted_at, priority, turn, arrival)",
        "CREATE INDEX treadle_limit_slots_run ON treadle_limit_slots (run_id)",
    ),
    (  # 14: schedules and the record of their ticks
        _CREATE_SCHEDULES,
        "CREATE INDEX treadle_schedules_due ON treadle_schedules (fire_at)",
        _CREATE_SCHEDULE_TICKS,
        # Started ticks whose run is not known to exist yet: what a server finishes.
        "CREATE INDEX treadle_schedule_ticks_unstarted"  # noqa: ISC004 - one statement
        " ON treadle_schedule_ticks (schedule_id, nominal_ms)"
        " WHERE action = 'started' AND started = 0",
    ),
    (  # 15: a limit's line keeps its own clock: a change to it is one batch, one round trip
        "ALTER TABLE treadle_limits ADD COLUMN clock DOUBLE PRECISION",
    ),
    (  # 16: a graph description kept once, not in every run row (see _stores/_sql_graphs.py)
        _CREATE_GRAPHS,
        "CREATE INDEX treadle_graphs_digest ON treadle_graphs (digest)",
        # NULL: its own ``graph`` column holds it (runs written before this step; pending runs).
        "ALTER TABLE treadle_runs ADD COLUMN graph_digest {blob}",
    ),
    (),  # 17: SQLite packs large event rows (_event_packing.py); older treadles refuse it
    (),  # 18: SQLite writes event rows in layout 2 (_event_rows.py); older treadles refuse it
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
