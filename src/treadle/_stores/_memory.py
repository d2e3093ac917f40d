"""``MemoryStore``: the store port over plain dicts, for tests and ephemeral work."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import TYPE_CHECKING

from treadle._exceptions import (
    CheckpointNotFoundError,
    RunBusyError,
    RunHasForksError,
    RunNotFoundError,
)
from treadle._stores import _audit, _memory_events
from treadle._stores._live import MemoryLiveFeed
from treadle._stores._memory_events import MemoryAudit
from treadle._stores._memory_limits import MemoryLimits
from treadle._stores._memory_outbox import MemoryOutbox
from treadle._stores._memory_ownership import MemoryOwnership, MemoryRun
from treadle._stores._memory_pieces import MemoryPieces, bare
from treadle._stores._memory_search import MemorySearch, after_cursor, set_fields
from treadle._stores._memory_starts import MemoryAdmissions, MemoryStart, adopted
from treadle._stores._schedules import MemorySchedules
from treadle._stores._sql_ownership import check_lease
from treadle._stores._sql_rules import (
    check_keep_last,
    check_limit,
    due_at,
    first_checkpoint_id,
    last_of_one_run,
)
from treadle._stores._store import DEFAULT_LEASE
from treadle._stores._tokens import MemoryTokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._events import EventEntry, LoggedEvent
    from treadle._stores._live import LiveFeed
    from treadle._stores._store import CheckpointInfo, CheckpointRecord, Lease, RunRecord
    from treadle._values._actors import Actor


class MemoryStore(
    MemoryAudit,
    MemoryOwnership,
    MemoryAdmissions,
    MemoryTokens,
    MemoryOutbox,
    MemorySearch,
    MemoryLimits,
    MemorySchedules,
):
    """Runs and checkpoints in this process's memory, gone when it exits.

    Behaves exactly like the durable stores (the same conformance suite holds
    it to the same results and errors), so a workflow tested against it
    behaves the same on SQLite. Records are frozen and blobs are immutable
    bytes, so both are kept and handed out as given, never copied.

    Every method runs to completion without awaiting and under a lock, so one
    store may serve several event loops and threads.
    """

    def __init__(self, *, keep_last: int | None = None, lease: float = DEFAULT_LEASE) -> None:
        """Create an empty store.

        Args:
            keep_last: Retention for every run: after each commit keep only
                this many checkpoints of the run (its latest always among them).
                ``None`` keeps everything; a ``keep_last`` given to ``commit``
                overrides it.
            lease: Seconds a lease on a run lasts without a heartbeat.

        Raises:
            ValueError: ``keep_last`` is below 1, or ``lease`` not positive.
        """
        check_keep_last(keep_last)
        check_lease(lease)
        self.lease = lease
        self._keep_last = keep_last
        self._runs: dict[str, MemoryRun] = {}
        self._pieces = MemoryPieces()
        # Checkpoint ids are unique store-wide, as in the SQL stores' primary key.
        self._owners: dict[str, str] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._inbox_seq = 0
        self._starts: dict[str, MemoryStart] = {}  # start rows of runs started under a policy
        self._audit: list[_audit.AuditEntry] = []
        self.live: LiveFeed = MemoryLiveFeed()
        """Its runs' live events, followed in this process (see :mod:`treadle._stores._live`)."""

    async def create_run(
        self, run: RunRecord, graph: bytes, first: CheckpointRecord, *, lease: Lease | None = None
    ) -> None:
        """Insert a new run with its graph description and first checkpoint.

        The stored row names ``first`` as the run's latest checkpoint and takes
        its ``wake_at``.

        Raises:
            RunExistsError: A run with this id exists already.
            RunNotFoundError: The run it is forked from is gone.
            ValueError: ``first`` belongs to another run, or its id is taken.
        """
        self._check_open()
        latest = first_checkpoint_id(run, first.info)
        with self._lock:
            admitted = self._admitted(run.run_id, lease)  # a start policy's row, to start
            self._check_new_checkpoint(first.info)
            self._pieces.check((first,))
            parent = run.parent_run_id  # a fork's, gone since it was read
            if parent is not None and parent != run.run_id and parent not in self._runs:
                raise RunNotFoundError(parent)
            record = dataclasses.replace(run, checkpoint_id=latest, wake_at=first.info.wake_at)
            if lease is not None:
                record = dataclasses.replace(record, owner=lease.owner, lease_until=lease.until)
            epoch = lease.epoch if lease is not None else 0
            made = MemoryRun(record, graph, {latest: bare(first)}, epoch=epoch)
            self._runs[run.run_id] = adopted(admitted, made) if admitted is not None else made
            self._owners[latest] = run.run_id
            self._pieces.add((first,))
            _memory_events.append(self._runs[run.run_id], first.events)
            set_fields(self._runs[run.run_id], (first,))
            started = _audit.started_of(run) if admitted is None else None
            if started is not None:
                self._record((started,), run.created_at)

    async def commit(self, checkpoint: CheckpointRecord, *, keep_last: int | None = None) -> None:
        """Add a checkpoint and make it the run's latest, then apply retention.

        The run row takes the checkpoint's status, superstep and ``wake_at``,
        its ``created_at`` as ``updated_at``, and loses any ``error``.

        Raises:
            RunNotFoundError: No such run.
            ValueError: The checkpoint's id is taken, or ``keep_last`` is below 1.
        """
        await self.commit_many((checkpoint,), keep_last=keep_last)

    async def commit_many(
        self,
        checkpoints: Sequence[CheckpointRecord],
        *,
        keep_last: int | None = None,
        lease: Lease | None = None,
        consumed: int | None = None,
        release: bool = False,
        immediate: bool = False,  # noqa: ARG002 - every call is immediate here
    ) -> bool:
        """:meth:`commit` for several checkpoints of one run, in order, all or none.

        Under a lease it honours a pause asked of the run meanwhile: ``True``
        when this commit paused it (see the store port).

        Raises:
            RunNotFoundError: No such run.
            ValueError: An id is taken; the checkpoints are none, of several
                runs, or repeat an id; ``keep_last`` is below 1.
        """
        self._check_open()
        info = last_of_one_run(checkpoints)
        check_keep_last(keep_last)
        with self._lock:
            run = self._run(info.run_id)
            self._check_lease(run, lease)
            for checkpoint in checkpoints:  # every check before any change
                self._check_new_checkpoint(checkpoint.info)
            self._pieces.check(checkpoints)
            for checkpoint in checkpoints:
                run.checkpoints[checkpoint.info.checkpoint_id] = bare(checkpoint)
                self._owners[checkpoint.info.checkpoint_id] = info.run_id
            self._pieces.add(checkpoints)
            run.record = dataclasses.replace(
                run.record,
                status=info.status,
                superstep=info.superstep,
                checkpoint_id=info.checkpoint_id,
                updated_at=info.created_at,
                wake_at=info.wake_at,
                error=None,
                outcome=outcome[0] if (outcome := checkpoints[-1].outcome) else None,
                outcome_summary=outcome[1] if outcome else None,
            )
            for checkpoint in checkpoints:
                _memory_events.append(run, checkpoint.events)
            set_fields(run, checkpoints)
            if consumed is not None:
                run.consumed = max(run.consumed, consumed)
            paused = False
            if lease is not None and run.record.pause_requested is not None:
                paused = self._honour_pause(run)
            elif lease is not None and release:
                self._release(run)
            self._refuse_leftovers(run, lease, info.status)
            retention = keep_last if keep_last is not None else self._keep_last
            if retention is not None:
                self._drop_oldest(run, retention)
            return paused

    async def migrate_run(
        self,
        lease: Lease,
        version: int,
        graph: bytes,
        checkpoint: CheckpointRecord,
        *,
        actor: Actor | None = None,
    ) -> bool:
        """Move a run to another version under ``lease``, all or nothing (see the port).

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current.
        """
        self._check_open()
        with self._lock:  # re-entered by commit_many: one step for other threads
            run = self._run(checkpoint.info.run_id)
            self._check_lease(run, lease)
            if any(item.seq > run.consumed for item, _ in run.inbox):
                return False
            await self.commit_many((checkpoint,), lease=lease, release=True)
            run.record = dataclasses.replace(run.record, version=version)
            run.graph = graph
            if actor is not None:
                self._record([_audit.migrated(run.record.run_id, actor, version)], time.time())
            return True

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
        """Change a run's status and error, stamping ``updated_at`` with the wall clock.

        ``events`` go to the run's log with the change.

        Raises:
            RunNotFoundError: No such run.
            LeaseLostError: ``lease`` is no longer current.
        """
        self._check_open()
        with self._lock:
            run = self._run(run_id)
            self._check_lease(run, lease)
            run.record = dataclasses.replace(
                run.record, status=status, error=error, updated_at=time.time()
            )
            if lease is not None and release:
                self._release(run)
            _memory_events.append(run, events)
            self._refuse_leftovers(run, lease, status)

    async def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[LoggedEvent]:
        """The run's events after ``after``, oldest first, at most ``limit``.

        Raises:
            RunNotFoundError: No such run.
            ValueError: ``limit`` is negative.
        """
        self._check_open()
        check_limit(limit)
        with self._lock:
            return _memory_events.read(self._run(run_id), after, limit)

    async def last_event_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's newest event, 0 if none yet.

        Raises:
            RunNotFoundError: No such run.
        """
        self._check_open()
        with self._lock:
            return len(self._run(run_id).events)

    async def delete_run(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Delete a run: its row, checkpoints, inbox, event log, and pieces only it used.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: A process holds a current lease on it.
            RunHasForksError: Runs were forked from it (delete them first).
        """
        self._check_open()
        with self._lock:
            record = self._run(run_id).record
            if record.owned(time.time()):
                assert record.owner is not None  # noqa: S101 - owned says so
                raise RunBusyError(run_id, record.owner, record.lease_until or 0.0)
            runs = self._runs.values()
            forks = [r.record.run_id for r in runs if r.record.parent_run_id == run_id]
            if forks:
                raise RunHasForksError(run_id, forks)
            self._drop_oldest(self._runs[run_id], 0, keep_latest=False)
            del self._runs[run_id]
            self._forget_links(run_id)
            if actor is not None:
                self._record([_audit.deleted(run_id, actor)], time.time())

    async def get_run(self, run_id: str) -> RunRecord:
        """The run row.

        Raises:
            RunNotFoundError: No such run.
        """
        self._check_open()
        with self._lock:
            return self._run(run_id).record

    async def get_graph(self, run_id: str) -> bytes:
        """The graph description stored when the run was created.

        Raises:
            RunNotFoundError: No such run.
        """
        self._check_open()
        with self._lock:
            return self._run(run_id).graph

    async def load_resumable(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> tuple[RunRecord, bytes, CheckpointRecord | None]:
        """The run row, its graph and one checkpoint (``None``: no such checkpoint), read at once.

        Raises:
            RunNotFoundError: No such run.
        """
        self._check_open()
        with self._lock:
            run = self._run(run_id)
            wanted = checkpoint_id if checkpoint_id is not None else run.record.checkpoint_id
            found = run.checkpoints.get(wanted) if wanted is not None else None
            if found is not None and found.refs:
                found = dataclasses.replace(found, pieces=self._pieces.needed(found.refs))
            return run.record, run.graph, found

    async def load_checkpoint(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> CheckpointRecord:
        """One checkpoint of a run; its latest when ``checkpoint_id`` is None.

        Raises:
            RunNotFoundError: No such run.
            CheckpointNotFoundError: The run has no such checkpoint.
        """
        _, _, found = await self.load_resumable(run_id, checkpoint_id)
        if found is None:
            raise CheckpointNotFoundError(run_id, checkpoint_id)
        return found

    async def list_checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every kept checkpoint of a run, oldest first: by superstep, time, then commit.

        Raises:
            RunNotFoundError: No such run.
        """
        self._check_open()
        with self._lock:
            records = list(self._run(run_id).checkpoints.values())
        # sorted() is stable, so equal keys stay in commit order.
        records.sort(key=lambda record: (record.info.superstep, record.info.created_at))
        return [record.info for record in records]

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
        """Runs matching every filter given, newest first (by ``created_at``, then creation).

        Raises:
            ValueError: ``limit`` is negative.
        """
        self._check_open()
        check_limit(limit)
        with self._lock:
            newest_created_last = [run.record for run in reversed(self._runs.values())]
        matching = [
            record
            for record in newest_created_last
            if (status is None or record.status == status)
            and (workflow is None or record.workflow == workflow)
            and (parent_run_id is None or record.parent_run_id == parent_run_id)
            and (id_prefix is None or record.run_id.startswith(id_prefix))
            and (outcome is None or record.outcome == outcome)
        ]
        # Stable, so runs with equal created_at stay newest-created first.
        matching.sort(key=lambda record: record.created_at, reverse=True)
        if before is not None:
            matching = after_cursor(matching, before)
        return matching if limit is None else matching[:limit]

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """``waiting`` and ``awaiting_input`` runs whose ``wake_at`` or ``deadline_at`` is due.

        Ordered by the earlier of the two, oldest first (then by creation).

        Raises:
            ValueError: ``limit`` is negative.
        """
        self._check_open()
        check_limit(limit)
        with self._lock:
            in_creation_order = [run.record for run in self._runs.values()]
        due = [
            (when, record)
            for record in in_creation_order
            if (when := due_at(record)) is not None and when <= now
        ]
        # Stable, so runs due at the same time stay in creation order.
        due.sort(key=lambda pair: pair[0])
        return [record for _, record in due[:limit]]

    async def prune(self, run_id: str, keep_last: int, *, actor: Actor | None = None) -> int:
        """Delete all but the ``keep_last`` most recently committed checkpoints.

        The run's latest checkpoint is always kept.

        Returns:
            How many checkpoints were deleted.

        Raises:
            RunNotFoundError: No such run.
            ValueError: ``keep_last`` is below 1.
        """
        self._check_open()
        check_keep_last(keep_last)
        with self._lock:
            removed = self._drop_oldest(self._run(run_id), keep_last)
            if actor is not None:
                self._record([_audit.pruned(run_id, actor, keep_last, removed)], time.time())
            return removed

    async def close(self) -> None:
        """Make the store unusable; closing again does nothing."""
        self._closed = True
        await self.live.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this MemoryStore is closed")

    def _run(self, run_id: str) -> MemoryRun:
        try:
            return self._runs[run_id]
        except KeyError:
            raise RunNotFoundError(run_id) from None

    def _check_new_checkpoint(self, info: CheckpointInfo) -> None:
        owner = self._owners.get(info.checkpoint_id)
        if owner is not None:
            raise ValueError(f"checkpoint id {info.checkpoint_id!r} is taken by run {owner!r}")

    def _drop_oldest(self, run: MemoryRun, keep_last: int, *, keep_latest: bool = True) -> int:
        latest = run.record.checkpoint_id if keep_latest else None
        kept = list(run.checkpoints)[:-keep_last] if keep_latest else list(run.checkpoints)
        doomed = [checkpoint_id for checkpoint_id in kept if checkpoint_id != latest]
        named: list[str] = []
        for checkpoint_id in doomed:
            named.extend(run.checkpoints.pop(checkpoint_id).refs)
            del self._owners[checkpoint_id]
        if named:
            root = self._root(run.record.run_id)
            lineage = [r for r in self._runs.values() if self._root(r.record.run_id) == root]
            needed = {ref for r in lineage for c in r.checkpoints.values() for ref in c.refs}
            self._pieces.collect(named, needed)
        return len(doomed)

    def _root(self, run_id: str) -> str:
        """The run a fork tree starts from: the runs under it may share pieces."""
        parent = self._runs[run_id].record.parent_run_id
        while parent is not None and parent in self._runs:
            run_id, parent = parent, self._runs[parent].record.parent_run_id
        return run_id

    @property
    def piece_count(self) -> int:
        """How many pieces the store holds (what retention leaves is visible in tests)."""
        return len(self._pieces)
