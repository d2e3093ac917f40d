"""The SQL stores' statements for event logs (see :mod:`treadle._stores._events`).

A write's events go into one row: its first and last ``seq`` and the
events as a JSON array, ``[[superstep, kind, executor_id, at, data], ...]``
(PostgreSQL); SQLite writes a shorter array (layout 2, see
:mod:`treadle._stores._event_rows`) and packs a long row (see
:mod:`treadle._stores._event_packing`).
A commit then adds one row, not one per event: the log costs a store about
what one more small column of the checkpoint would. The row's seqs are
computed by its own INSERT from the run's last row, after the transaction
has written the run's row: a writer then holds the row (PostgreSQL locks
it; SQLite has one writer), so the last ``seq`` cannot change before it
commits, and seqs follow commit order with no gap and no repeat. Reads
unpack rows into events.

On SQLite, the events of a commit of one checkpoint (a durable superstep)
are that checkpoint's row's columns ``first_seq``, ``last_seq`` and
``events``, not a row of ``treadle_events``: a commit then writes one
B-tree fewer, and SQLite's cost of a commit is its B-trees, not its bytes
(``benchmarks/LAYOUTS.md``). A run's log is then the rows of both tables,
merged by ``first_seq``. A run's start is its first checkpoint's row too,
its record's event with its own; every other write (an action, a batch of
checkpoints) keeps a row of ``treadle_events``. Retention moves a
checkpoint's events into ``treadle_events`` before it deletes the
checkpoint (:data:`MOVE_OLD_EVENTS`), so pruning never shortens a log.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from treadle._exceptions import EventLogCorruptError
from treadle._stores._event_packing import pack_events, unpacked
from treadle._stores._event_rows import decoded, is_layout_2, short_text
from treadle._stores._events import LoggedEvent

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._stores._events import EventEntry
    from treadle._stores._records import CheckpointRecord

# The run's last seq: the greater of its newest row's in each table holding its log,
# each read through its key (seqs grow with first_seq), never by scanning the run's
# rows. Parameters: the run, twice.
_LAST = (
    "COALESCE((SELECT MAX(l) FROM ("
    "SELECT (SELECT last_seq FROM treadle_events WHERE run_id = ?"
    " ORDER BY first_seq DESC LIMIT 1) AS l"
    " UNION ALL SELECT (SELECT last_seq FROM treadle_checkpoints WHERE run_id = ?"
    " AND first_seq IS NOT NULL ORDER BY first_seq DESC LIMIT 1)) AS logged), 0)"
)

LAST_SEQ = f"SELECT {_LAST}"

# One row for a write's events, numbered after the run's last. Parameters: the
# run, the run twice for each seq's subquery, the count, the events. Its values
# are a VALUES row: an INSERT ... SELECT reading the table it writes has SQLite
# stage its rows in a temporary table first, about a quarter of its instructions.
INSERT_EVENTS = f"""
INSERT INTO treadle_events (run_id, first_seq, last_seq, events)
VALUES (?, {_LAST} + 1, {_LAST} + ?, ?)"""  # noqa: S608 - constants only

# SQLite: one checkpoint with its superstep's events in its row (module docstring).
# Parameters: the checkpoint's, then :func:`sqlite_event_row`'s without the first.
INSERT_LOGGED_CHECKPOINT = f"""
INSERT INTO treadle_checkpoints
    (checkpoint_id, run_id, superstep, status, parent_checkpoint_id, created_at, wake_at, blob,
    refs, first_seq, last_seq, events)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {_LAST} + 1, {_LAST} + ?, ?)
ON CONFLICT (checkpoint_id) DO NOTHING"""  # noqa: S608 - constants only

# The rows holding the events after a seq N, in both tables: in each, from the row
# holding N + 1 on (it may start before it: the reader trims), found through its key.
# Parameters: the run, the run again, N + 1; the same again.
_ROWS_AFTER = (
    "SELECT first_seq, events FROM {table} WHERE run_id = ? AND first_seq >= COALESCE("
    "(SELECT first_seq FROM {table} WHERE run_id = ? AND first_seq <= ?"
    " ORDER BY first_seq DESC LIMIT 1), 0)"
)
SELECT_EVENTS = (
    _ROWS_AFTER.replace("{table}", "treadle_events")
    + " UNION ALL "
    + _ROWS_AFTER.replace("{table}", "treadle_checkpoints")
    + " ORDER BY first_seq"
)
SELECT_SOME_EVENTS = SELECT_EVENTS + " LIMIT ?"


def rows_after_parameters(run_id: str, after: int) -> tuple[Any, ...]:
    """The parameters of :data:`SELECT_EVENTS` for the events after seq ``after``."""
    return (run_id, run_id, after + 1) * 2


DELETE_EVENTS = "DELETE FROM treadle_events WHERE run_id = ?"

# Kinds and executor ids repeat in every superstep of every run: each is quoted once.
_quoted = functools.lru_cache(maxsize=4096)(json.encoder.encode_basestring)


def entries_of(checkpoints: Sequence[CheckpointRecord]) -> list[EventEntry]:
    """The events the checkpoints carry, in commit order."""
    if len(checkpoints) == 1:
        return list(checkpoints[0].events)
    return [entry for checkpoint in checkpoints for entry in checkpoint.events]


def event_row(run_id: str, entries: Sequence[EventEntry]) -> tuple[Any, ...]:
    """The parameters of :data:`INSERT_EVENTS` for ``entries`` (each ``data`` is JSON already)."""
    quoted = _quoted
    items = ",".join(
        f"[{superstep},{quoted(kind)},"
        f"{'null' if executor_id is None else quoted(executor_id)},{at!r},{data}]"
        for superstep, kind, executor_id, at, data in entries
    )
    return (run_id, *_lasts(run_id), len(entries), f"[{items}]")


def sqlite_event_row(run_id: str, entries: Sequence[EventEntry]) -> tuple[Any, ...]:
    """:func:`event_row` for SQLite: the events in its shorter layout, packed when long."""
    return (run_id, *_lasts(run_id), len(entries), pack_events(short_text(entries)))


def _lasts(run_id: str) -> tuple[str, ...]:
    """The parameters of an append's two ``_LAST`` (its first seq's, its last's)."""
    return (run_id,) * 4


