"""The store as a worker holding a lease sees it: every write fenced by the lease epoch.

See :mod:`treadle._stores._postgres_queue` for claims and leases; this is
the other half of fencing, :class:`LeasedStore`, the ``Store`` a worker
hands the engine for the run it holds.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Any

from treadle._exceptions import DurabilityError, LeaseLostError
from treadle._stores import _control_plans, _write_plans
from treadle._stores._audit import AuditLog
from treadle._stores._events import EventLog
from treadle._stores._lease_roles import Claims, Deliveries
from treadle._stores._pausing import Pausing
from treadle._stores._postgres_writes import drive
from treadle._stores._run_roles import RunCounts, RunReads
from treadle._stores._starts import Admissions
from treadle._stores._store import Lease, role_methods
from treadle._stores._write_steps import POSTGRES_WRITES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from treadle._stores._events import EventEntry
    from treadle._stores._postgres import PostgresStore
    from treadle._stores._postgres_queue import Claim
    from treadle._stores._store import (
        CheckpointRecord,
        RunRecord,
    )
    from treadle._stores._write_steps import Plan
    from treadle._values._actors import Actor


class LeasedStore:
    """A ``Store`` whose writes succeed only while its lease is current.

    The worker holds the lease (its claim), renews it by heartbeat and
    releases it; so the ownership the port asks of the engine is answered
    from the claim: ``acquire`` hands the engine a :class:`Lease` for the
    claimed run without writing, ``renew`` and ``release`` change nothing,
    and the ``lease`` and ``release`` arguments of writes are ignored, as
    every write is fenced by the claim. A commit's ``consumed`` is honoured
    together with what :meth:`consume` named (the further of the two): the
    engine reads the inbox itself and may have applied items delivered after
    the worker looked, which must not be applied again.

    Fencing wraps the write roles only (``RunWrites``, ``Leases``,
    ``RunRemoval``, whose ``delete_run`` a worker is refused); the methods of
    the other roles (:data:`UNFENCED`: reads, claims, deliveries, pausing,
    the logs) are the store's own, found on it as they are asked for.
    ``commit``, ``set_status`` and (for a
    pending run) ``create_run`` lock the run row with ``owner`` and
    ``lease_epoch`` in the condition, in the same transaction as the
    checkpoint: a stale worker's write changes nothing and raises
    ``LeaseLostError``. After a write fails for any other reason (the
    database went away), later status writes are refused without trying,
    so an outage never records a run as failed: the run is released, or its
    lease expires, and it continues from its last checkpoint.
    """

    def __init__(
        self, store: PostgresStore, owner: str, claim: Claim, consumed: int | None
    ) -> None:
        self.store = store
        self.lease = store.lease  # what the engine renews on paper: the claim has its own
        self.live = store.live  # the run's live events go out as the store's
        self.held = claim  # not `claim`: that is the port's method
        self._owner = owner
        # The claim as the store's fenced writes take it (its end is the worker's business).
        self._claimed = Lease(claim.run_id, owner, claim.epoch, 0.0)
        self._consumed = consumed
        self.detached: DurabilityError | None = None  # set: write nothing more
        self.paused = False  # a commit paused the run: the claim went with it
        self.seen = 0  # the newest inbox item the run's loop read (see release)
        self._stop_after: DurabilityError | None = None

    def consume(self, seq: int) -> None:
        """Mark the run's inbox items up to ``seq`` applied, with the next write (done by then)."""
        self._consumed = seq

    def stop_after_commit(self, reason: DurabilityError) -> None:
        """Let the next write through, then refuse everything with ``reason``.

        The run then stops at a barrier that is committed: its superstep is
        not lost, and whoever leases it next continues from there.
        """
        self._stop_after = reason

    def detach(self, reason: DurabilityError) -> None:
        """Refuse every later write with ``reason`` (lease lost, worker stopping)."""
        if self.detached is None:
            self.detached = reason

    async def create_run(
        self,
        run: RunRecord,
        graph: bytes,
        first: CheckpointRecord,
        *,
        lease: Lease | None = None,  # noqa: ARG002 - the claim is the lease
    ) -> None:
        """Turn the pending row a client enqueued into the started run."""
        self._check_attached()
        consumed, self._consumed = self._consumed, None
        described = self.store.kept_graphs.described(graph)
        adopt = functools.partial(
            _write_plans.adopt_pending,
            *(run, described, first, self._claimed, consumed, POSTGRES_WRITES),
        )
        await self._settle(self.store.grouped(adopt))  # with the commits in flight
        self.store.kept_graphs.committed(described)

    async def commit(self, checkpoint: CheckpointRecord, *, keep_last: int | None = None) -> None:
        """Add a checkpoint and advance the run row, only under the current lease."""
        await self.commit_many((checkpoint,), keep_last=keep_last)

    async def commit_many(
        self,
        checkpoints: Sequence[CheckpointRecord],
        *,
        keep_last: int | None = None,
        lease: Lease | None = None,  # noqa: ARG002 - fenced by the claim
        consumed: int | None = None,
        release: bool = False,  # noqa: ARG002 - the worker releases
        immediate: bool = False,  # noqa: ARG002 - a server: always a round trip
    ) -> bool:
        """Add checkpoints of the run in order, in one transaction, under the current lease.

        ``consumed`` marks inbox items applied with them, as :meth:`consume` does.
        ``True``: a pause asked of the run was honoured with them, and the
        claim given up (:attr:`paused`); the run stops at this barrier.
        """
        if consumed is not None:
            self.consume(consumed if self._consumed is None else max(consumed, self._consumed))
        self._check_attached()
        consumed, self._consumed = self._consumed, None
        paused = await self._settle(
            self.store.commit_many(
                checkpoints, keep_last=keep_last, lease=self._claimed, consumed=consumed
            ),
            paused=True,
        )
        return bool(paused)

    async def set_status(
        self,
        run_id: str,
        status: str,
        error: str | None = None,
        *,
        lease: Lease | None = None,  # noqa: ARG002 - fenced by the claim
        release: bool = False,  # noqa: ARG002 - the worker releases
        events: Sequence[EventEntry] = (),
    ) -> None:
        """Record a status (and its events) without a checkpoint, only under the current lease."""
        self._check_attached()
        fenced = dataclasses.replace(self._claimed, run_id=run_id)
        await self._settle(
            self.store.set_status(run_id, status, error, lease=fenced, events=events)
        )

    # --- ownership: answered from the claim --------------------------------------

    async def acquire(
        self,
        run_id: str,
        owner: str,  # noqa: ARG002 - the worker is the owner
        duration: float,
        *,
        replacing: str | None = None,  # noqa: ARG002 - the claim took it over already
        actor: Actor | None = None,  # noqa: ARG002 - the claim is no resume
    ) -> Lease:
        """The lease the worker's claim holds, as the engine asks for it; nothing is written.

        Its ``until`` is on this process's clock: the worker's heartbeat,
        on the database's, is what keeps the claim.

        Raises:
            LeaseLostError: ``run_id`` is not the claimed run.
            DurabilityError: The view is detached (the reason it was).
        """
        if self.detached is not None:
            raise self.detached
        if run_id != self.held.run_id:
            raise LeaseLostError(run_id, self.held.epoch)
        return Lease(run_id, self._owner, self.held.epoch, time.time() + duration)

    async def migrate_run(
        self,
        lease: Lease,  # noqa: ARG002 - the claim is the lease
        version: int,
        graph: bytes,
        checkpoint: CheckpointRecord,
        *,
        actor: Actor | None = None,
    ) -> bool:
        """Move the claimed run to another version, fenced by the claim (see the port)."""
        self._check_attached()
        return await self.store.migrate_run(self._claimed, version, graph, checkpoint, actor=actor)

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """The lease, extended on paper only: the worker's heartbeat renews the claim.

        Raises:
            LeaseLostError: The heartbeat found the claim gone.
        """
        if isinstance(self.detached, LeaseLostError):
            raise self.detached
        return dataclasses.replace(lease, until=time.time() + duration)

    async def release(self, lease: Lease, *, seen: int = 0) -> bool:  # noqa: ARG002 - the worker does
        """Nothing: the worker releases the claim once the run's task has ended, with ``seen``.

        ``seen`` (see ``Leases.release``): the newest inbox item the run's
        loop read, kept for that release.
        """
        self.seen = max(self.seen, seen)
        return True

    async def park(self, lease: Lease, reason: str) -> None:
        """Set the claimed run aside with ``reason``, fenced by the claim.

        The worker then releases it as usual; no claim takes a parked run.

        Raises:
            LeaseLostError: The claim is gone, or ``lease`` is of another run.
        """
        if lease.run_id != self.held.run_id:
            raise LeaseLostError(lease.run_id, self.held.epoch)
        await self._write(_write_plans.park(self._claimed, reason, keep_lease=True))

    async def refuse_inbox(
        self, lease: Lease, refusals: Sequence[tuple[int, str]], actor: Actor
    ) -> None:
        """Take inbox items the worker cannot apply out of the inbox, recorded, fenced by the claim.

        Raises:
            LeaseLostError: The claim is gone, or ``lease`` is of another run.
        """
        if lease.run_id != self.held.run_id:
            raise LeaseLostError(lease.run_id, self.held.epoch)
        plan = _control_plans.refuse_inbox(self._claimed, tuple(refusals), actor, POSTGRES_WRITES)
        await self._write(plan)

    async def _write(self, plan: Plan[None]) -> None:
        self._check_attached()
        await self._settle(self.store.transact(functools.partial(drive, plan)))

    def _check_attached(self) -> None:
        if self.detached is not None:
            raise self.detached

    async def _settle(self, write: Awaitable[bool | None], *, paused: bool = False) -> bool | None:
        """Await a write; ``paused``: it is a commit, which may have paused the run."""
        try:
            outcome = await write
        except DurabilityError as error:  # the lease lost, or the store failed
            self.detach(error)
            raise
        if paused and outcome:
            self.paused = True
            return outcome  # the run stops here: stopping the worker changes nothing
        if self._stop_after is not None:
            self.detach(self._stop_after)
            raise self._stop_after
        return outcome

    # --- removing runs: a worker removes none --------------------------------------

    async def delete_run(self, run_id: str, *, actor: Actor | None = None) -> None:  # noqa: ARG002 - refused
        """Refused: a worker deletes no run (it only advances the one it claimed)."""
        raise LeaseLostError(run_id, self.held.epoch)

    async def cancel(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Cancel a run (the store's); cancelling the claimed run fences this view out too."""
        await self.store.cancel(run_id, actor=actor)

    async def prune(self, run_id: str, keep_last: int, *, actor: Actor | None = None) -> int:
        """Retention (the store's: it changes no run's position)."""
        return await self.store.prune(run_id, keep_last, actor=actor)

    async def close(self) -> None:
        """Nothing: the worker owns the store."""

    # --- the roles fencing leaves alone: the store's own ------------------------------

    def __getattr__(self, name: str) -> Any:
        """The store's own methods of the roles no lease fences (reads, claims, the inbox...).

        Raises:
            AttributeError: ``name`` is none of theirs.
        """
        if name in UNFENCED:
            return getattr(self.__dict__["store"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


UNFENCED = frozenset().union(
    *(
        role_methods(role)
        for role in (
            RunReads,
            RunCounts,
            Claims,
            Deliveries,
            Pausing,
            Admissions,
            EventLog,
            AuditLog,
        )
    )
)
"""What :class:`LeasedStore` leaves to its store: the methods of the roles that write
nothing a lease guards (or, as deliveries and pauses, decide there for every writer)."""
