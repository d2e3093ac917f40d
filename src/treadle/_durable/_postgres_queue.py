"""Runs as a queue in PostgreSQL: claims, leases, fencing, and the inbox.

A worker *claims* runnable runs (new, an answer or message arrived, a timer
or deadline due, or their worker's lease expired) with ``FOR UPDATE SKIP
LOCKED``, so concurrent workers never claim one run twice and never wait on
each other. Each claim bumps the run's ``lease_epoch``; every write the
worker then makes goes through a :class:`LeasedStore` whose statements carry
``owner = me AND lease_epoch = mine`` (the fencing token). A worker that was
paused or partitioned past its lease finds its epoch gone and commits
nothing: :class:`~treadle.LeaseLostError`.

Clients do not need workflow code to talk to runs: they write to the run's
**inbox** (its start input, answers, session messages) and mark the run
ready in one transaction; the worker that claims it applies the items and
deletes them in the transaction of the run's next commit, so an item is
applied exactly once even if workers die in between.

Times: leases run on the database's clock (one clock for every worker);
timers are compared with the worker's clock, as the run itself does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._durable._postgres_leases import CONSUME_INBOX, FENCE, LeasedStore
from treadle._durable._sql import DUE_AT, POSTGRES
from treadle._exceptions import (
    RequestError,
    RunExistsError,
    RunNotFoundError,
)
from treadle._runtime._result import ENDED

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from treadle._durable._postgres import PostgresStore
    from treadle._durable._postgres_pools import Connection

_DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION"
_ENDED_SQL = "(" + ", ".join(sorted(f"'{status}'" for status in ENDED)) + ")"
_DUE = POSTGRES.render(DUE_AT)

# Expired leases first (their runs were already under way), then by how long
# the run has been ready. ``ready_at`` is set while a run is owned, so a run
# whose worker died mid-superstep stays claimable whatever its status.
_CLAIM = f"""
WITH chosen AS (
    SELECT run_id FROM treadle_runs
    WHERE workflow = ANY(%(workflows)s)
        AND (ready_at <= %(now)s OR {_DUE} <= %(now)s)
        AND (owner IS NULL OR lease_until < {_DB_NOW})
    ORDER BY (owner IS NULL), COALESCE(ready_at, {_DUE})
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE treadle_runs AS r
SET owner = %(owner)s,
    lease_epoch = r.lease_epoch + 1,
    lease_until = {_DB_NOW} + %(lease)s,
    ready_at = COALESCE(r.ready_at, %(now)s),
    recoveries = (CASE WHEN r.owner IS NULL THEN 0 ELSE r.recoveries + 1 END)
FROM chosen
WHERE r.run_id = chosen.run_id
RETURNING r.run_id, r.workflow, r.status, r.checkpoint_id, r.lease_epoch, r.recoveries"""  # noqa: S608 - constants only

_HEARTBEAT = f"""
UPDATE treadle_runs AS r
SET lease_until = {_DB_NOW} + %s
FROM unnest(%s::TEXT[], %s::BIGINT[]) AS held(run_id, epoch)
WHERE r.run_id = held.run_id AND r.lease_epoch = held.epoch AND r.owner = %s
RETURNING r.run_id"""  # noqa: S608 - constants only

_LOCK_LEASED = "SELECT status FROM treadle_runs WHERE run_id = %s" + FENCE + " FOR UPDATE"  # noqa: S608 - constants only

_RELEASE = """
UPDATE treadle_runs
SET owner = NULL, lease_until = NULL, recoveries = 0, ready_at = %s
WHERE run_id = %s"""

_SELECT_INBOX = (
    "SELECT seq, kind, target, payload FROM treadle_inbox WHERE run_id = %s ORDER BY seq"
)
_INSERT_INBOX = (
    "INSERT INTO treadle_inbox (run_id, kind, target, payload, created_at)"
    " VALUES (%s, %s, %s, %s, %s)"
)

READY_CHANNEL = "treadle_ready"
"""Where a run becoming ready is announced, so idle workers claim it at once."""

_NOTIFY_READY = f"SELECT pg_notify('{READY_CHANNEL}', current_schema())"

_MAKE_READY = (
    "UPDATE treadle_runs SET ready_at = LEAST(COALESCE(ready_at, %s), %s) WHERE run_id = %s"
)

_ENQUEUE = """
INSERT INTO treadle_runs
    (run_id, workflow, status, superstep, created_at, updated_at, deadline_at, graph, ready_at)
VALUES (%s, %s, 'pending', 0, %s, %s, %s, %s, %s)
ON CONFLICT (run_id) DO NOTHING"""

_CANCEL = f"""
UPDATE treadle_runs
SET status = 'cancelled', owner = NULL, lease_until = NULL, ready_at = NULL,
    lease_epoch = lease_epoch + 1, updated_at = %s, error = NULL
WHERE run_id = %s AND status NOT IN {_ENDED_SQL}"""  # noqa: S608 - constants only


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
    """

    run_id: str
    workflow: str
    status: str
    checkpoint_id: str | None
    epoch: int
    recoveries: int


@dataclass(frozen=True, slots=True)
class InboxItem:
    """Something a client delivered to a run.

    Attributes:
        seq: Its position in the inbox (delivery order).
        kind: ``"start"`` (the input), ``"answer"`` or ``"message"``.
        target: The request id of an answer; the executor id a message is
            for, or ``None``.
        payload: The value, encoded by the client's serializer.
    """

    seq: int
    kind: str
    target: str | None
    payload: bytes


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

    async def claim(self, workflows: Sequence[str], now: float, limit: int) -> list[Claim]:
        """Lease up to ``limit`` runnable runs of these workflows; none blocks on another worker."""
        if limit <= 0 or not workflows:
            return []
        parameters = {
            "workflows": list(workflows),
            "now": now,
            "limit": limit,
            "owner": self.owner,
            "lease": self.lease,
        }

        async def work(connection: Connection) -> list[Claim]:
            rows = await (await connection.execute(_CLAIM, parameters)).fetchall()
            return [Claim(*row) for row in rows]

        return await self.store.transact(work)

    async def heartbeat(self, held: Mapping[str, int]) -> set[str]:
        """Extend the leases held (run id → epoch); return the runs whose lease is gone."""
        if not held:
            return set()
        ids, epochs = list(held), list(held.values())

        async def work(connection: Connection) -> set[str]:
            cursor = await connection.execute(_HEARTBEAT, (self.lease, ids, epochs, self.owner))
            return {row[0] for row in await cursor.fetchall()}

        kept = await self.store.transact(work, write=False)
        return set(held) - kept

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """What clients delivered to the run and no commit has consumed yet, in order."""

        async def work(connection: Connection) -> list[InboxItem]:
            rows = await (await connection.execute(_SELECT_INBOX, (run_id,))).fetchall()
            return [
                InboxItem(seq, kind, target, bytes(payload)) for seq, kind, target, payload in rows
            ]

        return await self.store.transact(work, write=False)

    async def release(self, claim: Claim, now: float) -> bool:
        """Give the run back; ``False`` when the lease was gone already.

        The run is ready again at once if it is still under way (the worker
        stopped mid-run) or its inbox holds items; otherwise it waits for its
        timer or a client. Only a takeover of an *expired* lease counts
        towards crash-loop parking; a run given back starts counting afresh.
        """

        async def work(connection: Connection) -> bool:
            locked = await connection.execute(_LOCK_LEASED, (claim.run_id, self.owner, claim.epoch))
            row = await locked.fetchone()
            if row is None:
                return False
            waiting = await connection.execute(
                "SELECT 1 FROM treadle_inbox WHERE run_id = %s LIMIT 1", (claim.run_id,)
            )
            has_inbox = await waiting.fetchone() is not None
            status = row[0]
            ready = status not in ENDED and (status in ("running", "pending") or has_inbox)
            await connection.execute(_RELEASE, (now if ready else None, claim.run_id))
            if ready:  # handed on mid-run, or answered meanwhile: someone may take it now
                await connection.execute(_NOTIFY_READY)
            return True

        return await self.store.transact(work)

    async def drop_inbox(self, claim: Claim, upto: int) -> bool:
        """Delete a run's refused inbox items up to ``upto``; ``False``: the lease is gone."""

        async def work(connection: Connection) -> bool:
            locked = await connection.execute(_LOCK_LEASED, (claim.run_id, self.owner, claim.epoch))
            if await locked.fetchone() is None:
                return False
            await connection.execute(CONSUME_INBOX, (claim.run_id, upto))
            return True

        return await self.store.transact(work)

    def leased(self, claim: Claim, consumed: int | None) -> LeasedStore:
        """The store as seen through ``claim``: every write fenced by its epoch.

        ``consumed``: the last inbox item applied to the run, deleted with its
        next commit (``None``: none).
        """
        return LeasedStore(self.store, self.owner, claim, consumed)


# --- what clients write -----------------------------------------------------------


async def enqueue_run(
    store: PostgresStore,
    run_id: str,
    workflow: str,
    payload: bytes,
    *,
    deadline_at: float | None = None,
) -> bool:
    """Create a pending run with its input; ``False`` if the id exists for this workflow.

    Idempotent: a second start with the same id (also a concurrent one)
    creates nothing and returns ``False``.

    Raises:
        RunExistsError: The id belongs to a run of another workflow.
    """
    now = time.time()

    async def work(connection: Connection) -> bool:
        row = (run_id, workflow, now, now, deadline_at, b"", now)
        if (await connection.execute(_ENQUEUE, row)).rowcount == 0:
            found = await connection.execute(
                "SELECT workflow FROM treadle_runs WHERE run_id = %s", (run_id,)
            )
            existing = await found.fetchone()
            if existing is not None and existing[0] != workflow:
                raise RunExistsError(run_id)
            return False
        await connection.execute(_INSERT_INBOX, (run_id, "start", None, payload, now))
        await connection.execute(_NOTIFY_READY)  # sent when the transaction commits
        return True

    return await store.transact(work)


async def deliver(
    store: PostgresStore, run_id: str, items: Iterable[tuple[str, str | None, bytes]]
) -> None:
    """Put (kind, target, payload) items in a run's inbox and make it ready, atomically.

    Raises:
        RunNotFoundError: No such run.
        RequestError: The run has ended; nothing can be delivered to it.
    """
    now = time.time()
    rows = [(run_id, kind, target, payload, now) for kind, target, payload in items]

    async def work(connection: Connection) -> None:
        # Lock the row first: a worker releasing the run at this moment then
        # either sees these items or runs before them and leaves ready_at set.
        locked = await connection.execute(
            "SELECT status FROM treadle_runs WHERE run_id = %s FOR UPDATE", (run_id,)
        )
        row = await locked.fetchone()
        if row is None:
            raise RunNotFoundError(run_id)
        if row[0] in ENDED:
            msg = f"run {run_id!r} has ended ({row[0]}); nothing can be delivered to it"
            raise RequestError(msg)
        for values in rows:
            await connection.execute(_INSERT_INBOX, values)
        await connection.execute(_MAKE_READY, (now, now, run_id))
        await connection.execute(_NOTIFY_READY)

    await store.transact(work)


async def cancel_queued(store: PostgresStore, run_id: str) -> None:
    """Cancel a run wherever it is, fencing out a worker that holds it.

    Raises:
        RunNotFoundError: No such run.
        RequestError: It has ended already.
    """

    async def work(connection: Connection) -> None:
        if (await connection.execute(_CANCEL, (time.time(), run_id))).rowcount == 0:
            found = await connection.execute(
                "SELECT status FROM treadle_runs WHERE run_id = %s", (run_id,)
            )
            row = await found.fetchone()
            if row is None:
                raise RunNotFoundError(run_id)
            msg = f"run {run_id!r} has ended ({row[0]}); there is nothing to cancel"
            raise RequestError(msg)
        await connection.execute("DELETE FROM treadle_inbox WHERE run_id = %s", (run_id,))

    await store.transact(work)
