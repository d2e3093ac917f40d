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

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from treadle._stores._pausing import Pausing

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence


DEFAULT_LEASE = 30.0
"""Seconds a lease lasts without a heartbeat, unless a store says otherwise: how long
a run whose owner died waits to be taken over."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as the store knows it.

    Attributes:
        run_id: The run's id.
        workflow: The workflow's name.
        status: A ``RunStatus`` value (``"running"``, ``"completed"``, ...).
        superstep: The last committed superstep.
        checkpoint_id: The newest checkpoint, or ``None`` before the first.
        parent_run_id: For a fork, the run it branched from.
        parent_checkpoint_id: For a fork, the checkpoint it branched from.
        created_at: Seconds since the epoch.
        updated_at: Seconds since the epoch, at the last change.
        error: Why a ``FAILED`` run failed, in one line.
        wake_at: When the run's next durable timer falls due (epoch
            seconds), for ``WAITING`` runs and runs with scheduled messages.
        deadline_at: The run's wall-clock deadline (its ``timeout=``), kept
            so that it is enforced across restarts.
        owner: The process that holds the run's lease (``host:pid:tag``), or
            ``None``. Its lease may have ended: see :meth:`orphaned`.
        lease_until: When the owner's lease ends unless renewed.
        parked: Why a timer service or worker set the run aside (it could
            not load it), or ``None``. A parked run is not woken until a
            ``resume`` takes it up.
        pause_requested: When ``pause`` was asked of the run while an owner
            held a current lease on it (epoch seconds), or ``None``. The
            owner's next commit pauses it (see :meth:`Store.pause`).
    """

    run_id: str
    workflow: str
    status: str
    superstep: int
    checkpoint_id: str | None
    parent_run_id: str | None
    parent_checkpoint_id: str | None
    created_at: float
    updated_at: float
    error: str | None = None
    wake_at: float | None = None
    deadline_at: float | None = None
    owner: str | None = None
    lease_until: float | None = None
    parked: str | None = None
    pause_requested: float | None = None

    def owned(self, now: float) -> bool:
        """Whether a process holds a current lease on the run at ``now``."""
        return self.owner is not None and self.lease_until is not None and self.lease_until > now

    def orphaned(self, now: float) -> bool:
        """Whether the run was left mid-run: ``running``, but nobody holds a current lease.

        Its owner died (or was detached by Ctrl-C) between two barriers. Any
        timer service, worker or ``resume`` takes it over from its last
        checkpoint.
        """
        return self.status == "running" and not self.owned(now)


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to advance one run, held by one process until ``until``.

    Attributes:
        run_id: The run.
        owner: Who holds it (``host:pid:tag``), as written in the run row.
        epoch: The fencing token: it grows with every new lease on the run,
            and a write under an older epoch changes nothing.
        until: When it ends unless renewed (seconds since the epoch).
    """

    run_id: str
    owner: str
    epoch: int
    until: float


class Claimed(NamedTuple):
    """A run a timer service claimed: its lease, its workflow, and whether it was delivered to.

    ``delivered`` says the run's inbox may hold items no owner has applied
    (it was made ready by a delivery), so the service reads its inbox only
    when it is set.
    """

    lease: Lease
    workflow: str
    delivered: bool


@dataclass(frozen=True, slots=True)
class InboxItem:
    """Something delivered to a run for its owner to apply.

    Attributes:
        seq: Its position in the store's inbox (delivery order).
        kind: ``"start"`` (a queued run's input), ``"answer"`` or ``"message"``.
        target: The request id of an answer; the executor a message is for,
            or ``None``.
        payload: The value, encoded by the deliverer's serializer.
    """

    seq: int
    kind: str
    target: str | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """A checkpoint's metadata, as ``history`` lists it.

    ``parent_checkpoint_id`` is the checkpoint this one was computed from: the
    previous barrier, or for a resumed-from-the-past or forked run, the
    checkpoint it branched from. ``wake_at`` is when the earliest durable
    timer pending at this barrier falls due (``None``: no timer).
    """

    checkpoint_id: str
    run_id: str
    superstep: int
    status: str
    parent_checkpoint_id: str | None
    created_at: float
    wake_at: float | None = None


@dataclass(frozen=True, slots=True)
class Piece:
    """A stored part of checkpoints, shared by every checkpoint that uses it.

    A checkpoint stores what changed since its parent: a state value that a
    superstep did not write is not stored again, and items appended to a
    list are stored alone, as a piece that *extends* the piece holding the
    list before them. So a piece may be used by many checkpoints (and by
    forks), and the store keeps it while any of them is kept.

    Attributes:
        piece_id: Its id, unique in the store.
        extends: The piece whose content this one continues (``None``: none).
            Loading a piece loads the pieces it extends, transitively.
        blob: Its sealed content, opaque to the store.
    """

    piece_id: str
    extends: str | None
    blob: bytes


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """A checkpoint: its sealed frame, and the pieces it is made of.

    Attributes:
        info: Its metadata.
        blob: The sealed frame: the small part written whole every time.
        refs: The ids of the pieces the frame names, in any order.
        pieces: Given to a commit, the pieces first stored with this
            checkpoint (the others in ``refs`` are stored already).
            Returned by a load, every piece the checkpoint needs: those in
            ``refs`` and all they extend.
        requires: Pieces this checkpoint uses that an earlier one stored,
            which a commit checks are still there (a run that branches from
            an older checkpoint names them, in case a prune took them
            meanwhile). Empty on load.
    """

    info: CheckpointInfo
    blob: bytes
    refs: tuple[str, ...] = ()
    pieces: tuple[Piece, ...] = ()
    requires: tuple[str, ...] = ()


class Store(Pausing, Protocol):
    """Where runs and their checkpoints live.

    Implementations: ``MemoryStore`` (tests, ephemeral work), ``SqliteStore``
    (the embedded default), ``PostgresStore`` (many workers). Pausing runs
    (``pause``, ``unpause``) is :class:`~treadle._stores._pausing.Pausing`'s part.


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
    ) -> None:
        """Change a run's status without a new checkpoint (failure, cancel).

        With ``lease``, only while it is current; ``release`` gives it up too.

        Raises:
            RunNotFoundError: no such run.
            LeaseLostError: ``lease`` is no longer current.
        """
        ...

    async def acquire(
        self, run_id: str, owner: str, duration: float, *, replacing: str | None = None
    ) -> Lease:
        """Take the run's lease for ``duration`` seconds, if no one else holds a current one.

        With ``replacing``, take it from that owner whatever its lease says
        (the caller knows it is dead: its process is gone). The new lease's
        epoch is one more than any before it, so writes under an earlier
        lease (a presumed-dead owner) change nothing. A parked run is taken
        up (its ``parked`` reason is cleared).

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

    async def deliver(self, run_id: str, items: Sequence[tuple[str, str | None, bytes]]) -> None:
        """Put (kind, target, payload) items in the run's inbox, all or none.

        This is where an answer to a request is decided, once: the first
        answer to a request id is kept; a later one raises and changes
        nothing. The run is marked ready, so a timer service or worker
        applies the items if no caller does.

        Raises:
            RunNotFoundError: no such run.
            RequestError: the run has ended.
            RequestAlreadyAnsweredError: a request was answered already.
        """
        ...

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """The run's inbox items not yet applied, in delivery order."""
        ...

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (its JSON, cut short, and when it came), or ``None``."""
        ...

    async def cancel(self, run_id: str) -> None:
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
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first."""
        ...

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """Runs a timer service must wake: due first.

        A run is due when its status is ``waiting`` or ``awaiting_input`` and
        its ``wake_at`` or its ``deadline_at`` is at or before ``now``.
        Ordered by the earlier of the two, oldest first.
        """
        ...

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints; return how many went.

        The run's latest checkpoint is always kept, and so is every piece a
        kept checkpoint of any run needs; the other pieces the deleted
        checkpoints used go with them.
        """
        ...

    async def close(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""
        ...
