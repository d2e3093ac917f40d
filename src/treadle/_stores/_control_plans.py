"""The SQL stores' writes on a run from outside, written once as plans.

Deleting a run, pruning it, cancelling, pausing and unpausing it, and
giving a lease up: each the sequence of statements both SQL stores drive
(see :mod:`treadle._stores._write_steps`). Each first reads the run row it
decides on with a locking read, so that (on PostgreSQL) it takes turns with
the run's commits; SQLite's one writer takes turns already.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from treadle._exceptions import RunBusyError, RunHasForksError, RunNotFoundError
from treadle._stores import (
    _audit,
    _pausing,
    _sql_events,
    _sql_ownership,
    _sql_pausing,
    _sql_statements,
)
from treadle._stores._pieces import refs_of_rows
from treadle._stores._records import Lease
from treadle._stores._write_parts import (
    collect_pieces,
    delete_old,
    log_status,
    record,
    refusal,
    refuse_unapplied,
    release_held,
)
from treadle._stores._write_steps import ALL, COUNT, NOTHING, ONE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._write_steps import Backend, Plan
    from treadle._values._actors import Actor


def delete_run(run_id: str, actor: Actor | None, backend: Backend) -> Plan[None]:
    """Delete a run and all that is only its (see ``Store.delete_run``); with ``actor``, recorded.

    Raises:
        RunNotFoundError: no such run.
        RunBusyError: a process holds a current lease on it.
        RunHasForksError: runs were forked from it.
    """
    now = time.time()
    found = yield (_sql_events.SELECT_DELETABLE, (run_id,), ONE, True)
    if found is None:
        raise RunNotFoundError(run_id)
    owner, lease_until = found
    if owner is not None and lease_until is not None and lease_until > now:
        raise RunBusyError(run_id, owner, lease_until)
    forks = yield (_sql_events.SELECT_FORKS, (run_id,), ALL, False)
    if forks:
        raise RunHasForksError(run_id, [fork for (fork,) in forks])
    deleted = yield (_sql_events.DELETE_CHECKPOINTS, (run_id,), ALL, False)
    named = refs_of_rows(deleted)
    if named:  # while the run's row still links its lineage
        yield from collect_pieces(run_id, named)
    for statement in _sql_events.DELETE_RUN:
        yield (statement, (run_id,), NOTHING, False)
    if actor is not None:
        yield from record([_audit.deleted(run_id, actor)], now, backend)


def prune(run_id: str, keep_last: int, actor: Actor | None, backend: Backend) -> Plan[int]:
    """Keep the run's newest ``keep_last`` checkpoints; how many went. With ``actor``, recorded.

    Raises:
        RunNotFoundError: no such run.
    """
    if (yield (_sql_statements.SELECT_RUN_EXISTS, (run_id,), ONE, False)) is None:
        raise RunNotFoundError(run_id)
    removed = yield from delete_old(run_id, keep_last)
    if actor is not None:
        pruned = _audit.pruned(run_id, actor, keep_last, removed)
        yield from record([pruned], time.time(), backend)
    return removed


def cancel(run_id: str, actor: Actor | None, backend: Backend) -> Plan[None]:
    """Mark the run ``cancelled`` wherever it is, fencing out any owner.

    What its inbox holds unapplied is settled in the same transaction: a
    session message is refused on the record in the canceller's name (no
    owner will take it now), an answer stays (marked applied), deciding its request.

    Raises:
        RunNotFoundError: no such run.
        RequestError: it has ended already.
    """
    now = time.time()
    if (yield (_sql_ownership.CANCEL, (now, run_id), COUNT, False)) == 0:
        found = yield (_sql_ownership.SELECT_STATUS, (run_id,), ONE, False)
        raise _sql_ownership.not_cancellable(run_id, found)
    yield from log_status(run_id, now, "cancel")
    if actor is not None:
        yield from record([_audit.Recorded(run_id, "run_cancelled", actor, {})], now, backend)
    why = "the run was cancelled before taking it"
    yield from refuse_unapplied(run_id, actor, why, now, backend)
    yield (_sql_ownership.CONSUME_ALL, (now, run_id), NOTHING, False)


def pause(run_id: str, actor: Actor | None, backend: Backend) -> Plan[_pausing.PauseOutcome]:
    """Pause the run now, or ask its owner to at its next commit (see ``Pausing.pause``).

    Raises:
        RunNotFoundError: no such run.
        RequestError: it has ended.
    """
    now = time.time()
    found = yield (_sql_pausing.SELECT_PAUSABLE, (run_id,), ONE, True)
    step = _pausing.decide_pause(run_id, found, now)
    if step == "pause":
        yield (_sql_pausing.PAUSE_NOW, (now, run_id), NOTHING, False)
        yield from log_status(run_id, now, "pause")
    elif step == "request":
        yield (_sql_pausing.REQUEST_PAUSE, (now, run_id), NOTHING, False)
    if actor is not None and step != "none":  # pausing a paused run changes nothing: no record
        yield from record([_audit.paused(run_id, actor, step)], now, backend)
    return _pausing.pause_outcome(step)


def unpause(
    run_id: str, owner: str | None, duration: float, actor: Actor | None, backend: Backend
) -> Plan[_pausing.Unpaused]:
    """Let a paused run go on (leased to ``owner``, if given), or withdraw a pause asked.

    Raises:
        RunNotFoundError: no such run.
        RunBusyError: with ``owner``, another owner's lease is current.
        RequestError: it has ended, or is neither paused nor asked to pause.
    """
    now = time.time()
    found = yield (_sql_pausing.SELECT_PAUSABLE, (run_id,), ONE, True)
    step = _pausing.decide_unpause(run_id, found, now, taking=owner is not None)
    if actor is not None:
        yield from record([_audit.unpaused(run_id, actor, step)], now, backend)
    if step == "withdraw":
        yield (_sql_pausing.WITHDRAW_PAUSE, (run_id,), NOTHING, False)
        return _pausing.Unpaused(withdrawn=True)
    if owner is None:
        yield (_sql_pausing.UNPAUSE, (now, now, run_id), ALL, False)
        yield from log_status(run_id, now, "unpause")
        if backend.notifies:  # left for any worker to take up
            yield (_sql_ownership.NOTIFY_READY, (), NOTHING, False)
        return _pausing.Unpaused(withdrawn=False)
    until = now + duration
    ((epoch,),) = yield (_sql_pausing.UNPAUSE_TO, (now, now, owner, until, run_id), ALL, False)
    yield from log_status(run_id, now, "unpause")
    return _pausing.Unpaused(withdrawn=False, lease=Lease(run_id, owner, int(epoch), until))


_HELD = _sql_statements.SELECT_RUN_EXISTS + _sql_ownership.FENCE


def release(lease: Lease, backend: Backend, seen: int = 0) -> Plan[bool]:
    """Give a lease up (``Leases.release``); ``False`` when it was no longer current.

    The run row is locked first, so the release sees every delivery
    committed before it (see :func:`~treadle._stores._write_parts.release_held`).
    """
    held = (lease.run_id, lease.owner, lease.epoch)
    if (yield (_HELD, held, ONE, True)) is None:
        return False
    return (yield from release_held(lease, time.time(), backend, seen))


def refuse_inbox(
    lease: Lease, refusals: Sequence[tuple[int, str]], actor: Actor, backend: Backend
) -> Plan[None]:
    """Take inbox items the run's owner cannot apply out of its inbox, each on the record.

    ``refusals``: (seq, reason) of each item. Each stays in the store as
    sent, marked applied and no longer an answer (so its request may be
    answered again); one applied meanwhile is left alone. Fenced by
    ``lease``: only the run's owner refuses.

    Raises:
        LeaseLostError: ``lease`` is no longer current (nothing was written).
        RunNotFoundError: no such run.
    """
    run_id, now = lease.run_id, time.time()
    if (yield (_sql_ownership.SELECT_HELD, (run_id, lease.owner, lease.epoch), ONE, True)) is None:
        raise (yield from refusal(run_id, lease))
    records = []
    for seq, reason in refusals:
        found = yield (_sql_ownership.SELECT_UNAPPLIED, (run_id, seq), ONE, False)
        if found is None:
            continue
        yield (_sql_ownership.REFUSE_UNAPPLIED, (now, run_id, seq), NOTHING, False)
        records.append(_audit.refused(run_id, actor, found[0], found[1], reason))
    if backend.clears_ready:
        yield (_sql_ownership.CLEAR_READY, (run_id,), NOTHING, False)
    if records:
        yield from record(records, now, backend)
