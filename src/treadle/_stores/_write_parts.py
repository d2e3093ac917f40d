"""The parts the SQL stores' writes are made of: checkpoints, the log, the record, refusals.

Plans of a few statements each (see :mod:`treadle._stores._write_steps`),
which the writes of :mod:`treadle._stores._write_plans` (a commit, a new
run, a status) and the control actions of
:mod:`treadle._stores._control_plans` (cancel, delete, prune) put together:
inserting checkpoints and their pieces, appending to a run's log, writing
an action's record (the run's log and the audit chain), letting a lease go,
and refusing what a run's inbox holds unapplied.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from treadle._exceptions import LeaseLostError, RunNotFoundError
from treadle._stores import (
    _audit,
    _pausing,
    _sql_audit,
    _sql_events,
    _sql_ownership,
    _sql_pausing,
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
)
from treadle._stores._write_steps import ALL, COUNT, NOTHING, ONE
from treadle._values._actors import Actor

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._exceptions import DurabilityError
    from treadle._stores._audit import Recorded
    from treadle._stores._events import EventEntry
    from treadle._stores._records import CheckpointRecord, Lease
    from treadle._stores._write_steps import Backend, Plan


def refuse_leftovers(lease: Lease, status: str, now: float, backend: Backend) -> Plan[None]:
    """Refuse, on the record, the session messages the run ends with unapplied (as its owner).

    A message an input policy kept for a turn that never came (the run
    ended first): no owner will ever apply it, and deliveries after this
    commit are refused as too late. Each stays as sent, marked applied,
    recorded as ``inbox_refused`` by the owner ending the run, in its
    transaction. Answers are marked applied (one taken from behind such a
    message was applied) and stay: one kept decides its request, and tells
    a later answerer so (answered, or timed out).
    """
    owner = Actor.service(lease.owner, door="worker")
    why = f"the run {status} before taking it"
    yield from refuse_unapplied(lease.run_id, owner, why, now, backend)


def refuse_unapplied(
    run_id: str, actor: Actor | None, why: str, now: float, backend: Backend
) -> Plan[None]:
    """Refuse the session messages ``run_id`` holds unapplied, each recorded in ``actor``'s name.

    For a run that ends (by its owner's commit, or a cancel from outside)
    before its owner took them. Without ``actor`` (a store call that asks
    for no record) they are marked refused, with no entry.
    """
    left = yield (_sql_ownership.SELECT_LEFTOVERS, (run_id,), ALL, False)
    if not left:
        return
    yield (_sql_ownership.REFUSE_LEFTOVERS, (now, run_id), NOTHING, False)
    # An answer behind them was applied, or never will be: the run ended. Nothing is left.
    yield (_sql_ownership.CONSUME_LEFT_ANSWERS, (now, run_id), NOTHING, False)
    if backend.clears_ready:
        yield (_sql_ownership.CLEAR_READY, (run_id,), NOTHING, False)
    if actor is not None:
        refused = [_audit.refused(run_id, actor, kind, target, why) for kind, target in left]
        yield from record(refused, now, backend)


def refusal(run_id: str, lease: Lease | None) -> Plan[DurabilityError]:
    """Why a write changed no row: no such run, or (under a lease) the lease is gone."""
    if lease is not None:
        found = yield (_sql_statements.SELECT_RUN_EXISTS, (run_id,), ONE, False)
        if found is not None:
            return LeaseLostError(run_id, lease.epoch)
    return RunNotFoundError(run_id)


def insert_checkpoints(
    checkpoints: Sequence[CheckpointRecord],
    backend: Backend,
    *,
    events: Sequence[EventEntry] | None = None,
) -> Plan[None]:
    """Insert checkpoints in one statement, in order, with their new pieces and events.

    ``events``: what to log with them instead of the events they carry
    (``()``: nothing, the caller logs them; see :func:`record`).

    Raises:
        ValueError: an id is taken.
        CheckpointNotFoundError: a required piece is gone (pruned meanwhile).
    """
    entries = _sql_events.entries_of(checkpoints) if events is None else events
    parameters: list[Any] | tuple[Any, ...]
    if entries and len(checkpoints) == 1 and backend.logs_in_checkpoints:
        # Its superstep's events in its own row (see _sql_events), after the run row's write.
        run_id = checkpoints[0].info.run_id
        template = _sql_events.INSERT_LOGGED_CHECKPOINT
        parameters = (
            *_sql_rows.checkpoint_parameters(checkpoints[0]),
            *backend.event_row(run_id, entries)[1:],
        )
        entries = ()
    else:  # one statement for them all: each one costs SQLite's thread the GIL twice
        parameters = [value for c in checkpoints for value in _sql_rows.checkpoint_parameters(c)]
        template = _sql_statements.insert_checkpoints(len(checkpoints))
    if (yield (template, parameters, COUNT, False)) < len(checkpoints):
        raise ValueError(_sql_rules.taken_ids_message(checkpoints))
    required = required_pieces(checkpoints)
    if required:
        stored = yield (_sql_pieces.SELECT_STORED, (ids_text(required),), ALL, False)
        if len(stored) < len(required):
            raise missing_required(checkpoints, {row[0] for row in stored})
    for piece_template, values in _sql_pieces.piece_inserts(checkpoints):
        yield (piece_template, values, NOTHING, False)
    for field_template, field_values in _sql_search.field_writes(checkpoints):
        yield (field_template, field_values, NOTHING, False)
    if entries:  # after the run row's write, as every append is (see _sql_events)
        yield from append_events(checkpoints[-1].info.run_id, entries, backend)


def append_events(run_id: str, entries: Sequence[EventEntry], backend: Backend) -> Plan[None]:
    """Append events to the run's log, numbered after its last (its row written first)."""
    yield (_sql_events.INSERT_EVENTS, backend.event_row(run_id, entries), NOTHING, False)


def log_status(run_id: str, at: float, by: str) -> Plan[None]:
    """Record in the run's log the status the store just gave it for a caller (``by``)."""
    yield (
        _sql_events.LOG_STATUS,
        _sql_events.log_status_parameters(run_id, at, by),
        NOTHING,
        False,
    )


def delete_old(run_id: str, keep_last: int) -> Plan[int]:
    """Apply retention to a run, and delete the pieces nothing kept needs any more.

    The events the deleted checkpoints hold in their rows move to the log's
    table first (see ``_sql_events``): retention never shortens a run's log.
    """
    parameters = (run_id, run_id, keep_last - 1, run_id)
    yield (_sql_statements.MOVE_OLD_EVENTS, parameters, NOTHING, False)
    deleted = yield (_sql_statements.DELETE_OLD_CHECKPOINTS, parameters, ALL, False)
    named = refs_of_rows(deleted)
    if named:
        yield from collect_pieces(run_id, named)
    return len(deleted)


def collect_pieces(run_id: str, named: Sequence[str]) -> Plan[None]:
    """Delete what deleted checkpoints of ``run_id`` ``named`` that no kept checkpoint needs."""
    rows = yield (_sql_pieces.SELECT_LINEAGE_REFS, (run_id,), ALL, False)
    collection = collect(named, set(refs_of_rows(rows)))
    try:
        wanted = next(collection)
        while True:
            links = yield (_sql_pieces.SELECT_LINKS, (ids_text(wanted),) * 2, ALL, False)
            wanted = collection.send([(piece_id, extends) for piece_id, extends in links])
    except StopIteration as done:
        doomed: set[str] = done.value
    if doomed:
        yield (_sql_pieces.DELETE_PIECES, (ids_text(doomed),), NOTHING, False)


RELEASE_RETURNING = _sql_ownership.RELEASE + " RETURNING ready_at, pause_requested, status"
"""An owner letting its run go; its row (ready, pause asked, status), none if the lease is gone."""


def release_held(lease: Lease, now: float, backend: Backend, seen: int = 0) -> Plan[bool]:
    """Give ``lease`` up, pausing the run if a pause was asked; ``False``: it was not current.

    A run left ready (items delivered meanwhile) is announced to idle
    workers. The transaction must hold the run row's lock already (an
    earlier statement wrote or locked it): only then does this statement's
    snapshot hold every item a delivery committed before it.
    """
    held = (seen, now, lease.run_id, lease.owner, lease.epoch)  # seen: see Leases.release
    row = yield (RELEASE_RETURNING, held, ONE, False)
    if row is None:
        return False
    ready, requested, status = row
    if requested is not None:
        yield from honour_pause(lease.run_id, status)
    elif ready is not None and backend.notifies:
        yield (_sql_ownership.NOTIFY_READY, (), NOTHING, False)
    return True


def honour_pause(run_id: str, status: str) -> Plan[bool]:
    """Pause a run whose owner commits or lets go (unless ``status`` ended it); ``True`` if paused.

    The transaction holds the run row's lock already: it just wrote it.
    """
    yield (_sql_pausing.HONOUR_PAUSE, (_pausing.paused_status(status), run_id), NOTHING, False)
    paused = status not in _sql_ownership.ENDED_STATUSES
    if paused:
        yield from log_status(run_id, time.time(), "pause")
    return paused


def record(
    records: Iterable[Recorded],
    at: float,
    backend: Backend,
    *,
    leading: CheckpointRecord | None = None,
) -> Plan[None]:
    """Write each action's audit entry and its event in its run's log, in this transaction.

    Last in the transaction, after its effect: where writers of the chain
    must take turns (``backend.chain_lock``), its lock is held from reading
    the chain's last entry until the commit, so no two write one seq; taken
    after the run row every writer locks first, it closes no cycle of waits.

    ``leading``: a new run's first checkpoint, its events not logged yet:
    they go into the log with the first action's event, in one row (a run's
    start is then one row of its log, not two). Where a checkpoint's row
    holds its events (``backend.logs_in_checkpoints``), it is not inserted
    yet, and that row is its own: the run's start then writes no row of the
    log's table at all.
    """
    lock = backend.chain_lock
    for action in records:
        if lock is not None:
            yield (lock, (), NOTHING, False)
            lock = None
        last = yield (_sql_audit.LAST_ENTRY, (), ONE, False)
        entry, event = _sql_audit.written(action, last, at)
        if leading is not None:
            entries = list(leading.events)
            if event is not None:
                entries.append(_sql_audit.entry_of(event, leading.info.superstep))
            if backend.logs_in_checkpoints:
                yield from insert_checkpoints((leading,), backend, events=entries)
            elif entries:
                yield from append_events(action.run_id or leading.info.run_id, entries, backend)
            leading = None
        elif event is not None:
            yield (_sql_audit.LOG_ACTION, event, NOTHING, False)
        yield (_sql_audit.INSERT_ENTRY, entry, NOTHING, False)
    if leading is not None:  # no action to share its row with
        if backend.logs_in_checkpoints:
            yield from insert_checkpoints((leading,), backend)
        elif leading.events:
            yield from append_events(leading.info.run_id, leading.events, backend)
