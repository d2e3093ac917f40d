"""Writes that ``PostgresStore`` and a worker's ``LeasedStore`` make alike.

Kept apart from both so that importing the worker side needs no psycopg at
import time (the ``Connection`` type is for annotations only).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from treadle._exceptions import RunBusyError, RunHasForksError, RunNotFoundError
from treadle._stores import (
    _audit,
    _sql_audit,
    _sql_events,
    _sql_pieces,
    _sql_rows,
    _sql_rules,
    _sql_search,
    _sql_statements,
)
from treadle._stores._pieces import (
    collect,
    ids_text,
    missing_required,
    refs_of_rows,
    required_pieces,
    run_collection_async,
)
from treadle._stores._sql_dialect import POSTGRES

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._stores._audit import Recorded
    from treadle._stores._events import EventEntry
    from treadle._stores._pieces import Links
    from treadle._stores._postgres_pools import Connection
    from treadle._stores._store import CheckpointRecord
    from treadle._values._actors import Actor

_render = functools.cache(POSTGRES.render)

READY_CHANNEL = "treadle_ready"
"""Where a run becoming ready is announced, so idle workers claim it at once."""

# Sent when the transaction commits (never for one rolled back), and only to
# listeners on this schema: writers of other schemas in the database do not wake them.
NOTIFY_READY = f"SELECT pg_notify('{READY_CHANNEL}', current_schema())"
"""Announce on :data:`READY_CHANNEL` that a run of this schema became ready."""


async def insert_checkpoints(
    connection: Connection, checkpoints: Sequence[CheckpointRecord]
) -> None:
    """Insert checkpoints in one statement, in order (their ``seq`` follows it).

    Raises:
        ValueError: an id is taken.
    """
    parameters = [value for c in checkpoints for value in _sql_rows.checkpoint_parameters(c)]
    query = _render(_sql_statements.insert_checkpoints(len(checkpoints)))
    if (await connection.execute(query, parameters)).rowcount < len(checkpoints):
        raise ValueError(_sql_rules.taken_ids_message(checkpoints))
    await _store_pieces(connection, checkpoints)
    for template, values in _sql_search.field_writes(checkpoints):
        await connection.execute(_render(template), values)
    entries = _sql_events.entries_of(checkpoints)
    if entries:  # after the run row's write, as every append is (see _sql_events)
        await append_events(connection, checkpoints[-1].info.run_id, entries)


async def append_events(connection: Connection, run_id: str, entries: Sequence[EventEntry]) -> None:
    """Append events to the run's log, numbered after its last (the run row is locked)."""
    row = _sql_events.event_row(run_id, entries)
    await connection.execute(_render(_sql_events.INSERT_EVENTS), row)


async def record(connection: Connection, records: Iterable[Recorded], at: float) -> None:
    """Write each action's audit entry and its event in its run's log, in this transaction.

    Last in the transaction, after its effect: the chain's lock
    (:data:`~treadle._stores._sql_audit.LOCK_CHAIN`) makes writers of the
    chain take turns from reading its last entry until they commit, so no
    two write one seq (and none is refused for it); taken after the run row
    every writer locks first, it closes no cycle of waits.
    """
    locked = False
    for action in records:
        if not locked:
            await connection.execute(_LOCK_CHAIN)
            locked = True
        last = await (await connection.execute(_LAST_ENTRY)).fetchone()
        entry, event = _sql_audit.written(action, last, at)
        if event is not None:
            await connection.execute(_LOG_ACTION, event)
        await connection.execute(_INSERT_ENTRY, entry)


_LOCK_CHAIN = _sql_audit.LOCK_CHAIN
_LAST_ENTRY = _render(_sql_audit.LAST_ENTRY)
_LOG_ACTION = _render(_sql_audit.LOG_ACTION)
_INSERT_ENTRY = _render(_sql_audit.INSERT_ENTRY)


async def log_status(connection: Connection, run_id: str, at: float, by: str) -> None:
    """Record in the run's log the status the store just gave it for a caller (``by``)."""
    parameters = _sql_events.log_status_parameters(run_id, at, by)
    await connection.execute(_render(_sql_events.LOG_STATUS), parameters)


