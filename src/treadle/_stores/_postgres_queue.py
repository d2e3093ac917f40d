"""Runs as a queue in PostgreSQL: claims, leases, fencing, and the inbox.

A worker *claims* runnable runs (new, an answer or message arrived, a timer
or deadline due, or their worker's lease expired) with ``FOR UPDATE SKIP
LOCKED``, so concurrent workers never claim one run twice and never wait on
each other. Each claim bumps the run's ``lease_epoch``; every write the
worker then makes goes through a :class:`LeasedStore` whose statements carry
``owner = me AND lease_epoch = mine`` (the fencing token). A worker that was
paused or partitioned past its lease finds its epoch gone and commits
nothing: :class:`~treadle.errors.LeaseLostError`.

Clients do not need workflow code to talk to runs: they write to the run's
**inbox** (its start input, answers, session messages) and mark the run
ready in one transaction; the worker that claims it applies the items and
marks them applied in the transaction of the run's next commit, so an item
is applied exactly once even if workers die in between. Answers and
cancellations go through the store's own ``deliver`` and ``cancel``, the
one place where the first answer to a request wins whoever (a client, an
in-process caller) answers; applied items are kept as that decision's ledger.

A run left mid-run by an owner that died (a worker, or a process running it
in-process on this store) is taken over once nobody's lease on it is current,
whether or not it is marked ready; a parked run is never claimed.

Times: leases run on the database's clock (one clock for every worker);
timers are compared with the worker's clock, as the run itself does.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from treadle._exceptions import RunExistsError
from treadle._stores import _sql_ownership, _sql_queue, _sql_search, _write_parts
from treadle._stores._audit import delivered
from treadle._stores._postgres_leases import LeasedStore
from treadle._stores._postgres_writes import NOTIFY_READY, READY_CHANNEL
from treadle._stores._store import InboxItem
from treadle._stores._write_steps import ALL, COUNT, NOTHING, ONE, POSTGRES_WRITES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._stores._postgres import PostgresStore
    from treadle._stores._postgres_group import Sender
    from treadle._stores._postgres_pools import Connection
    from treadle._stores._write_steps import Plan
    from treadle._values._actors import Actor
    from treadle._values._search_fields import FieldValue

__all__ = ["READY_CHANNEL", "Claim", "InboxItem", "RunQueue"]


@dataclass(frozen=True, slots=True)
class Claim:
    """A run a worker holds: its id and the lease epoch that fences its writes.

    Attributes:
        run_id: The run.
        workflow: Its workflow's name.
        status: Its status when claimed (``pending``: never started).
        checkpoint_id: Its latest checkpoint; ``None`` for a pending run.
        epoch: The lease epoch this claim holds; every write checks it.
        recoveries: How many times in a row the run was taken over from a
            worker whose lease expired (0 for a run released cleanly).
        version: The run's version of its workflow; 0 for a run a client
            started without naming one, which the worker starts on the newest
            version it hosts.
        deadline_at: The run's deadline (a client's, for a pending run).
        inbox: What was delivered to it and not yet applied, in order, as
            the claim found it (read in the claim's transaction, so a
            claimed run costs no read of its own).
    """

    run_id: str
    workflow: str
    status: str
    checkpoint_id: str | None
    epoch: int
    recoveries: int
    version: int = 1
    deadline_at: float | None = None
    inbox: tuple[InboxItem, ...] = ()


class RunQueue:
    """One worker's view of the queue: claim, heartbeat, release.

    Args:
        store: The PostgreSQL store holding the runs.
        owner: This worker's id, written into the rows it leases.
        lease: Seconds a claim lasts without a heartbeat.
    """

    def __init__(self, store: PostgresStore, owner: str, *, lease: float) -> None:
        if lease <= 0:
            msg = f"lease must be a positive number of seconds, got {lease}"
            raise ValueError(msg)
        self.store = store
        self.owner = owner
        self.lease = lease

    async def claim(self, hosted: Sequence[tuple[str, int]], now: float, limit: int) -> list[Claim]:
        """Lease up to ``limit`` runnable runs of these (workflow, version) pairs.

        Runs started with no version (0) are claimed by a worker hosting any
        version of their workflow. No worker blocks on another.
        """
        if limit <= 0 or not hosted:
            return []
        pairs = sorted({*hosted, *((name, 0) for name, _ in hosted)})
        parameters = {
            "workflows": [name for name, _ in pairs],
            "versions": [version for _, version in pairs],
            "now": now,
            "limit": limit,
            "owner": self.owner,
            "lease": self.lease,
        }

        async def work(sender: Sender) -> list[Claim]:
            # Two round trips: BEGIN with the claim, the inboxes' read with COMMIT.
            values = [parameters[name] for name in _sql_queue.CLAIM_NAMES]
            claimed = await sender.send(_sql_queue.CLAIM_BATCHED, values, ALL)
            await sender.flush()
            rows = claimed.answer
            if not rows:
                return []
            ids = [row[0] for row in rows]
            found = await sender.send(_sql_queue.SELECT_INBOXES, (ids,), ALL)
            await sender.flush(last=True)
            inboxes: dict[str, list[InboxItem]] = {}
            for run_id, seq, kind, target, payload, at in found.answer:
                item = InboxItem(seq, kind, target, bytes(payload), at)
                inboxes.setdefault(run_id, []).append(item)
            claims = [Claim(*row) for row in rows]
            return [replace(claim, inbox=tuple(inboxes.get(claim.run_id, ()))) for claim in claims]

        return await self.store.batched(work)

    async def heartbeat(self, held: Mapping[str, int]) -> set[str]:
        """Extend the leases held (run id → epoch); return the runs whose lease is gone."""
        if not held:
            return set()
        ids, epochs = list(held), list(held.values())

        async def work(connection: Connection) -> set[str]:
            cursor = await connection.execute(
                _sql_queue.HEARTBEAT, (self.lease, ids, epochs, self.owner)
            )
            return {row[0] for row in await cursor.fetchall()}

        kept = await self.store.transact(work, write=False)
        return set(held) - kept

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """What clients delivered to the run and no commit has consumed yet, in order."""

        async def work(connection: Connection) -> list[InboxItem]:
            rows = await (await connection.execute(_sql_queue.SELECT_INBOX, (run_id,))).fetchall()
            return [
                InboxItem(seq, kind, target, bytes(payload), at)
                for seq, kind, target, payload, at in rows
            ]

        return await self.store.transact(work, write=False)

    async def release(self, claim: Claim, now: float, *, seen: int = 0) -> bool:
        """Give the run back; ``False`` when the lease was gone already.

        The run is ready again at once if it is still under way (the worker
        stopped mid-run) or its inbox holds items the worker did not read
        (none after ``seen``: see ``Leases.release``); otherwise it waits
        for its timer or a client. Only a takeover of an *expired* lease counts
        towards crash-loop parking; a run given back starts counting afresh.

        A write plan in the store's group commits (:func:`_release`): the
        releases and commits of this worker's runs share transactions.
        """
        return await self.store.grouped(
            functools.partial(_release, claim.run_id, self.owner, claim.epoch, now, seen)
        )

    def leased(self, claim: Claim, consumed: int | None) -> LeasedStore:
        """The store as seen through ``claim``: every write fenced by its epoch.

        ``consumed``: the last inbox item applied to the run, marked applied
        with its next commit (``None``: none).
        """
        return LeasedStore(self.store, self.owner, claim, consumed)


def _release(run_id: str, owner: str, epoch: int, now: float, seen: int) -> Plan[bool]:
    """The release of a claim (see :meth:`RunQueue.release`), as two statements and a notice.

    The row is locked under the claim first, so the decision, made by the
    second statement on a snapshot after that lock, sees every delivery
    made before it (deliveries lock the row first too).
    """
    yield (_sql_queue.LOCK_HELD, (run_id, owner, epoch), NOTHING, True)
    decided = (now, seen, run_id, owner, epoch)
    row = yield (_sql_queue.RELEASE_HELD, decided, ONE, False)
    if row is None:
        return False
    if row[0]:  # handed on mid-run, or answered meanwhile: someone may take it now
        yield (NOTIFY_READY, (), NOTHING, False)
    return True


# --- what clients write -----------------------------------------------------------


async def enqueue_run(
    store: PostgresStore,
    run_id: str,
    workflow: str,
    payload: bytes,
    *,
    deadline_at: float | None = None,
    version: int = 0,
    actor: Actor | None = None,
    fields: Sequence[FieldValue] = (),
) -> bool:
    """Create a pending run with its input; ``False`` if the id exists for this workflow.

    With ``actor``, the row keeps who started it and ``run_started`` is
    recorded with it (its event, its audit entry), in the same transaction.
    ``fields`` are its input search fields, written with it, so filters find
    it while it waits for a worker.

    ``version`` pins the run to a version of its workflow; 0 leaves the
    choice to the worker that starts it (the newest it hosts).

    Idempotent: a second start with the same id (also a concurrent one)
    creates nothing and returns ``False``.

    Raises:
        RunExistsError: The id belongs to a run of another workflow.
    """
    plan = functools.partial(
        _enqueued, run_id, workflow, payload, time.time(), deadline_at, version, actor, fields
    )
    return await store.alone(plan)


def _enqueued(
    run_id: str,
    workflow: str,
    payload: bytes,
    now: float,
    deadline_at: float | None,
    version: int,
    actor: Actor | None,
    fields: Sequence[FieldValue],
) -> Plan[bool]:
    """:func:`enqueue_run` as a write plan: a query for whether the id is new, one for the rest."""
    started_by = actor.encode() if actor is not None else None
    row = (run_id, workflow, now, now, deadline_at, b"", now, version, started_by)
    if (yield (_sql_queue.ENQUEUE, row, COUNT, False)) == 0:
        existing = yield (_sql_queue.WORKFLOW_OF, (run_id,), ONE, False)
        if existing is not None and existing[0] != workflow:
            raise RunExistsError(run_id)
        return False
    yield (_sql_ownership.INSERT_INBOX, (run_id, "start", None, payload, now), NOTHING, False)
    for template, values in _sql_search.value_writes(run_id, fields):
        yield (template, values, NOTHING, False)
    yield (_sql_ownership.NOTIFY_READY, (), NOTHING, False)  # sent when the transaction commits
    if actor is not None:
        yield from _write_parts.record(
            delivered(run_id, [("start", None, payload)], actor), now, POSTGRES_WRITES
        )
    return True
