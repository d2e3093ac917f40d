"""The SQL stores' run writes, written once as plans: create, commit, set status, migrate.

Each function is a plan (see :mod:`treadle._stores._write_steps`): the
sequence of statements of one write, which ``SqliteStore`` and
``PostgresStore`` (and a worker's ``LeasedStore``) drive alike. Under a lease
the run row is written first, fenced by ``owner`` and ``lease_epoch``: that
statement both refuses a stale owner and (on PostgreSQL) locks the row, so
commits, pauses and deliveries of one run take turns.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from treadle._exceptions import LeaseLostError, RunExistsError, RunNotFoundError
from treadle._stores import (
    _advances,
    _audit,
    _pausing,
    _sql_audit,
    _sql_events,
    _sql_graphs,
    _sql_ownership,
    _sql_pausing,
    _sql_pieces,
    _sql_rows,
    _sql_rules,
    _sql_search,
    _sql_starts,
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
    from treadle._stores._records import CheckpointRecord, Lease, RunRecord
    from treadle._stores._sql_graphs import Described
    from treadle._stores._write_steps import Backend, Plan


@dataclasses.dataclass(frozen=True, slots=True)
class Owned:
    """What a commit does besides committing: fence by a lease, mark items applied, release."""

    lease: Lease | None
    consumed: int | None
    release: bool


def commit(
    checkpoints: Sequence[CheckpointRecord],
    keep_last: int | None,
    owned: Owned | None,
    backend: Backend,
) -> Plan[bool]:
    """Add ``checkpoints`` to their run and move its row on; ``True``: that paused the run.

    The run row first (its lock makes one run's commits and pauses take
    turns). Under ``owned.lease`` only while it is current; the inbox items
    it applied are marked consumed; a pause asked of the run is honoured
    here, its barrier; ``owned.release`` gives the lease up.

    Raises:
        RunNotFoundError, LeaseLostError: as the store's ``commit_many``.
        ValueError: an id is taken.
    """
    last = checkpoints[-1]
    info = last.info
    lease = owned.lease if owned is not None else None
    releasing = lease is not None and owned is not None and owned.release
    released = False
    asked = None  # when a pause was asked of the run, if it was
    stored_status = None  # the run row's status before this commit, when read
    if lease is None:
        advanced = yield (backend.advance, backend.advance_parameters(last), COUNT, False)
        if advanced == 0:
            raise (yield from refusal(info.run_id, lease))
    else:
        fence = (lease.owner, lease.epoch)
        status = None  # the status read back: only where it is written apart
        if releasing and backend.advance_and_release is not None:
            template = backend.advance_and_release
            parameters: tuple[object, ...] = (info.status, *_sql_rows.position_parameters(last))
            released = True
        else:
            template = _advances.fenced(backend.advance)
            parameters = backend.advance_parameters(last)
            status = info.status if backend.status_apart else None
        row = yield from _advances.advanced(
            template, parameters, fence, status, info.run_id, backend
        )
        if row is None:
            raise (yield from refusal(info.run_id, lease))
        asked = row[0]
        if len(row) > 1:
            stored_status = row[1]
    # The checkpoints (and their events) before a pause honoured, whose status logs last.
    yield from insert_checkpoints(checkpoints, backend)
    now = time.time()
    if owned is not None and owned.consumed is not None:
        yield (_sql_ownership.CONSUME_INBOX, (now, info.run_id, owned.consumed), NOTHING, False)
        if backend.clears_ready:  # ready no more once nothing delivered is left
            yield (_sql_ownership.CLEAR_READY, (info.run_id,), NOTHING, False)
    paused = False
    if asked is not None:  # this barrier is where the run stops; the lease goes with it
        paused = yield from honour_pause(info.run_id, info.status)
    elif releasing and not released and lease is not None:
        yield from release_held(lease, now, backend)
    if lease is not None and info.status in _sql_ownership.ENDED_STATUSES:
        yield from refuse_leftovers(lease, info.status, now, backend)
    if backend.status_apart and not paused and not releasing and stored_status != info.status:
        yield (
            _sql_statements.CHANGE_STATUS,
            (info.status, info.run_id, info.status),
            NOTHING,
            False,
        )
    if keep_last is not None:
        yield from delete_old(info.run_id, keep_last)
    return paused


def create_run(
    run: RunRecord,
    graph: Described,
    first: CheckpointRecord,
    lease: Lease | None,
    backend: Backend,
) -> Plan[None]:
    """Insert a new run, its graph and first checkpoint (owned by ``lease``, if given).

    Raises:
        RunExistsError: a run with this id exists already.
        ValueError: ``first`` belongs to another run, or its id is taken.
    """
    _sql_rules.first_checkpoint_id(run, first.info)
    if lease is not None and (run.owner, run.lease_until) != (lease.owner, lease.until):
        run = dataclasses.replace(run, owner=lease.owner, lease_until=lease.until)
    digest = yield from _kept(graph)
    inserted = yield (
        _sql_statements.INSERT_RUN,
        _sql_rows.run_parameters(run, first.info, digest),
        COUNT,
        False,
    )
    if inserted == 0:
        if lease is None or not (yield from _adopt_admitted(run, digest, first, lease, backend)):
            raise RunExistsError(run.run_id)
        return
    started = _audit.started_of(run)
    if started is None:
        yield from insert_checkpoints((first,), backend)
        return
    # The first checkpoint's events and the start's share one row of the run's log.
    yield from insert_checkpoints((first,), backend, log=False)
    yield from record((started,), run.created_at, backend, leading=first)


def _kept(graph: Described) -> Plan[bytes]:
    """Keep ``graph`` in the store unless it is there already; its digest, for the run row."""
    if graph.graph is not None:
        parameters = _sql_graphs.insert_parameters(graph.digest, graph.graph)
        yield (_sql_graphs.INSERT_GRAPH, parameters, NOTHING, False)
    return graph.digest


def _adopt_admitted(
    run: RunRecord, digest: bytes, first: CheckpointRecord, lease: Lease, backend: Backend
) -> Plan[bool]:
    """Start the run a start policy admitted to ``lease``'s owner; ``False``: there is none.

    Its row was written by the admission (which recorded who started it),
    its input as its inbox's ``start`` item, now applied.
    """
    info = first.info
    adopted = (
        *(run.status, run.superstep, info.checkpoint_id, info.created_at, info.wake_at),
        *(run.deadline_at, _sql_graphs.ELSEWHERE, digest, run.version, run.run_id),
        *(lease.owner, lease.epoch),
    )
    if (yield (_sql_starts.ADOPT_ADMITTED, adopted, COUNT, False)) == 0:
        return False
    yield from insert_checkpoints((first,), backend)
    yield (_sql_starts.CONSUME_START, (time.time(), run.run_id), NOTHING, False)
    return True


def set_status(
    run_id: str,
    status: str,
    error: str | None,
    lease: Lease | None,
    release: bool,
    events: Sequence[EventEntry],
    backend: Backend,
) -> Plan[None]:
    """Change a run's status and error without a checkpoint (see the port's ``set_status``).

    Raises:
        RunNotFoundError: no such run.
        LeaseLostError: ``lease`` is no longer current.
    """
    now = time.time()
    stamped: tuple[object, ...] = (status, error, now, run_id)
    template = _sql_statements.SET_STATUS
    if lease is not None:
        template, stamped = _FENCED_SET_STATUS, (*stamped, lease.owner, lease.epoch)
    if (yield (template, stamped, COUNT, False)) == 0:
        raise (yield from refusal(run_id, lease))
    if lease is not None and release:
        yield from release_held(lease, now, backend)
    if events:
        yield from append_events(run_id, events, backend)
    if lease is not None and status in _sql_ownership.ENDED_STATUSES:
        yield from refuse_leftovers(lease, status, now, backend)


_FENCED_SET_STATUS = _sql_statements.SET_STATUS + _sql_ownership.FENCE
_FENCED_SET_VERSION = _sql_statements.SET_VERSION + _sql_ownership.FENCE


def migrate_run(
    lease: Lease,
    version: int,
    graph: Described,
    checkpoint: CheckpointRecord,
    keep_last: int | None,
    actor: Actor | None,
    backend: Backend,
) -> Plan[None]:
    """Move a run to another version under ``lease``, and give the lease up (see the port).

    Raises:
        Unapplied: the run's inbox holds deliveries no owner applied (rolls back).
        RunNotFoundError: no such run.
        LeaseLostError: ``lease`` is no longer current.
    """
    run_id = checkpoint.info.run_id
    digest = yield from _kept(graph)
    moved = (version, _sql_graphs.ELSEWHERE, digest, run_id, lease.owner, lease.epoch)
    if (yield (_FENCED_SET_VERSION, moved, COUNT, False)) == 0:
        raise (yield from refusal(run_id, lease))
    # The row is locked now: deliveries to the run wait for this transaction.
    if (yield (_sql_statements.HAS_UNAPPLIED, (run_id,), ONE, False)) is not None:
        raise _sql_rules.Unapplied  # rolls the version back
    yield from commit((checkpoint,), keep_last, Owned(lease, None, release=True), backend)
    if actor is not None:
        yield from record([_audit.migrated(run_id, actor, version)], time.time(), backend)


def adopt_pending(
    run: RunRecord,
    graph: Described,
    first: CheckpointRecord,
    claim: Lease,
    consumed: int | None,
    backend: Backend,
) -> Plan[None]:
    """Turn the pending row a client enqueued into the started run, under a worker's ``claim``.

    ``consumed`` marks the inbox items the worker applied (its start input).

    Raises:
        LeaseLostError: the claim is gone.
        RunNotFoundError: no such run.
    """
    _sql_rules.first_checkpoint_id(run, first.info)
    info = first.info
    digest = yield from _kept(graph)
    adopted = (
        *(run.status, run.superstep, info.checkpoint_id, info.created_at, info.wake_at),
        *(run.deadline_at, _sql_graphs.ELSEWHERE, digest, run.version, run.run_id),
        *(claim.owner, claim.epoch),
    )
    if (yield (_sql_ownership.ADOPT_PENDING, adopted, COUNT, False)) == 0:
        raise (yield from refusal(run.run_id, claim))
    yield from insert_checkpoints((first,), backend)
    if consumed is not None:
        yield (_sql_ownership.CONSUME_INBOX, (time.time(), run.run_id, consumed), NOTHING, False)


def park(lease: Lease, reason: str, *, keep_lease: bool) -> Plan[None]:
    """Set a run aside with ``reason``; unless ``keep_lease``, its lease goes too.

    A worker keeps its claim (it releases the run itself once its task ends).

    Raises:
        LeaseLostError: ``lease`` is no longer current.
        RunNotFoundError: no such run.
    """
    template = _sql_ownership.PARK_CLAIMED if keep_lease else _sql_ownership.PARK
    if (yield (template, (reason, lease.run_id, lease.owner, lease.epoch), COUNT, False)) == 0:
        raise (yield from refusal(lease.run_id, lease))


# --- the parts of writes ------------------------------------------------------------


def refuse_leftovers(lease: Lease, status: str, now: float, backend: Backend) -> Plan[None]:
    """Refuse, on the record, the session messages the run ends with unapplied (as its owner).

    A message an input policy kept for a turn that never came (the run
    ended first): no owner will ever apply it, and deliveries after this
    commit are refused as too late. Each stays as sent, marked applied,
    recorded as ``inbox_refused`` by the owner ending the run, in its
    transaction. Answers stay as they are: one kept decides its request,
    and tells a later answerer so (answered, or timed out).
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
    checkpoints: Sequence[CheckpointRecord], backend: Backend, *, log: bool = True
) -> Plan[None]:
    """Insert checkpoints in one statement, in order, with their new pieces and events.

    ``log=False`` leaves their events to the caller (see :func:`record`).

    Raises:
        ValueError: an id is taken.
        CheckpointNotFoundError: a required piece is gone (pruned meanwhile).
    """
    # One statement for them all: each one costs SQLite's thread the GIL twice.
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
    entries = _sql_events.entries_of(checkpoints) if log else ()
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
    """Apply retention to a run, and delete the pieces nothing kept needs any more."""
    parameters = (run_id, run_id, keep_last - 1, run_id)
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


def release_held(lease: Lease, now: float, backend: Backend) -> Plan[bool]:
    """Give ``lease`` up, pausing the run if a pause was asked; ``False``: it was not current.

    A run left ready (items delivered meanwhile) is announced to idle
    workers. The transaction must hold the run row's lock already (an
    earlier statement wrote or locked it): only then does this statement's
    snapshot hold every item a delivery committed before it.
    """
    row = yield (RELEASE_RETURNING, (now, lease.run_id, lease.owner, lease.epoch), ONE, False)
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

    ``leading``: the checkpoint just inserted without its events (a new
    run's first): they go into the log with the first action's event, in
    one row (a run's start is then one row of its log, not two).
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
            if entries:
                yield from append_events(action.run_id or leading.info.run_id, entries, backend)
            leading = None
        elif event is not None:
            yield (_sql_audit.LOG_ACTION, event, NOTHING, False)
        yield (_sql_audit.INSERT_ENTRY, entry, NOTHING, False)