def unpack(
    run_id: str, rows: Iterable[Sequence[Any]], after: int, limit: int | None
) -> list[LoggedEvent]:
    """The events of ``rows`` (oldest first) after ``after``, at most ``limit`` of them.

    Raises:
        EventLogCorruptError: A row holds anything but the events it was
            written with (a bad disk, a hand edit), named by run and seq.
    """
    events: list[LoggedEvent] = []
    for first_seq, row in rows:
        text = row
        try:
            text = unpacked(row)
            found = decoded(text) if is_layout_2(text) else json.loads(text)
            for seq, (superstep, kind, executor_id, at, data) in enumerate(found, int(first_seq)):
                if type(data) is not dict:
                    raise TypeError(data)  # noqa: TRY301 - reported with the rest below
                if seq > after:
                    events.append(LoggedEvent(run_id, seq, superstep, kind, executor_id, at, data))
                    if limit is not None and len(events) == limit:
                        return events
        except (ValueError, TypeError):  # not JSON, or not a list of five-item events
            shown = text[:60] if isinstance(text, str | bytes) else text
            reason = f"its row is not a JSON array of events: {shown!r}"
            raise EventLogCorruptError(run_id, int(first_seq), reason) from None
    return events


# The store's own record that it changed a run's status on a caller's behalf
# (``by``: "cancel", "pause", "unpause"), at the run's current superstep and
# status; run in the transaction that changed it, after the change. (Braces are
# doubled: templates are format strings.)
LOG_STATUS = f"""
INSERT INTO treadle_events (run_id, first_seq, last_seq, events)
SELECT run_id, log.last + 1, log.last + 1,
    '[[' || superstep || ',"status_changed",null,' || CAST(? AS TEXT)
    || ',{{{{"status":"' || status || '","by":"' || CAST(? AS TEXT) || '"}}}}]]'
FROM treadle_runs, (SELECT {_LAST} AS last) AS log
WHERE run_id = ?"""  # noqa: S608 - constants only


def log_status_parameters(run_id: str, at: float, by: str) -> tuple[Any, ...]:
    """The parameters of :data:`LOG_STATUS`."""
    return (repr(at), by, run_id, run_id, run_id)


# SQLite: a row of treadle_events whose seqs overlap a checkpoint's events is refused,
# unless it is that checkpoint's row moved by retention (the same seqs and events). A
# treadle older than schema step 20 numbers its next event after treadle_events' rows
# alone: a process of it still open on the file when a newer one upgrades it would
# repeat seqs silently; its write now fails instead (installed at every open). The
# checkpoint row with the greatest first seq up to the new row's last is the one that
# can overlap (a run's rows hold disjoint seqs): one seek of the by-run index.
SQLITE_SEQ_GUARD = """
CREATE TRIGGER IF NOT EXISTS treadle_events_seqs BEFORE INSERT ON treadle_events
WHEN (
    SELECT c.last_seq >= NEW.first_seq AND NOT (
        c.first_seq = NEW.first_seq AND c.last_seq = NEW.last_seq AND c.events IS NEW.events)
    FROM treadle_checkpoints AS c
    WHERE c.run_id = NEW.run_id AND c.first_seq IS NOT NULL AND c.first_seq <= NEW.last_seq
    ORDER BY c.first_seq DESC LIMIT 1)
BEGIN
    SELECT RAISE(ABORT, 'treadle_events: these seqs are a checkpoint''s events already: a treadle older than schema version 20 writes to this file; stop it and upgrade');
END"""  # noqa: E501 - RAISE takes one literal

# A new SQLite file keeps its event log in a table without rowids, its rows in the
# order of their primary key (the only order any statement reads them in): no index
# beside the table holds the key again (50 bytes less a parked run in idle_runs, 140
# a run of four rows among many), and an append writes one b-tree, not two
# (_sqlite_transactions.migrate, for a file it creates). A file made before keeps
# its table, which every statement reads and writes alike.
ANY_EVENT = "SELECT 1 FROM treadle_events LIMIT 1"
SQLITE_EVENTS_BY_KEY = (
    "DROP TABLE treadle_events",
    """CREATE TABLE treadle_events (
    run_id TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (run_id, first_seq)
) WITHOUT ROWID""",
)


# What delete_run reads and deletes.
SELECT_DELETABLE = "SELECT owner, lease_until FROM treadle_runs WHERE run_id = ?"
SELECT_FORKS = "SELECT run_id FROM treadle_runs WHERE parent_run_id = ? ORDER BY created_at"
DELETE_CHECKPOINTS = (
    "DELETE FROM treadle_checkpoints WHERE run_id = ? RETURNING run_id, checkpoint_id, refs"
)
DELETE_RUN = (
    "DELETE FROM treadle_inbox WHERE run_id = ?",
    # Its answer links: a run made later under its id asks the same request ids.
    "DELETE FROM treadle_links WHERE run_id = ?",
    "DELETE FROM treadle_run_fields WHERE run_id = ?",
    "DELETE FROM treadle_starts WHERE run_id = ?",
    DELETE_EVENTS,
    "DELETE FROM treadle_runs WHERE run_id = ?",
)
