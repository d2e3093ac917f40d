"""The SQL stores' start-policy decisions, written once as plans (see ``_write_steps``).

Each plan first takes its turn on the workflow's gate (a locking read of
its row, held until the transaction ends), so two starters deciding about
one workflow at the same moment decide one after the other, each seeing
what the other wrote: the decision is the store's, in one transaction,
never a check in Python acted on later. See :mod:`treadle._stores._starts`
for what is decided.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from treadle._exceptions import RunExistsError, StartRefusedError
from treadle._stores import _audit, _sql_ownership, _sql_starts
from treadle._stores._pieces import ids_text
from treadle._stores._records import Claimed, Lease
from treadle._stores._starts import Admission, full_for
from treadle._stores._write_parts import record
from treadle._stores._write_steps import ALL, COUNT, NOTHING, ONE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._starts import StartRequest
    from treadle._stores._write_steps import Backend, Plan
    from treadle._values._actors import Actor


def admit(
    request: StartRequest,
    owner: str | None,
    duration: float,
    actor: Actor | None,
    backend: Backend,
) -> Plan[Admission]:
    """Decide one start (see ``Admissions.admit``).

    Raises:
        StartRefusedError: no room, and the policy refuses.
        RunExistsError: the run id is another run's.
    """
    # Queues and windows go by the starter's clock (a service compares them with
    # its own), leases and rows by the wall clock, as every other write.
    now = time.time() if request.at is None else request.at
    wall = time.time()
    workflow = request.workflow
    yield from _take_turn(workflow)
    if request.dedup_id is not None:
        found = yield (_sql_starts.SELECT_DEDUPLICATED, (workflow, request.dedup_id), ONE, False)
        if found is not None:
            status = yield (_sql_ownership.SELECT_STATUS, (found[0],), ONE, False)
            return Admission(found[0], "deduplicated", status[0] if status else "unknown")
    # Those queued earlier go first: a start never overtakes them.
    holding = yield from _admit_due(workflow, now)
    if request.debounce is not None:
        waiting = yield (_sql_starts.SELECT_DEBOUNCING, (workflow, request.key), ONE, False)
        if waiting is not None:
            run_id = waiting[0]
            yield (_sql_starts.REPLACE_INPUT, (request.payload, wall, run_id), NOTHING, False)
            yield (_sql_starts.PUSH_ADMIT, (now + request.debounce, run_id), NOTHING, False)
            if actor is not None:  # the run goes on with this input: who gave it is recorded
                yield from record([_audit.debounced(run_id, request.payload, actor)], wall, backend)
            return Admission(run_id, "debounced", _sql_starts.QUEUED)
        yield from _insert(request, wall, None, actor, backend, admit_at=now + request.debounce)
        return Admission(request.run_id, "debounced", _sql_starts.QUEUED)
    full = full_for(holding, request.key, request.per_key, request.concurrency)
    if full is not None:
        if request.refuse:
            holders = yield from _holders(workflow, request.key, full)
            raise StartRefusedError(workflow, request.key, holders, full)
        yield from _insert(request, wall, None, actor, backend, admit_at=now)
        return Admission(request.run_id, "queued", _sql_starts.QUEUED)
    lease = None
    if owner is not None:
        lease = Lease(request.run_id, owner, 1, wall + duration)
    yield from _insert(request, wall, lease, actor, backend, admit_at=None)
    if lease is None and backend.notifies:
        yield (_sql_ownership.NOTIFY_READY, (), NOTHING, False)
    return Admission(request.run_id, "started", "pending", lease)


def admit_queued(
    workflows: Sequence[str], now: float, limit: int, backend: Backend
) -> Plan[list[str]]:
    """Admit the queued starts of ``workflows`` whose turn has come; the runs admitted."""
    due = yield (_sql_starts.SELECT_DUE_WORKFLOWS, (now, ids_text(workflows)), ALL, False)
    admitted: list[str] = []
    for (workflow,) in sorted(due):
        if len(admitted) >= limit:
            break
        yield from _take_turn(workflow)
        before = len(admitted)
        yield from _admit_due(workflow, now, admitted)
        if backend.notifies and len(admitted) > before:
            yield (_sql_ownership.NOTIFY_READY, (), NOTHING, False)
    return admitted


def claim_starts(
    workflows: Sequence[str],
    owner: str,
    duration: float,
    now: float,
    limit: int,
    backend: Backend,
) -> Plan[list[Claimed]]:
    """Admit what is due, then lease up to ``limit`` admitted runs nobody started."""
    yield from admit_queued(workflows, now, limit, backend)
    wall = time.time()
    rows = yield (_sql_starts.SELECT_STARTABLE, (wall, ids_text(workflows), limit), ALL, False)
    until = wall + duration
    claimed: list[Claimed] = []
    for (run_id,) in rows:
        taken = yield (_sql_starts.CLAIM_STARTABLE, (owner, until, run_id, wall), ONE, False)
        if taken is not None:
            epoch, workflow, version = taken
            lease = Lease(run_id, owner, epoch, until)
            claimed.append(Claimed(lease, workflow, delivered=True, version=version))
    return claimed


# --- the parts ---------------------------------------------------------------------


def _take_turn(workflow: str) -> Plan[None]:
    """Lock the workflow's gate until the transaction ends (made on its first start)."""
    yield (_sql_starts.INSERT_GATE, (workflow,), NOTHING, False)
    yield (_sql_starts.LOCK_GATE, (workflow,), ONE, True)


