"""Saving one run's barriers to a store, in the order they commit.

The loop hands every committed barrier to its :class:`Checkpointer`, which
encodes it, links it to the checkpoint it was computed from and commits it
to the store in one transaction. Status changes that commit no superstep
(a failure, a cancellation) update the run row only, so the last checkpoint
stays exactly what the last barrier committed.

Three durability modes:

* ``"sync"`` (default): the next superstep starts only once the barrier's
  commit is durable (fsync'd). A crash loses nothing committed.
* ``"background"``: the commit of barrier N runs while superstep N+1
  computes; barrier N+1 first waits for commit N. At most one commit is in
  flight, so a crash loses at most the last superstep's checkpoint (the run
  resumes from the one before and re-runs at most two supersteps).
* ``"batched"``: supersteps go on while one store call writes; the
  barriers saved meanwhile queue and go to the store together in the next
  call (``commit_many``: one transaction, one fsync for them all). A
  superstep waits only when :data:`BATCHED_IN_FLIGHT` checkpoints are not
  yet durable, so a crash loses at most that many (the run re-runs at most
  one superstep more).

In every mode each barrier gets its own checkpoint, in order, and the
barrier that stops the run (it rests or ends), every status change and any
spawned work wait for all commits.

**Writes start when the run awaits.** A write handed to a store's thread
overlaps the next superstep only while that superstep awaits something:
one that computes the whole time holds the GIL the thread needs between
its statements, so the hand-off (two thread wake-ups, the GIL going back
and forth) is all the overlap buys. So in background and batched modes a
barrier's write starts only once the run lets the event loop run (a
callback the loop calls the next time it gets to: the run awaits an
answer, a timer, a call, or another run's work). A run that goes from
barrier to barrier without ever letting it queues its barriers, within
the mode's limit, and once one more would pass it they all go to the
store in one call, awaited at once (``immediate``: ``SqliteStore`` then
writes on the caller's thread when its writer is idle; one transaction,
one fsync). The limit holds as before, so the loss window is the same:
such a run writes two barriers a commit in background mode, seventeen in
batched.

A commit may find the run paused (``Store.pause`` asked it to while this
process advanced it): that commit pauses it and gives the lease up, and the
checkpointer says so (:attr:`Checkpointer.paused`) and writes nothing more,
so the loop stops at that barrier. In background and batched modes the
commit that pauses may be one the run went past already: the barriers after
it are not written (they run again once the run is unpaused, as after a crash).
"""

from __future__ import annotations

import asyncio
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from treadle._checkpoints._delta import PieceCache
from treadle._engine._clock import SystemClock
from treadle._engine._slots import blank, unfrozen_twin
from treadle._exceptions import LeaseLostError
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord
from treadle._values._ids import new_checkpoint_id

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from treadle._checkpoints._codec import CheckpointCodec, RestoredRun
    from treadle._checkpoints._journal import EventJournal
    from treadle._checkpoints._ownership import Ownership
    from treadle._engine._barrier import BarrierState
    from treadle._engine._clock import Clock
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._metrics import RunMeter
    from treadle._engine._options import Durability
    from treadle._stores._run_roles import RunWrites
    from treadle._values._search_fields import FieldValue, SearchFields


BATCHED_IN_FLIGHT = 16
"""How many checkpoints ``durability="batched"`` lets be not yet durable (its loss window)."""

# CheckpointInfo and CheckpointRecord, unfrozen: _record makes each slot by slot.
_InfoDraft = unfrozen_twin(CheckpointInfo)
_RecordDraft = unfrozen_twin(CheckpointRecord)

# How many checkpoints each mode lets be not yet durable while the run goes on.
_IN_FLIGHT: Final[Mapping[str, int]] = {"sync": 0, "background": 1, "batched": BATCHED_IN_FLIGHT}