async def delete_run(
    connection: Connection, run_id: str, now: float, actor: Actor | None = None
) -> None:
    """Delete a run and all that is only its (see ``Store.delete_run``); locks its row first.

    With ``actor``, ``run_deleted`` is added to the audit log, which keeps the run's entries.

    Raises:
        RunNotFoundError: no such run.
        RunBusyError: a process holds a current lease on it.
        RunHasForksError: runs were forked from it.
    """
    query = _render(_sql_events.SELECT_DELETABLE + " FOR UPDATE")
    found = await (await connection.execute(query, (run_id,))).fetchone()
    if found is None:
        raise RunNotFoundError(run_id)
    owner, lease_until = found
    if owner is not None and lease_until is not None and lease_until > now:
        raise RunBusyError(run_id, owner, lease_until)
    forks = await (
        await connection.execute(_render(_sql_events.SELECT_FORKS), (run_id,))
    ).fetchall()
    if forks:
        raise RunHasForksError(run_id, [fork for (fork,) in forks])
    deleted = await (
        await connection.execute(_render(_sql_events.DELETE_CHECKPOINTS), (run_id,))
    ).fetchall()
    named = refs_of_rows(deleted)
    if named:  # while the run's row still links its lineage
        await _collect_pieces(connection, run_id, named)
    for statement in _sql_events.DELETE_RUN:
        await connection.execute(_render(statement), (run_id,))
    if actor is not None:
        await record(connection, [_audit.deleted(run_id, actor)], now)


async def prune_run(
    connection: Connection, run_id: str, keep_last: int, actor: Actor | None = None
) -> int:
    """``Store.prune``: keep the newest ``keep_last`` checkpoints; with ``actor``, recorded.

    Raises:
        RunNotFoundError: no such run.
    """
    found = await connection.execute(_render(_sql_statements.SELECT_RUN_EXISTS), (run_id,))
    if await found.fetchone() is None:
        raise RunNotFoundError(run_id)
    removed = await delete_old(connection, run_id, keep_last)
    if actor is not None:
        pruned = _audit.pruned(run_id, actor, keep_last, removed)
        await record(connection, [pruned], time.time())
    return removed


async def _store_pieces(connection: Connection, checkpoints: Sequence[CheckpointRecord]) -> None:
    required = required_pieces(checkpoints)
    if required:
        found = await connection.execute(_render(_sql_pieces.SELECT_STORED), (ids_text(required),))
        stored = await found.fetchall()
        if len(stored) < len(required):
            raise missing_required(checkpoints, {row[0] for row in stored})
    for template, values in _sql_pieces.piece_inserts(checkpoints):
        await connection.execute(_render(template), values)


async def delete_old(connection: Connection, run_id: str, keep_last: int) -> int:
    """Apply retention to a run, and delete the pieces nothing kept needs any more."""
    parameters = (run_id, run_id, keep_last - 1, run_id)
    deleted = await (
        await connection.execute(_render(_sql_statements.DELETE_OLD_CHECKPOINTS), parameters)
    ).fetchall()
    named = refs_of_rows(deleted)
    if named:
        await _collect_pieces(connection, run_id, named)
    return len(deleted)


async def _collect_pieces(connection: Connection, run_id: str, named: Sequence[str]) -> None:
    """Delete what deleted checkpoints of ``run_id`` ``named`` that no kept checkpoint needs."""
    rows = await connection.execute(_render(_sql_pieces.SELECT_LINEAGE_REFS), (run_id,))
    needed = set(refs_of_rows(await rows.fetchall()))

    async def links(ids: list[str]) -> Links:
        wanted = (ids_text(ids),) * 2
        found = await connection.execute(_render(_sql_pieces.SELECT_LINKS), wanted)
        return [(piece_id, extends) for piece_id, extends in await found.fetchall()]

    doomed = await run_collection_async(collect(named, needed), links)
    if doomed:
        await connection.execute(_render(_sql_pieces.DELETE_PIECES), (ids_text(doomed),))
