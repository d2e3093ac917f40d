"""The store's roles about runs: reading and counting them, an owner's writes, removing them.

Each role is a small protocol a consumer is typed by (the checkpointer by
:class:`RunWrites`, a listing by :class:`RunReads`); :class:`~treadle._stores._store.Store`
is their union. Writes given a lease are fenced (see
:mod:`treadle._stores._lease_roles`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Collection, Sequence

    from treadle._stores._events import EventEntry
    from treadle._stores._records import (
        CheckpointInfo,
        CheckpointRecord,
        Lease,
        RunRecord,
    )
    from treadle._values._actors import Actor


class RunReads(Protocol):
    """What is stored about runs: their rows, graphs and checkpoints (reads only)."""

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

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """Runs a timer service must wake: due first.

        A run is due when its status is ``waiting`` or ``awaiting_input`` and
        its ``wake_at`` or its ``deadline_at`` is at or before ``now``.
        Ordered by the earlier of the two, oldest first.
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


class RunCounts(Protocol):
    """What a scrape of the metrics reads: counts the store makes where the rows are.

    However many runs there are, or are due, none is read into the process.
    """

    async def run_counts(self) -> dict[tuple[str, str], int]:
        """How many runs there are of each ``(workflow, status)``."""
        ...

    async def count_due_runs(self, now: float) -> int:
        """How many runs :meth:`RunReads.due_runs` would list now (timers due)."""
        ...

    async def answers_waiting(self, run_ids: Collection[str]) -> dict[str, set[str]]:
        """The requests of these runs whose answer waits in their inbox, by run.

        One read for them all (runs with none are left out): an answer is
        applied by the run's owner, until then its latest checkpoint still
        lists the request.
        """
        ...


class RunWrites(Protocol):
    """How a run's owner writes it: created, committed, its status set, migrated, parked.

    These are the writes fencing guards: given a lease, each happens only
    while that lease is current (else ``LeaseLostError``), and a worker's
    ``LeasedStore`` wraps this role to fence every one by its claim.
    """

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

    async def park(self, lease: Lease, reason: str) -> None:
        """Set a run aside with ``reason`` and give its lease up: services stop waking it.

        A parked run rests as it was; a ``resume`` (which acquires it) takes it up.

        Raises:
            LeaseLostError: ``lease`` is no longer current.
        """
        ...

    async def refuse_inbox(
        self, lease: Lease, refusals: Sequence[tuple[int, str]], actor: Actor
    ) -> None:
        """Take inbox items the run's owner cannot apply out of its inbox, each recorded.

        ``refusals``: (seq, reason) of each item. Each one still unapplied is
        marked applied and no longer an answer (kept as it was sent), and
        recorded as ``inbox_refused`` (by ``actor``, with its reason), so a
        request whose answer did not fit can be answered again; all in one
        transaction, fenced by ``lease``.

        Raises:
            LeaseLostError: ``lease`` is no longer current; nothing was written.
        """
        ...


class RunRemoval(Protocol):
    """Actions from outside that end or remove a run, or its old checkpoints.

    With ``actor``, each is recorded (see :class:`~treadle._stores._store.Store`).
    """

    async def cancel(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Mark the run ``cancelled`` wherever it is, fencing out any owner.

        The lease epoch moves on, so an owner still computing commits
        nothing more. Its last checkpoint stays intact. Session messages
        its inbox holds unapplied are refused in the same transaction, each
        recorded as ``inbox_refused`` in ``actor``'s name; answers stay,
        marked applied.

        Raises:
            RunNotFoundError: no such run.
            RequestError: it has ended already.
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

    async def prune(self, run_id: str, keep_last: int, *, actor: Actor | None = None) -> int:
        """Delete all but the newest ``keep_last`` checkpoints; return how many went.

        With ``actor``, ``run_pruned`` is recorded (also when none went).

        The run's latest checkpoint is always kept, and so is every piece a
        kept checkpoint of any run needs; the other pieces the deleted
        checkpoints used go with them.
        """
        ...
