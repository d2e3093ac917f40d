"""The writes ``SqliteStore`` makes on its writer connection: commits, their pieces, retention.

Each function runs inside the transaction its caller began. The statements
are :mod:`treadle._stores._sql_statements`' and
:mod:`treadle._stores._sql_pieces`'; which pieces go when checkpoints are
deleted is decided by :func:`treadle._stores._pieces.collect`.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from treadle._exceptions import RunBusyError, RunHasForksError, RunNotFoundError
from treadle._stores import (
    _audit,
    _sql_events,
    _sql_ownership,
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
    run_collection,
)
from treadle._stores._sql_dialect import SQLITE
from treadle._stores._sqlite_ownership import honour_pause, record, refusal

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from treadle._stores._events import EventEntry
    from treadle._stores._pieces import Links
    from treadle._stores._sqlite_ownership import Owned
    from treadle._stores._store import CheckpointRecord
    from treadle._values._actors import Actor

_render = functools.cache(SQLITE.render)


def store_pieces(connection: sqlite3.Connection, checkpoints: Sequence[CheckpointRecord]) -> None:
    """Insert the checkpoints' new pieces, after checking the pieces they require are there.

    Raises:
        CheckpointNotFoundError: a required piece is gone (pruned meanwhile).
    """
    required = required_pieces(checkpoints)
    if required:
        wanted = ids_text(required)
        stored = connection.execute(_render(_sql_pieces.SELECT_STORED), (wanted,)).fetchall()
        if len(stored) < len(required):
            raise missing_required(checkpoints, {row[0] for row in stored})
    for template, values in _sql_pieces.piece_inserts(checkpoints):
        connection.execute(_render(template), values)


def delete_old(connection: sqlite3.Connection, run_id: str, keep_last: int) -> int:
    """Apply retention to a run, and delete the pieces nothing kept needs any more."""
    parameters = (run_id, run_id, keep_last - 1, run_id)
    deleted = connection.execute(
        _render(_sql_statements.DELETE_OLD_CHECKPOINTS), parameters
    ).fetchall()
    named = refs_of_rows(deleted)
    if named:
        collect_pieces(connection, run_id, named)
    return len(deleted)


def collect_pieces(connection: sqlite3.Connection, run_id: str, named: Sequence[str]) -> None:
    """Delete what deleted checkpoints of ``run_id`` ``named`` that no kept checkpoint needs."""
    rows = connection.execute(_render(_sql_pieces.SELECT_LINEAGE_REFS), (run_id,))
    needed = set(refs_of_rows(rows))

    def links(ids: list[str]) -> Links:
        wanted: tuple[Any, ...] = (ids_text(ids),) * 2
        return connection.execute(_render(_sql_pieces.SELECT_LINKS), wanted).fetchall()

    doomed = run_collection(collect(named, needed), links)
    if doomed:
        connection.execute(_render(_sql_pieces.DELETE_PIECES), (ids_text(doomed),))


def insert_checkpoints(
    connection: sqlite3.Connection, checkpoints: Sequence[CheckpointRecord]
) -> None:
    # One statement for them all: each statement costs the store's thread the GIL twice.
    parameters = [value for c in checkpoints for value in _sql_rows.checkpoint_parameters(c)]
    query = _render(_sql_statements.insert_checkpoints(len(checkpoints)))
    if connection.execute(query, parameters).rowcount < len(checkpoints):
        raise ValueError(_sql_rules.taken_ids_message(checkpoints))
    store_pieces(connection, checkpoints)
    for template, values in _sql_search.field_writes(checkpoints):
        connection.execute(_render(template), values)
    entries = _sql_events.entries_of(checkpoints)
    if entries:  # after the run row's write, as every append is (see _sql_events)
        append_events(connection, checkpoints[-1].info.run_id, entries)


def append_events(
    connection: sqlite3.Connection, run_id: str, entries: Sequence[EventEntry]
) -> None:
    """Append events to the run's log, numbered after its last."""
    connection.execute(_render(_sql_events.INSERT_EVENTS), _sql_events.event_row(run_id, entries))


