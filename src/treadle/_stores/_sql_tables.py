"""The SQL stores' tables: what each holds, as the migrations create it.

:mod:`treadle._stores._sql_schema` lists the steps that create and change
them (:data:`~treadle._stores._sql_schema.MIGRATIONS`); the tables are here,
apart from the steps, so that each module stays one thing. A table's text is
part of the released step that creates it: never edit one, add a step that
changes it. ``{blob}``, ``{order_column}`` and ``{binary}`` are filled in by
a :class:`~treadle._stores._sql_dialect.Dialect`.
"""

from __future__ import annotations

CREATE_RUNS = """
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

CREATE_CHECKPOINTS = """
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
CREATE_INBOX = """
CREATE TABLE treadle_inbox (
    {order_column}
    run_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    payload {blob} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
)"""

# The parts checkpoints share (see treadle._stores._store.Piece). A piece is
# found by its id, and by the id of the piece it extends when retention asks
# whether anything still extends it.
CREATE_PIECES = """
CREATE TABLE treadle_pieces (
    piece_id TEXT NOT NULL PRIMARY KEY,
    extends TEXT,
    blob {blob} NOT NULL
)"""

# A run's event log, a row per write: the seqs of its events (their places in
# the run's log, 1, 2, ..., given in commit order by the transaction that
# writes them) and the events as a JSON array (see _sql_events).
CREATE_EVENTS = """
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
CREATE_AUDIT = """
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
CREATE_TOKENS = """
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
CREATE_WEBHOOKS = """
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
CREATE_OUTBOX = """
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
CREATE_LINKS = """
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
CREATE_SECRETS = """
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
CREATE_STARTS = """
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
CREATE_START_GATES = """
CREATE TABLE treadle_start_gates (
    workflow TEXT NOT NULL PRIMARY KEY
)"""

CREATE_RUN_FIELDS = """
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
CREATE_LIMITS = """
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
CREATE_LIMIT_SLOTS = """
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
CREATE_SCHEDULES = """
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
CREATE_SCHEDULE_TICKS = """
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
CREATE_GRAPHS = """
CREATE TABLE treadle_graphs (
    digest {blob} NOT NULL,
    graph {blob} NOT NULL
)"""

# Sessions signed out before they ran out (see treadle._server._identity): a row per
# session, by its SHA-256 (never the session itself), kept until it would have run out,
# so that every process serving the store refuses it. Each sign-out removes the rows
# whose time has passed: the table holds at most the sessions of one session's length.
CREATE_ENDED_SESSIONS = """
CREATE TABLE treadle_ended_sessions (
    digest TEXT NOT NULL PRIMARY KEY,
    ended_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)"""
