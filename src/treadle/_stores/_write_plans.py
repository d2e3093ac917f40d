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

from treadle._exceptions import RunExistsError, RunNotFoundError
from treadle._stores import (
    _advances,
    _audit,
    _sql_graphs,
    _sql_ownership,
    _sql_rows,
    _sql_rules,
    _sql_starts,
    _sql_statements,
)
from treadle._stores._write_parts import (
    append_events,
    delete_old,
    honour_pause,
    insert_checkpoints,
    record,
    refusal,
    refuse_leftovers,
    release_held,
)
from treadle._stores._write_steps import COUNT, NOTHING, ONE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._events import EventEntry
    from treadle._stores._records import CheckpointRecord, Lease, RunRecord
    from treadle._stores._sql_graphs import Described
    from treadle._stores._write_steps import Backend, Plan
    from treadle._values._actors import Actor


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

    Once the new run is written, a fork's parent is read, locked: a delete
    of it racing the fork either commits first (the fork is refused: its
    parent is gone) or waits for the fork (and is refused: the run has a
    fork), never leaving a fork of a deleted run.

    Raises:
        RunExistsError: a run with this id exists already.
        RunNotFoundError: the run it is forked from is gone.
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
    # The first checkpoint's events and the start's share one row of the run's log: a
    # checkpoint's own, where rows hold their events (inserted by record, then).
    if started is None:
        yield from insert_checkpoints((first,), backend)
    elif not backend.logs_in_checkpoints:
        yield from insert_checkpoints((first,), backend, events=())
    parent = run.parent_run_id
    if parent is not None and (
        (yield (_sql_statements.SELECT_RUN_EXISTS, (parent,), ONE, True)) is None
    ):
        raise RunNotFoundError(parent)
    if started is not None:
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
