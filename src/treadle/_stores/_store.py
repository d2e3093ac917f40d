"""The store port: the handful of operations durability needs.

A store keeps two things per run: one **run row** (status, latest
checkpoint, lineage) and its **checkpoints** (one per committed superstep:
a sealed, opaque frame, and the :class:`Piece` s it names, which successive
checkpoints and forks share). It never interprets a blob; encoding, checksums and
graph fingerprints belong to the checkpoint codec, so a backend is small and
the same conformance suite (``tests/durable/test_store_suite.py``) can hold
every backend to the same behaviour.

Every method is a coroutine; a backend whose driver blocks (sqlite3) runs it
on a thread of its own so the event loop never waits on disk.

**One owner per run.** A run advances only in the process holding its
*lease* (:class:`Lease`): ``create_run`` takes one for a new run,
``acquire`` takes one over a run with no live owner, and every write given
a lease (``commit_many``, ``set_status``) happens only while that lease is
current (the *fencing token* is its ``epoch``); otherwise it changes
nothing and raises ``LeaseLostError``. Others reach a run through its
**inbox** (``deliver``): answers, session messages. The store decides there,
once, which answer to a request wins. Leases are kept on the wall clock
(``time.time()``) of the processes sharing the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from treadle._stores._audit import AuditEntry, AuditLog
from treadle._stores._events import EventEntry, EventLog, LoggedEvent
from treadle._stores._pausing import Pausing
from treadle._stores._records import (
    CheckpointInfo,
    CheckpointRecord,
    Claimed,
    InboxItem,
    Lease,
    Piece,
    RunRecord,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from treadle._values._actors import Actor


DEFAULT_LEASE = 30.0
"""Seconds a lease lasts without a heartbeat, unless a store says otherwise: how long
a run whose owner died waits to be taken over."""


__all__ = [
    "DEFAULT_LEASE",
    "AuditEntry",
    "CheckpointInfo",
    "CheckpointRecord",
    "Claimed",
    "EventEntry",
    "InboxItem",
    "Lease",
    "LoggedEvent",
    "Piece",
    "RunRecord",
    "Store",
]


class Store(Pausing, EventLog, AuditLog, Protocol):
    """Where runs and their checkpoints live.

    Implementations: ``MemoryStore`` (tests, ephemeral work), ``SqliteStore``
    (the embedded default), ``PostgresStore`` (many workers). Pausing runs
    (``pause``, ``unpause``) is :class:`~treadle._stores._pausing.Pausing`'s part.

    **The record.** Every write that is an action on a run from outside
    (``deliver``, ``cancel``, ``pause``, ``unpause``, ``acquire`` for a
    resume, ``delete_run``, ``prune``, ``migrate_run``, and ``create_run``
    for a run whose row says who started it) takes the ``actor`` taking it
    and writes, in the transaction of its effect, the action's event in the
    run's log and its entry in the store's audit chain (see
    :mod:`treadle._stores._audit`; ``read_audit`` reads it). Without an
    actor nothing is recorded: that is for the runtime's own writes
    (``treadle._workflow._actions`` is the one caller that gives one).


    Attributes:
        lease: Seconds a lease on one of its runs lasts without a heartbeat.
    """

    lease: float

    async def create_run(
        self, run: RunRecord, graph: bytes, first: CheckpointRecord, *, lease: Lease | None = None
    ) -> None:
        """Insert a new run with its graph description and first checkpoint.

        With ``lease`` (epoch 1) the run is created owned by it. A fork
        (``parent_run_id`` set) may use its parent's pieces.

        Raises:
            RunExistsError: a run with this id exists already.
            CheckpointNotFoundError: a piece in ``first.requires`` is gone.
        """
        ...

    async def commit(self, checkpoint: CheckpointRecord, *, keep_last: int | None = None) -> None:
        """Atomically add a checkpoint and make it the run's latest.

        The run row takes the checkpoint's status, superstep and
        ``wake_at``; its new pieces are stored with it. With
        ``keep_last`` (or the store's own retention setting) the run's older
        checkpoints beyond that many are deleted in the same transaction,
        and with them every piece no kept checkpoint (of this run or of a
        fork of its lineage) still needs.

        Raises:
            RunNotFoundError: no such run.
            CheckpointNotFoundError: a piece in ``requires`` is gone (the
                checkpoint the run branched from was pruned).
        """
        ...

    def commit_many(
        self,
        checkpoints: Sequence[CheckpointRecord],
        *,
        keep_last: int | None = None,
        lease: Lease | None = None,
        consumed: int | None = None,
        release: bool = False,
        immediate: bool = False,
    ) -> Awaitable[bool]:
        """:meth:`commit` for several checkpoints of one run, in order, atomically.

        With ``lease``, only while it is current (else ``LeaseLostError``);
        ``consumed`` marks the run's inbox items up to that ``seq`` applied,
        and ``release`` gives the lease up, both in the same transaction (a
        run that comes to rest releases its lease with its last commit).
        With ``lease``, the commit also honours a pause asked of the run
        meanwhile (``pause_requested``), in the same transaction: unless the
        last checkpoint ends the run (an ended run stays ended), the run
        becomes ``paused`` and the lease is given up; the awaitable then
        gives ``True``, telling the committer to stop at this barrier. It
        gives ``False`` otherwise (always without a lease).
        ``immediate`` says the caller awaits the commit at once, with nothing
        to overlap it with: a store may then write on the calling thread
        (``SqliteStore`` does, when its writer is idle and quick).

        All of them are added or none is; the run row follows the last. This
        is how a run's checkpointer writes, every barrier: in batched mode
        several at once, those that queued while the previous call wrote.

        An ``async def`` fits. A store may also start the work when called
        and return an awaitable of its outcome (``SqliteStore`` does), so
        that a caller which awaits it later overlaps it with its own work
        from the start; either way the checkpoints are durable once awaited.

        Raises:
            RunNotFoundError: no such run (when awaited).
            LeaseLostError: ``lease`` is no longer current (when awaited).
            ValueError: an id is taken; the checkpoints are none, of several
                runs, or repeat an id.
        """
        ...

    async def set_status(
        self,
        run_id: str,
        status: str,
        error: str | None = None,
        *,
        lease: Lease | None = None,
        release: bool = False,
        events: Sequence[EventEntry] = (),
    ) -> None:
        """Change a run's status without a new checkpoint (failure, cancel).

        With ``lease``, only while it is current; ``release`` gives it up too.
        ``events`` are appended to the run's event log in the same transaction.

        Raises:
            RunNotFoundError: no such run.
            LeaseLostError: ``lease`` is no longer current.
        """
        ...

    async def migrate_run(
        self,
        lease: Lease,
        version: int,
        graph: bytes,
        checkpoint: CheckpointRecord,
        *,
        actor: Actor | None = None,
    ) -> bool:
        """Move a run to another version of its workflow, under ``lease``, atomically.

        The run row takes ``version`` and ``graph`` (the new version's
        description); ``checkpoint`` (the migrated contents, parented on the
        run's latest) becomes its latest, its events logged; and the lease
        is given up. All of it, or nothing (``treadle migrate``); with
        ``actor``, ``run_migrated`` is recorded with it.

        ``False``, with nothing written and the lease kept, when the run's
        inbox holds deliveries no owner has applied (an answer to a request
        the migration may have renamed): they are for the version they were
        sent to, so the run takes them first. Deliveries take turns with
        this write, so none slips in between the check and the move.

        Raises:
            RunNotFoundError: no such run.
            LeaseLostError: ``lease`` is no longer current; nothing was written.
        """
        ...

    async def acquire(
        self,
        run_id: str,
        owner: str,
        duration: float,
        *,
        replacing: str | None = None,
        actor: Actor | None = None,
    ) -> Lease:
        """Take the run's lease for ``duration`` seconds, if no one else holds a current one.

        With ``replacing``, take it from that owner whatever its lease says
        (the caller knows it is dead: its process is gone). The new lease's
        epoch is one more than any before it, so writes under an earlier
        lease (a presumed-dead owner) change nothing. A parked run is taken
        up (its ``parked`` reason is cleared). With ``actor``, this is a
        resume: ``run_resumed`` is recorded.

        Raises:
            RunNotFoundError: no such run.
            RunBusyError: another owner's lease is current (names it and its end).
            RunPausedError: the run is paused (``unpause`` may lease it instead).
        """
        ...

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """Extend a lease by ``duration`` seconds from now (a heartbeat).

        Raises:
            LeaseLostError: the lease is no longer current.
        """
        ...

    async def release(self, lease: Lease) -> bool:
        """Give a lease up so another process may take the run at once.

        Returns ``False`` when it was no longer current (nothing changed).
        """
        ...

    async def deliver(
        self,
        run_id: str,
        items: Sequence[tuple[str, str | None, bytes]],
        *,
        version: int | None = None,
        actor: Actor | None = None,
    ) -> None:
        """Put (kind, target, payload) items in the run's inbox, all or none.

        This is where an answer to a request is decided, once: the first
        answer to a request id is kept; a later one raises and changes
        nothing. The run is marked ready, so a timer service or worker
        applies the items if no caller does. With ``version``, only to a run
        on that version of its workflow, checked in the same transaction
        (a migration moving the run takes turns with it). With ``actor``,
        each item is recorded: ``request_answered`` (its answer as plain
        JSON; ``request_timed_out`` from the timer's door), ``message_sent``.

        Raises:
            RunNotFoundError: no such run.
            RequestError: the run has ended.
            RequestAlreadyAnsweredError: a request was answered already.
            VersionMismatchError: the run is on another version than ``version``.
        """
        ...

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """The run's inbox items not yet applied, in delivery order."""
        ...

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (its JSON, cut short, and when it came), or ``None``."""
        ...

    async def answered_payload(self, run_id: str, request_id: str) -> bytes | None:
        """The answer kept for a request, whole, as delivered (``None``: none was kept).

        Applied answers stay in the run's inbox: this is how a replay check
        gives a recorded superstep the very answer it had.
        """
        ...

    async def cancel(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Mark the run ``cancelled`` wherever it is, fencing out any owner.

        The lease epoch moves on, so an owner still computing commits
        nothing more. Its last checkpoint stays intact.

        Raises:
            RunNotFoundError: no such run.
            RequestError: it has ended already.
        """
        ...

    async def park(self, lease: Lease, reason: str) -> None:
        """Set a run aside with ``reason`` and give its lease up: services stop waking it.

        A parked run rests as it was; a ``resume`` (which acquires it) takes it up.

        Raises:
            LeaseLostError: ``lease`` is no longer current.
        """
        ...

    async def claim(self, owner: str, duration: float, now: float, *, limit: int) -> list[Claimed]:
        """Lease up to ``limit`` runs a timer service should take up.

        A run is taken when nobody holds a current lease on it, it is not
        parked, paused or ended, and: its timer or deadline is due at ``now`` (the
        service's clock, as in :meth:`due_runs`); or it was delivered
        something no owner has applied; or it is orphaned (``running`` with
        no current lease: its owner died or was detached mid-run).
        """
        ...

    async def held_claimable(self, now: float, *, limit: int) -> list[Lease]:
        """The current leases on runs :meth:`claim` would take, were they free.

        That is, up to ``limit`` runs not parked, paused or ended that are
        ``running``, were delivered something, or are due at ``now``, and
        whose owner's lease has not run out. A timer service looks at their
        owners: one it knows is dead (a process gone from its host) need not
        be waited out (``acquire(..., replacing=owner)``).
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord:
        """The run row.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def get_graph(self, run_id: str) -> bytes:
        """The graph description stored when the run was created.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def load_checkpoint(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> CheckpointRecord:
        """One checkpoint of a run; its latest when ``checkpoint_id`` is None.

        Raises:
            RunNotFoundError: no such run.
            CheckpointNotFoundError: the run has no such checkpoint.
        """
        ...

    async def load_resumable(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> tuple[RunRecord, bytes, CheckpointRecord | None]:
        """``get_run``, ``get_graph`` and ``load_checkpoint`` in one consistent read.

        What a resume needs, in one round trip. The checkpoint is ``None``
        when the run has no such checkpoint (rather than raising, so the
        caller can check the run's status and graph first).

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def list_checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every kept checkpoint of a run, oldest first (by superstep, then time).

        Raises:
            RunNotFoundError: no such run.
        """
        ...

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
        """Runs matching every filter given, newest first (by ``created_at``, then id).

        ``id_prefix`` keeps the runs whose id starts with it; ``before`` (a
        run's ``(created_at, run_id)``) the runs listed after that one, so a
        caller pages through many runs by passing the last one it got.
        ``outcome`` keeps the runs whose named outcome it is (``ctx.set_outcome``),
        read through an index of the runs that have one.
        """
        ...

    async def delete_run(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Delete a run: its row, checkpoints, inbox and event log.

        Its audit entries stay; with ``actor``, ``run_deleted`` is added to them.

        The pieces its checkpoints used go too, except those a fork of it
        still needs (forks are runs of their own, and stay).

        Raises:
            RunNotFoundError: no such run.
            RunBusyError: a process holds a current lease on it (cancel it,
                or wait until it rests).
        """
        ...

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """Runs a timer service must wake: due first.

        A run is due when its status is ``waiting`` or ``awaiting_input`` and
        its ``wake_at`` or its ``deadline_at`` is at or before ``now``.
        Ordered by the earlier of the two, oldest first.
        """
        ...

    async def prune(self, run_id: str, keep_last: int, *, actor: Actor | None = None) -> int:
        """Delete all but the newest ``keep_last`` checkpoints; return how many went.

        With ``actor``, ``run_pruned`` is recorded (also when none went).

        The run's latest checkpoint is always kept, and so is every piece a
        kept checkpoint of any run needs; the other pieces the deleted
        checkpoints used go with them.
        """
        ...

    async def close(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""
        ...
