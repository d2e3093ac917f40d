"""The store as a worker holding a lease sees it: every write fenced by the lease epoch.

See :mod:`treadle._stores._postgres_queue` for claims and leases; this is
the other half of fencing, :class:`LeasedStore`, the ``Store`` a worker
hands the engine for the run it holds.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from treadle._exceptions import DurabilityError, LeaseLostError, RunNotFoundError
from treadle._stores import _sql_queue, _sql_rules
from treadle._stores._postgres_writes import insert_checkpoints
from treadle._stores._store import Lease

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from treadle._stores._audit import AuditEntry
    from treadle._stores._events import EventEntry, LoggedEvent
    from treadle._stores._pausing import PauseOutcome, Unpaused
    from treadle._stores._postgres import PostgresStore
    from treadle._stores._postgres_pools import Connection
    from treadle._stores._postgres_queue import Claim
    from treadle._stores._store import (
        CheckpointInfo,
        CheckpointRecord,
        Claimed,
        InboxItem,
        RunRecord,
    )
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
    the worker looked, which must not be applied again. Deliveries, the
    inbox, cancelling and claims are the store's.

    Reads go straight to the store. ``commit``, ``set_status`` and (for a
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
        self._fence = (owner, claim.epoch)
        # The claim as the store's fenced writes take it (its end is the worker's business).
        self._claimed = Lease(claim.run_id, owner, claim.epoch, 0.0)
        self._consumed = consumed
        self.detached: DurabilityError | None = None  # set: write nothing more
        self.paused = False  # a commit paused the run: the claim went with it
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
        _sql_rules.first_checkpoint_id(run, first.info)
        info = first.info
        adopt = (
            run.status,
            run.superstep,
            info.checkpoint_id,
            info.created_at,
            info.wake_at,
            run.deadline_at,
            graph,
            run.version,
            run.run_id,
            *self._fence,
        )

        async def work(connection: Connection) -> None:
            if (await connection.execute(_sql_queue.ADOPT_PENDING, adopt)).rowcount == 0:
                raise await self._lost(connection, run.run_id)
            await insert_checkpoints(connection, (first,))
            await self._consume(connection, run.run_id)

        await self._write(work)

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

    async def release(self, lease: Lease) -> bool:  # noqa: ARG002 - the worker releases
        """Nothing: the worker releases the claim once the run's task has ended."""
        return True

    async def park(self, lease: Lease, reason: str) -> None:
        """Set the claimed run aside with ``reason``, fenced by the claim.

        The worker then releases it as usual; no claim takes a parked run.

        Raises:
            LeaseLostError: The claim is gone, or ``lease`` is of another run.
        """
        if lease.run_id != self.held.run_id:
            raise LeaseLostError(lease.run_id, self.held.epoch)

        parked = (reason, lease.run_id, *self._fence)

        async def work(connection: Connection) -> None:
            if (await connection.execute(_sql_queue.PARK_CLAIMED, parked)).rowcount == 0:
                raise await self._lost(connection, lease.run_id)

        await self._write(work)

    async def deliver(
        self,
        run_id: str,
        items: Sequence[tuple[str, str | None, bytes]],
        *,
        version: int | None = None,
        actor: Actor | None = None,
    ) -> None:
        """Deliver to a run (the store's: the one place an answer is decided)."""
        await self.store.deliver(run_id, items, version=version, actor=actor)

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """A run's unapplied inbox items (the store's)."""
        return await self.store.inbox(run_id)

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (the store's)."""
        return await self.store.answer_of(run_id, request_id)

    async def answered_payload(self, run_id: str, request_id: str) -> bytes | None:
        """The answer kept for a request, whole (the store's)."""
        return await self.store.answered_payload(run_id, request_id)

    async def cancel(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Cancel a run (the store's); cancelling the claimed run fences this view out too."""
        await self.store.cancel(run_id, actor=actor)

    async def pause(self, run_id: str, *, actor: Actor | None = None) -> PauseOutcome:
        """Pause a run (the store's): the claimed run pauses with this view's next commit."""
        return await self.store.pause(run_id, actor=actor)

    async def unpause(
        self,
        run_id: str,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> Unpaused:
        """Let a paused run go on (the store's)."""
        return await self.store.unpause(run_id, owner=owner, duration=duration, actor=actor)

    async def read_audit(
        self, run_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """The audit log (the store's)."""
        return await self.store.read_audit(run_id, after=after, limit=limit)

    async def claim(self, owner: str, duration: float, now: float, *, limit: int) -> list[Claimed]:
        """Lease runs a timer service should take up (the store's)."""
        return await self.store.claim(owner, duration, now, limit=limit)

    async def _write(self, work: Any) -> None:
        self._check_attached()
        await self._settle(self.store.transact(work))

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

    async def _lost(self, connection: Connection, run_id: str) -> DurabilityError:
        found = await connection.execute(_sql_queue.RUN_EXISTS, (run_id,))
        if await found.fetchone() is None:
            return RunNotFoundError(run_id)
        return LeaseLostError(run_id, self.held.epoch)

    async def _consume(self, connection: Connection, run_id: str) -> None:
        if self._consumed is not None:
            await connection.execute(
                _sql_queue.CONSUME_INBOX, (time.time(), run_id, self._consumed)
            )
            self._consumed = None

    # --- reads and the rest of the port: the store's own ---------------------------

    async def get_run(self, run_id: str) -> RunRecord:
        """The run row."""
        return await self.store.get_run(run_id)

    async def get_graph(self, run_id: str) -> bytes:
        """The run's graph description."""
        return await self.store.get_graph(run_id)

    async def load_checkpoint(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> CheckpointRecord:
        """One checkpoint of a run."""
        return await self.store.load_checkpoint(run_id, checkpoint_id)

    async def load_resumable(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> tuple[RunRecord, bytes, CheckpointRecord | None]:
        """A resume's reads, at once."""
        return await self.store.load_resumable(run_id, checkpoint_id)

    async def list_checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """A run's checkpoints."""
        return await self.store.list_checkpoints(run_id)

    async def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        parent_run_id: str | None = None,
        limit: int | None = None,
        id_prefix: str | None = None,
        before: tuple[float, str] | None = None,
        outcome: str | None = None,
    ) -> list[RunRecord]:
        """Runs matching the filters."""
        return await self.store.list_runs(
            status=status,
            workflow=workflow,
            parent_run_id=parent_run_id,
            limit=limit,
            id_prefix=id_prefix,
            before=before,
            outcome=outcome,
        )

    async def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[LoggedEvent]:
        """A run's event log (the store's)."""
        return await self.store.read_events(run_id, after=after, limit=limit)

    async def last_event_seq(self, run_id: str) -> int:
        """The newest event's ``seq`` (the store's)."""
        return await self.store.last_event_seq(run_id)

    async def delete_run(self, run_id: str, *, actor: Actor | None = None) -> None:  # noqa: ARG002 - refused
        """Refused: a worker deletes no run (it only advances the one it claimed)."""
        raise LeaseLostError(run_id, self.held.epoch)

    async def held_claimable(self, now: float, *, limit: int) -> list[Lease]:
        """Leases on runs a claim would take, were they free (the store's)."""
        return await self.store.held_claimable(now, limit=limit)

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """Due runs (the store's)."""
        return await self.store.due_runs(now, limit=limit)

    async def prune(self, run_id: str, keep_last: int, *, actor: Actor | None = None) -> int:
        """Retention (the store's)."""
        return await self.store.prune(run_id, keep_last, actor=actor)

    async def close(self) -> None:
        """Nothing: the worker owns the store."""