class Checkpointer:
    """Persists the barriers of one run.

    Args:
        store: Where checkpoints go.
        codec: How barriers become sealed bytes.
        fingerprint: The graph fingerprint stamped into every checkpoint.
        base: The checkpoint the run goes on from (resume, fork, time
            travel), ``None`` for a new run: the next checkpoint is linked
            to it and reuses its pieces.
        keep_last: Retention for this run (``None``: the store's setting).
        durability: ``"sync"``, ``"background"`` or ``"batched"`` (see the
            module docstring).
        ownership: The lease the run is held under: every write carries it,
            and the commit that brings the run to rest gives it up.
        clock: The run's clock, which stamps each checkpoint's
            ``created_at`` (and a new run's row), so a run on a fake clock
            has a history in its own time, consistent with its timers.
        journal: Where the run's events are kept for its event log: each
            checkpoint carries those of its superstep to the store, and a
            status recorded without one carries those since the last.
        fields: The workflow's search fields: each checkpoint carries the
            values that changed since the last one this checkpointer saved
            (all of them at its first), written in its transaction.
        meter: Where each store write's checkpoint sizes and latency are
            reported (``None``: nowhere, at no cost).
    """

    def __init__(
        self,
        store: RunWrites,
        codec: CheckpointCodec,
        fingerprint: str,
        *,
        base: RestoredRun | None = None,
        keep_last: int | None = None,
        durability: Durability = "sync",
        ownership: Ownership | None = None,
        clock: Clock | None = None,
        journal: EventJournal | None = None,
        fields: SearchFields | None = None,
        meter: RunMeter | None = None,
    ) -> None:
        if durability not in _IN_FLIGHT:
            modes = ", ".join(map(repr, _IN_FLIGHT))
            msg = f"durability must be one of {modes}, got {durability!r}"
            raise ValueError(msg)
        self.store = store
        self.ownership = ownership
        self._clock = clock if clock is not None else SystemClock()
        self._codec = codec
        self._fingerprint = fingerprint
        self.last_checkpoint_id = base.checkpoint_id if base is not None else None
        self.journal = journal
        self._meter = meter
        self._keep_last = keep_last
        self._in_flight_limit = _IN_FLIGHT[durability]
        self._cache = base.piece_cache() if base is not None else PieceCache()
        # At most one store call writes at a time, so checkpoints reach the store in
        # order; barriers saved meanwhile queue, encoded, for the next call.
        self._writing: asyncio.Future[bool] | None = None
        self._writing_count = 0
        self._writing_releases = False  # the write in flight gives the run's lease up
        self._writing_last: str | None = None  # the newest checkpoint of the write in flight
        self._writing_point: BarrierState | None = None  # and the barrier it holds
        # A tuple, replaced as barriers queue: in sync mode it holds one barrier at a time,
        # and the store takes it as it is (an empty list per run in flight, and a list per
        # write, were objects more for the garbage collector to walk at every pass).
        self._queued: tuple[CheckpointRecord, ...] = ()
        self._queued_point: BarrierState | None = None  # the barrier the newest queued holds
        # The loop's callback starting the queued barriers' write (see the module docstring).
        self._soon: asyncio.Handle | None = None
        # A commit paused the run: nothing more is written (see the module docstring),
        # and the run stops at the barrier that commit held (``paused_point``).
        self.paused = False
        self.paused_point: BarrierState | None = None
        self._fields = fields or None
        self._fields_saved: dict[str, FieldValue] = {}  # the last value of each, as saved

    def _changed_fields(
        self, barrier: BarrierState, extra: tuple[FieldValue, ...]
    ) -> tuple[FieldValue, ...]:
        """The search fields' values at this barrier that differ from those saved before."""
        fields = self._fields
        if fields is None:
            return ()
        changed = []
        for value in (*extra, *fields.of_state(barrier.state, barrier.run_id)):
            if self._fields_saved.get(value.name) != value:
                self._fields_saved[value.name] = value
                changed.append(value)
        return tuple(changed)

    def _record(
        self,
        barrier: BarrierState,
        snapshots: Mapping[str, Any],
        input_fields: tuple[FieldValue, ...] = (),
    ) -> CheckpointRecord:
        checkpoint_id = new_checkpoint_id()
        journal = self.journal
        events = (
            journal.take(
                barrier.superstep, barrier.status.value, checkpoint_id, outcome=barrier.outcome
            )
            if journal is not None
            else ()
        )
        # Both made slot by slot, as the engine makes its values of every superstep
        # (see treadle._engine._slots): a frozen dataclass's __init__ sets each field
        # through object.__setattr__.
        info: Any = blank(_InfoDraft)
        info.checkpoint_id = checkpoint_id
        info.run_id = barrier.run_id
        info.superstep = barrier.superstep
        info.status = barrier.status.value
        info.parent_checkpoint_id = self.last_checkpoint_id
        info.created_at = self._clock.now()
        info.wake_at = barrier.wake_at
        info.__class__ = CheckpointInfo  # frozen from here on
        encoded = self._codec.encode(barrier, self._fingerprint, snapshots, self._cache)
        record: Any = blank(_RecordDraft)
        record.info = info
        record.blob, record.refs, record.pieces, record.requires = encoded
        record.events = events
        record.outcome = barrier.outcome
        record.fields = self._changed_fields(barrier, input_fields)
        record.__class__ = CheckpointRecord  # frozen from here on
        made: CheckpointRecord = record
        return made

    async def create(
        self,
        workflow_name: str,
        graph: bytes,
        barrier: BarrierState,
        snapshots: Mapping[str, Any],
        *,
        parent_run_id: str | None = None,
        version: int = 1,
        started_by: str | None = None,
        input: Any = None,  # noqa: A002 - the run's input, as users say it
    ) -> str:
        """Create the run row with its first checkpoint; return the checkpoint id.

        ``version`` is the version of ``workflow_name`` the run goes on with;
        ``started_by`` who started (or forked) it, as the store records it;
        ``input`` the run's input, which its input search fields are computed from
        (``None``: a fork, which has no input of its own).
        """
        fields = self._fields
        from_input = (
            () if fields is None or input is None else fields.of_input(input, barrier.run_id)
        )
        record = self._record(barrier, snapshots, from_input)
        now = record.info.created_at
        run = RunRecord(
            run_id=barrier.run_id,
            workflow=workflow_name,
            status=barrier.status.value,
            superstep=barrier.superstep,
            checkpoint_id=record.info.checkpoint_id,
            parent_run_id=parent_run_id,
            parent_checkpoint_id=self.last_checkpoint_id if parent_run_id else None,
            created_at=now,
            updated_at=now,
            wake_at=barrier.wake_at,
            deadline_at=barrier.deadline_at,
            owner=self.ownership.lease.owner if self.ownership is not None else None,
            lease_until=self.ownership.lease.until if self.ownership is not None else None,
            version=version,
            outcome=barrier.outcome[0] if barrier.outcome else None,
            outcome_summary=barrier.outcome[1] if barrier.outcome else None,
            started_by=started_by,
        )
        if self.ownership is not None:
            await self.ownership.create_run(run, graph, record)
        else:
            await self.store.create_run(run, graph, record)
        self.last_checkpoint_id = record.info.checkpoint_id
        return record.info.checkpoint_id

    async def save(self, barrier: BarrierState, snapshots: Mapping[str, Any]) -> str | None:
        """Commit one barrier; return its checkpoint id (``None``: the run was paused first).

        The barrier is encoded first, while an earlier commit may still be on
        its way to disk. In sync mode, and in any mode for a barrier that
        stops the run (it rests or ends: either way its process may go
        away), it is durable on return; otherwise it is handed over
        (background) or queued for the next store call (batched), within
        the mode's limit of commits in flight (its write starting once the
        run awaits: see the module docstring). Once a commit has paused the
        run (:attr:`paused`), nothing more is written and this returns
        ``None`` for a barrier that was not.
        """
        if self.paused:
            return None
        record = self._record(barrier, snapshots)
        self._queued = (*self._queued, record)
        self._queued_point = barrier
        limit = 0 if barrier.status.is_stopped else self._in_flight_limit
        writing = self._writing
        if writing is not None and (
            writing.done() or self._writing_count + len(self._queued) > limit
        ):
            await self._finish_writing()
        if limit == 0 or (self._writing is None and len(self._queued) > limit):
            await self.flush()  # the loop never ran since the last barrier: write them now
        elif self._writing is None and not self.paused and self._soon is None:
            # Awaited later: it overlaps whatever the run awaits next (module docstring).
            self._soon = asyncio.get_running_loop().call_soon(self._start_soon)
        if self.paused:  # by this barrier's commit, or by an earlier one (this one is dropped)
            written = self.last_checkpoint_id == record.info.checkpoint_id
            return record.info.checkpoint_id if written else None
        self.last_checkpoint_id = record.info.checkpoint_id
        return record.info.checkpoint_id

    def _start_soon(self) -> None:
        """The loop got to run: start writing what queued, unless it went meanwhile."""
        self._soon = None
        if self._writing is None and self._queued and not self.paused:
            self._start_writing(immediate=False)

    def _start_writing(self, *, immediate: bool) -> None:
        commit, batch = self._commit_queued(immediate=immediate)
        self._writing = asyncio.ensure_future(commit)
        if self._meter is not None:
            _count_commit(self._writing, self._meter, batch)

    def _commit_queued(
        self, *, immediate: bool
    ) -> tuple[Awaitable[bool], tuple[CheckpointRecord, ...]]:
        """The store call committing the queued barriers (not yet awaited), and the barriers."""
        soon, self._soon = self._soon, None
        if soon is not None:
            soon.cancel()  # what it would have written goes now
        batch, self._queued = self._queued, ()
        ownership = self.ownership
        if ownership is None:
            commit = self.store.commit_many(batch, keep_last=self._keep_last, immediate=immediate)
        else:  # a run that comes to rest lets go of its lease with the same transaction
            rests = batch[-1].info.status != "running"
            commit = ownership.commit_many(
                batch, keep_last=self._keep_last, release=rests, immediate=immediate
            )
            self._writing_releases = rests
        self._writing_count = len(batch)
        self._writing_last = batch[-1].info.checkpoint_id
        self._writing_point, self._queued_point = self._queued_point, None
        return commit, batch

    async def _finish_writing(self) -> None:
        writing, self._writing = self._writing, None
        assert writing is not None  # noqa: S101 - called only while a write is in flight
        await self._settle(writing)

    async def _settle(self, writing: Awaitable[bool]) -> None:
        """Await a write of the queued barriers and take in what it says."""
        point, self._writing_point = self._writing_point, None
        try:
            paused = await writing
        except LeaseLostError as error:
            self._queued = ()
            if self.ownership is None:
                raise
            raise await self.ownership.lost(error) from None
        except BaseException:
            self._queued = ()  # they follow checkpoints that were not written: never write them
            raise
        if paused:  # the run stops at the last checkpoint of this write; the lease went with it
            self.paused = True
            self._queued = ()
            self.last_checkpoint_id = self._writing_last
            self.paused_point = point
        if self.ownership is not None:
            self.ownership.committed(released=self._writing_releases or bool(paused))

    async def flush(self) -> None:
        """Wait until every checkpoint saved so far is durable (re-raising a failed commit).

        With no write in flight, the queued barriers' write is awaited by the
        caller's own task, as any store call is: a task of its own (which a
        write the run goes on past needs) cost every superstep of a run in
        sync mode the task's making and a turn of the event loop more. The
        meter times a write by its future's completion, so a metered run's
        still gets one.
        """
        while self._writing is not None or self._queued:
            if self._writing is None and self._meter is None:
                commit, _ = self._commit_queued(immediate=True)
                await self._settle(commit)
                continue
            if self._writing is None:
                self._start_writing(immediate=True)  # awaited right here
            await self._finish_writing()

    def relay(self, event: WorkflowEvent) -> None:
        """Hand a live event to the run's followers now, through its journal's feed."""
        if self.journal is not None:
            self.journal.relay(event)

    async def record_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Record a status that commits no superstep (failed, cancelled, running).

        Not once a commit paused the run: the status is of a superstep past
        the barrier it paused at, which runs again when it goes on.
        """
        try:
            await self.flush()
        finally:
            if not self.paused:
                await self._write_status(run_id, status, error)

    async def _write_status(self, run_id: str, status: str, error: str | None) -> None:
        journal = self.journal
        events = journal.failure_entries(status, error) if journal is not None else ()
        if self.ownership is not None:
            await self.ownership.set_status(
                status, error, release=status != "running", events=events
            )
        else:
            await self.store.set_status(run_id, status, error, events=events)


def _count_commit(
    writing: asyncio.Future[bool], meter: RunMeter, batch: tuple[CheckpointRecord, ...]
) -> None:
    """Report the write's checkpoint sizes and latency once it is durable (not if it failed).

    Timed by the future's own completion, so a background write that the run
    awaits only a superstep later is not charged for the superstep.
    """
    sizes = tuple(len(r.blob) + sum(len(p.blob) for p in r.pieces) for r in batch)
    started = perf_counter()

    def done(future: asyncio.Future[bool]) -> None:
        if not future.cancelled() and future.exception() is None:
            meter.metrics.commit(meter.workflow, sizes, perf_counter() - started)

    writing.add_done_callback(done)
