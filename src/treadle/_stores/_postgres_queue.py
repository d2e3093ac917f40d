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

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._exceptions import RunExistsError
from treadle._stores import _sql_ownership
from treadle._stores._audit import delivered
from treadle._stores._pausing import PAUSED, paused_status
from treadle._stores._postgres_leases import FENCE, LeasedStore
from treadle._stores._postgres_writes import NOTIFY_READY, READY_CHANNEL, record
from treadle._stores._sql_dialect import POSTGRES
from treadle._stores._sql_schema import DUE_AT
from treadle._stores._store import InboxItem

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._stores._postgres import PostgresStore
    from treadle._stores._postgres_pools import Connection
    from treadle._values._actors import Actor

__all__ = ["READY_CHANNEL", "Claim", "InboxItem", "RunQueue"]

_DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION"
_DUE = POSTGRES.render(DUE_AT)

# Expired leases first (their runs were already under way), then by how long
# the run has been ready. ``ready_at`` is set while a worker owns a run, so a
# run whose worker died mid-superstep stays claimable whatever its status; a
# run ``running`` (or ``pending``) with no current owner is claimable even
# without it: an in-process owner on this store that died mid-run never set it.
# A paused run is claimed by nobody, whatever was delivered to it meanwhile.
# A worker claims the runs of the (workflow, version) pairs it hosts, and runs
# started without a version (0: a client without the workflow's code) of the
# workflows it hosts, which it starts on the newest version it has.
_CLAIM = f"""
WITH chosen AS (
    SELECT run_id FROM treadle_runs
    WHERE (workflow, version) IN (
            SELECT * FROM unnest(%(workflows)s::TEXT[], %(versions)s::INTEGER[]))
        AND parked IS NULL
        AND status <> 'paused'
        AND (ready_at <= %(now)s OR {_DUE} <= %(now)s OR status IN ('running', 'pending'))
        AND (owner IS NULL OR lease_until IS NULL OR lease_until < {_DB_NOW})
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
RETURNING r.run_id, r.workflow, r.status, r.checkpoint_id, r.lease_epoch, r.recoveries,
    r.version"""  # noqa: S608 - constants only

_HEARTBEAT = f"""
UPDATE treadle_runs AS r
SET lease_until = {_DB_NOW} + %s
FROM unnest(%s::TEXT[], %s::BIGINT[]) AS held(run_id, epoch)
WHERE r.run_id = held.run_id AND r.lease_epoch = held.epoch AND r.owner = %s
RETURNING r.run_id"""  # noqa: S608 - constants only

_LOCK_LEASED = (
    "SELECT status, pause_requested FROM treadle_runs WHERE run_id = %s"  # noqa: S608 - constants
    + FENCE
    + " FOR UPDATE"
)

# A pause asked of the run while the worker held it is honoured as it lets go.
_RELEASE = """
UPDATE treadle_runs
SET owner = NULL, lease_until = NULL, recoveries = 0, ready_at = %s, status = %s,
    pause_requested = NULL
WHERE run_id = %s"""

_SELECT_INBOX = POSTGRES.render(_sql_ownership.SELECT_INBOX)
_INSERT_INBOX = POSTGRES.render(_sql_ownership.INSERT_INBOX)
_HAS_INBOX = "SELECT 1 FROM treadle_inbox WHERE run_id = %s AND consumed_at IS NULL LIMIT 1"
# Refused items (an input or answer the run would not take) are deleted, not
# marked applied: they never were, and a corrected answer must be acceptable.
_DROP_INBOX = "DELETE FROM treadle_inbox WHERE run_id = %s AND seq <= %s AND consumed_at IS NULL"

_ENQUEUE = """
INSERT INTO treadle_runs
    (run_id, workflow, status, superstep, created_at, updated_at, deadline_at, graph, ready_at,
    version, started_by)
VALUES (%s, %s, 'pending', 0, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id) DO NOTHING"""


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
    """

    run_id: str
    workflow: str
    status: str
    checkpoint_id: str | None
    epoch: int
    recoveries: int
    version: int = 1


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
            waiting = await connection.execute(_HAS_INBOX, (claim.run_id,))
            has_inbox = await waiting.fetchone() is not None
            status, asked = row
            if asked is not None:
                status = paused_status(status)
            ready = status not in (*_sql_ownership.ENDED_STATUSES, PAUSED) and (
                status in ("running", "pending") or has_inbox
            )
            # A paused run keeps ready_at while its inbox holds items, as any run does.
            ready_at = now if ready or (status == PAUSED and has_inbox) else None
            await connection.execute(_RELEASE, (ready_at, status, claim.run_id))
            if ready:  # handed on mid-run, or answered meanwhile: someone may take it now
                await connection.execute(NOTIFY_READY)
            return True

        return await self.store.transact(work)

    async def drop_inbox(self, claim: Claim, upto: int) -> bool:
        """Delete a run's refused inbox items up to ``upto``; ``False``: the lease is gone.

        Only items not yet applied: applied ones stay, as the answers' ledger.
        """

        async def work(connection: Connection) -> bool:
            locked = await connection.execute(_LOCK_LEASED, (claim.run_id, self.owner, claim.epoch))
            if await locked.fetchone() is None:
                return False
            await connection.execute(_DROP_INBOX, (claim.run_id, upto))
            return True

        return await self.store.transact(work)

    def leased(self, claim: Claim, consumed: int | None) -> LeasedStore:
        """The store as seen through ``claim``: every write fenced by its epoch.

        ``consumed``: the last inbox item applied to the run, marked applied
        with its next commit (``None``: none).
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
    version: int = 0,
    actor: Actor | None = None,
) -> bool:
    """Create a pending run with its input; ``False`` if the id exists for this workflow.

    With ``actor``, the row keeps who started it and ``run_started`` is
    recorded with it (its event, its audit entry), in the same transaction.

    ``version`` pins the run to a version of its workflow; 0 leaves the
    choice to the worker that starts it (the newest it hosts).

    Idempotent: a second start with the same id (also a concurrent one)
    creates nothing and returns ``False``.

    Raises:
        RunExistsError: The id belongs to a run of another workflow.
    """
    now = time.time()

    async def work(connection: Connection) -> bool:
        started_by = actor.encode() if actor is not None else None
        row = (run_id, workflow, now, now, deadline_at, b"", now, version, started_by)
        if (await connection.execute(_ENQUEUE, row)).rowcount == 0:
            found = await connection.execute(
                "SELECT workflow FROM treadle_runs WHERE run_id = %s", (run_id,)
            )
            existing = await found.fetchone()
            if existing is not None and existing[0] != workflow:
                raise RunExistsError(run_id)
            return False
        await connection.execute(_INSERT_INBOX, (run_id, "start", None, payload, now))
        await connection.execute(NOTIFY_READY)  # sent when the transaction commits
        if actor is not None:
            await record(connection, delivered(run_id, [("start", None, payload)], actor), now)
        return True

    return await store.transact(work)