def _admit_due(
    workflow: str, now: float, admitted: list[str] | None = None
) -> Plan[dict[str, int]]:
    """Admit the workflow's due queued starts as room allows; the slots held after, by key.

    Under the gate. Starts whose run ended or went are released first.
    """
    yield (_sql_starts.RELEASE_ENDED, (workflow,), NOTHING, False)
    rows = yield (_sql_starts.SELECT_HOLDING, (workflow,), ALL, False)
    holding: dict[str, int] = dict(rows)
    queued = yield (_sql_starts.SELECT_QUEUED, (workflow, now), ALL, False)
    for run_id, key, per_key, concurrency in queued:
        if full_for(holding, key, per_key, concurrency) is not None:
            continue  # a later start of another key may still have room
        wall = time.time()
        moved = yield (_sql_starts.ADMIT_QUEUED_RUN, (wall, wall, run_id), COUNT, False)
        if moved == 0:
            continue  # its run left the line meanwhile (cancelled): released next time
        yield (_sql_starts.MARK_HOLDING, (run_id,), NOTHING, False)
        holding[key] = holding.get(key, 0) + 1
        if admitted is not None:
            admitted.append(run_id)
    return holding


def _holders(workflow: str, key: str, full: str) -> Plan[list[str]]:
    """The runs holding what is full, oldest first (for the refusal to name)."""
    if full == "key":
        rows = yield (_sql_starts.SELECT_KEY_HOLDERS, (workflow, key), ALL, False)
    else:
        rows = yield (_sql_starts.SELECT_HOLDERS, (workflow,), ALL, False)
    return [row[0] for row in rows]


def _insert(
    request: StartRequest,
    now: float,
    lease: Lease | None,
    actor: Actor | None,
    backend: Backend,
    *,
    admit_at: float | None,
) -> Plan[None]:
    """Write the new run's row, its input and its start row; record who started it."""
    queued = admit_at is not None
    status = _sql_starts.QUEUED if queued else "pending"
    # Left for a worker or service to start: ready now (an owner's run is its own).
    ready_at = None if queued or lease is not None else now
    run = (
        *(request.run_id, request.workflow, status, now, now, request.deadline_at, b""),
        *(ready_at, request.version, request.started_by),
        *((lease.owner, lease.until, lease.epoch) if lease is not None else (None, None, 0)),
    )
    if (yield (_sql_starts.INSERT_RUN, run, COUNT, False)) == 0:
        raise RunExistsError(request.run_id)
    item = (request.run_id, "start", None, request.payload, now)
    yield (_sql_ownership.INSERT_INBOX, item, NOTHING, False)
    start = (
        *(request.run_id, request.workflow, request.key, request.dedup_id),
        *(request.per_key, request.concurrency, request.debounce),
        *(_sql_starts.QUEUED if queued else "holding", admit_at, now),
    )
    yield (_sql_starts.INSERT_START, start, NOTHING, False)
    if actor is not None:
        yield from record(
            _audit.delivered(request.run_id, [("start", None, request.payload)], actor),
            now,
            backend,
        )