def delete_run(connection: sqlite3.Connection, run_id: str, now: float) -> None:
    """Delete a run and all that is only its (see ``Store.delete_run``).

    Raises:
        RunNotFoundError: no such run.
        RunBusyError: a process holds a current lease on it.
        RunHasForksError: runs were forked from it.
    """
    found = connection.execute(_render(_sql_events.SELECT_DELETABLE), (run_id,)).fetchone()
    if found is None:
        raise RunNotFoundError(run_id)
    owner, lease_until = found
    if owner is not None and lease_until is not None and lease_until > now:
        raise RunBusyError(run_id, owner, lease_until)
    forks = connection.execute(_render(_sql_events.SELECT_FORKS), (run_id,)).fetchall()
    if forks:
        raise RunHasForksError(run_id, [fork for (fork,) in forks])
    deleted = connection.execute(_render(_sql_events.DELETE_CHECKPOINTS), (run_id,)).fetchall()
    named = refs_of_rows(deleted)
    if named:  # while the run's row still links its lineage
        collect_pieces(connection, run_id, named)
    for statement in _sql_events.DELETE_RUN:
        connection.execute(_render(statement), (run_id,))


# Under a lease, the run row's write also says whether a pause was asked meanwhile.
_ASKED = " RETURNING pause_requested"
_ADVANCE_FENCED = _sql_statements.ADVANCE_RUN_POSITION + _sql_ownership.FENCE + _ASKED
_ADVANCE_AND_RELEASE = _sql_ownership.ADVANCE_AND_RELEASE + _ASKED


def commit(
    checkpoints: Sequence[CheckpointRecord],
    keep_last: int | None,
    owned: Owned | None,
    connection: sqlite3.Connection,
) -> bool:
    """Commit checkpoints of one run; ``True`` when that paused the run (a pause was asked)."""
    info = checkpoints[-1].info
    position = _sql_rows.position_parameters(checkpoints[-1])
    lease = owned.lease if owned is not None else None
    now = time.time()
    if owned is not None and owned.consumed is not None:
        # Applied: marked so, and the run is ready no more once nothing delivered is left.
        connection.execute(
            _render(_sql_ownership.CONSUME_INBOX), (now, info.run_id, owned.consumed)
        )
        connection.execute(_render(_sql_ownership.CLEAR_READY), (info.run_id,))
    paused = asked = False
    if lease is None:
        advanced = connection.execute(_render(_sql_statements.ADVANCE_RUN_POSITION), position)
        if advanced.rowcount == 0:
            raise refusal(connection, info.run_id, lease)
    else:
        releasing = owned is not None and owned.release
        fence = (lease.owner, lease.epoch)
        if releasing:
            rows = connection.execute(
                _render(_ADVANCE_AND_RELEASE), (info.status, *position, *fence)
            ).fetchall()
        else:
            rows = connection.execute(_render(_ADVANCE_FENCED), (*position, *fence)).fetchall()
        if not rows:
            raise refusal(connection, info.run_id, lease)
        asked = rows[0][0] is not None
    # The checkpoints (and their events) before a pause honoured, whose status logs last.
    insert_checkpoints(connection, checkpoints)
    if asked:  # a pause was asked: this barrier is where it stops
        paused = honour_pause(connection, info.run_id, info.status)
    if not paused and (owned is None or not owned.release):
        status_change = (info.status, info.run_id, info.status)
        connection.execute(_render(_sql_statements.CHANGE_STATUS), status_change)
    if keep_last is not None:
        delete_old(connection, info.run_id, keep_last)
    return paused


def delete_recorded(connection: sqlite3.Connection, run_id: str, actor: Actor | None) -> None:
    """:func:`delete_run` now, with its audit entry when an actor asked for it."""
    now = time.time()
    delete_run(connection, run_id, now)
    if actor is not None:
        record(connection, [_audit.deleted(run_id, actor)], now)


def prune_recorded(
    connection: sqlite3.Connection, run_id: str, keep_last: int, actor: Actor | None
) -> int:
    """Delete the run's checkpoints but its ``keep_last`` newest, with their audit entry.

    Raises:
        RunNotFoundError: No such run.
    """
    found = connection.execute(_render(_sql_statements.SELECT_RUN_EXISTS), (run_id,))
    if found.fetchone() is None:
        raise RunNotFoundError(run_id)
    removed = delete_old(connection, run_id, keep_last)
    if actor is not None:
        record(connection, [_audit.pruned(run_id, actor, keep_last, removed)], time.time())
    return removed
