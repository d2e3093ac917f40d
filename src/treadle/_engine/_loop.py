"""The loop driver: one run's status, supersteps, barrier and limits.

Each call to :meth:`RunLoop.step` runs one superstep and then its barrier.
Everything the barrier computes (state commit, routing into inboxes and
fan-in buffers, outputs, iteration counts) is computed first and assigned
last, so a superstep either commits whole or leaves the run exactly as the
previous barrier left it. :meth:`RunLoop.barrier_state` captures that
committed point as one plain value, which is what a checkpoint persists.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from treadle._engine._barrier import BarrierState, Checkpointing, EventSink
from treadle._engine._commit import commit_superstep
from treadle._engine._deadlines import expire_due, refuse_unanswerable
from treadle._engine._delivery import Envelope, FanInBuffer, stalled_fan_ins
from treadle._engine._errors import ExecutorFailedError, RunTimeoutError, WorkflowRunError
from treadle._engine._events import (
    ExecutorFailed,
    WorkflowEvent,
    checkpoint_saved,
    status_changed,
    superstep_started,
)
from treadle._engine._invocation import plan_superstep
from treadle._engine._invoke import invoke
from treadle._engine._result import RunResult, RunStatus
from treadle._engine._runner import run_superstep
from treadle._engine._spawn import SpawnedWork, SpawnResult, lost
from treadle._engine._state import initial_state
from treadle._engine._tracing import RunTrace
from treadle._engine._waits import WaitBook
from treadle._exceptions import RequestError, TreadleError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._engine._barrier import CommittedPoint
    from treadle._engine._deadlines import AnswerLedger
    from treadle._engine._options import RunSettings
    from treadle._engine._outcomes import Outcome
    from treadle._engine._pool import ExecutorPool
    from treadle._engine._topology import Topology

_RUNNING = RunStatus.RUNNING  # read at every step

INPUT_SOURCE = "__input__"
"""The ``source`` of the envelope that carries the run's input."""

SPAWN_SOURCE = "__spawn__"
"""The ``source`` of envelopes carrying ``SpawnResult`` messages."""


class RunLoop:
    """Drives one run of a workflow, superstep by superstep."""

    __slots__ = (
        "_progress",
        "_sink",
        "backpressure",
        "batching",
        "checkpointer",
        "clock",
        "deadline_at",
        "error",
        "fan_in_buffers",
        "fan_in_edges",
        "inline_calls",
        "iterations",
        "ledger",
        "limiter",
        "listening",
        "live",
        "options",
        "outcome",
        "outputs",
        "pending",
        "plain_calls",
        "pool",
        "publish",
        "ranks",
        "router",
        "run_id",
        "spawned",
        "state",
        "state_specs",
        "status",
        "superstep",
        "trace",
        "wait_scope",
        "waits",
        "workflow",
        "written",
    )

    def __init__(
        self,
        workflow: Topology,
        run_id: str,
        options: RunSettings,
        sink: EventSink | None,
        pool: ExecutorPool,
        state: Mapping[str, Any] | None = None,
        checkpointer: Checkpointing | None = None,
    ) -> None:
        self.workflow = workflow
        self.run_id = run_id
        self.options = options
        self.router = router = workflow.router
        self.fan_in_edges = fan_in_edges = router.fan_ins
        self.ranks = workflow.ranks
        self.state_specs = specs = workflow.state_specs
        self.state: Mapping[str, Any] = initial_state(specs, state) if specs or state else {}
        # The state keys written since the last checkpoint (tracked only when there is one).
        self.written: set[str] = set()
        self.superstep = 0
        # What a wait's key is made in (see wait_key): "" for a run of its own, whatever
        # its id, so a fork's copied waits keep their keys; a sub-workflow's run sets its
        # path in its parent, so waits of sibling sub-workflows never share a key.
        self.wait_scope = ""
        self.status = RunStatus.RUNNING
        self.pending: dict[str, list[Envelope]] = {}
        self.fan_in_buffers: tuple[FanInBuffer, ...] = (
            tuple([{} for _ in fan_in_edges]) if fan_in_edges else ()
        )
        self.iterations: dict[str, int] = {}
        self.outputs: list[Any] = []
        self.outcome: Outcome | None = None  # ctx.set_outcome's, committed at a barrier
        self.waits = WaitBook()
        self.spawned = SpawnedWork()
        self.error: TreadleError | None = None
        self.pool = pool
        self.checkpointer = checkpointer
        self._progress: asyncio.Lock | None = None  # made by the first save_progress
        # Where request deadlines are decided against answers: the store's (set by
        # whoever opens a stored run); without one they are decided here.
        self.ledger: AnswerLedger | None = None
        self._sink = sink
        self.listening = sink is not None
        # The sink's own method, bound once: events are published on the hot path.
        self.publish: Callable[[WorkflowEvent], None] = (
            sink.publish if sink is not None else self._discard
        )
        self.live = sink is not None and sink.live
        self.batching = self.listening and not self.live  # events kept for each barrier
        self.backpressure = sink.backpressure if sink is not None else None
        self.limiter = (
            asyncio.Semaphore(options.max_concurrency) if options.max_concurrency else None
        )
        self.clock = options.clock
        self.deadline_at = self.clock.now() + options.timeout if options.timeout else None
        tracing = options.tracing
        self.trace = RunTrace(tracing, run_id, workflow.name) if tracing is not None else None
        # Whether a handler is simply awaited: no span to open, no limit to take;
        # and whether it may also be started inline, its events kept for the batch.
        self.plain_calls = self.trace is None and self.limiter is None
        self.inline_calls = self.plain_calls and self.backpressure is None and not self.live

    # -- events ---------------------------------------------------------------
    def _discard(self, event: WorkflowEvent) -> None:
        """The sink of a run nobody listens to (callers check ``listening``)."""

    # -- lifecycle ----------------------------------------------------------------
    async def run_to_end(self) -> None:
        """Run supersteps until the run rests or ends (``result()`` then says how).

        With ``sleep_through_timers`` a ``WAITING`` run sleeps on the clock
        until its next timer (or its deadline) and goes on, instead of
        returning.
        """
        while True:
            while await self.step():
                pass
            if self.status is not RunStatus.WAITING or not await self.sleep_through_timer():
                return

    async def sleep_through_timer(self) -> bool:
        """For a ``WAITING`` run with nowhere to rest, sleep until its timer; ``True`` if it did.

        The run is ``RUNNING`` again afterwards. Runs with a store rest
        instead (``False``): their timers are woken by a ``Runtime`` or worker.
        """
        if not (self.options.sleep_through_timers and self.status is RunStatus.WAITING):
            return False
        wake = self.waits.next_wake_at()
        assert wake is not None  # noqa: S101 - WAITING means a timer is pending
        await self.clock.sleep_until(min(wake, self.deadline_at or wake))
        self._set_status(RunStatus.RUNNING)
        return True

    async def step(self) -> bool:
        """Run one superstep and its barrier; ``False`` once the run rests or ends.

        Raises:
            WorkflowRunError: the superstep failed (or the run passed its
                deadline); the run is ``FAILED``.
            DurabilityError: the barrier could not be checkpointed; the run
                is ``FAILED`` and resumes from the previous checkpoint.
        """
        if self.status is not _RUNNING:
            return False
        superstep = self.superstep + 1
        waits = self.waits
        if waits.suspended or waits.scheduled:
            self._wake_due()
        try:
            if not self.pending and self.spawned:
                for executor_id, result in await self.spawned.wait_any():
                    self.deliver_spawn_result(superstep, executor_id, result)
            if self.deadline_at is not None or waits.suspended:
                await self._check_deadlines(superstep)
            if not self.pending:
                # Restored and still resting: its last checkpoint says it all.
                self._set_status(self._resting_status())
                return False
            if self.trace is not None:
                self.trace.start_superstep(superstep)
            plan = plan_superstep(self, superstep)
            if self.listening:
                self.publish(superstep_started(self.run_id, superstep, plan.order))
            if len(plan.invocations) == 1:  # the common case, with no runner around it
                await invoke(plan.invocations[0])
            else:
                await run_superstep(self, plan)
            if self.backpressure is not None:
                await self.backpressure()
            commit_superstep(self, plan)
            refuse_unanswerable(self)  # with no store, a request would rest forever
        except WorkflowRunError as error:
            self._fail(error, superstep)
            await self.spawned.cancel_all()
            await self._record_status(RunStatus.FAILED, error)
            raise
        except asyncio.CancelledError:
            await self.cancel()
            raise
        status = _RUNNING if self.pending else self._resting_status()
        if self.checkpointer is not None or self.spawned.queued:
            status = await self._conclude(status)
        if status is not _RUNNING:
            self._set_status(status)
        if self.trace is not None:
            self.trace.end_superstep()
        return status is _RUNNING

    def _resting_status(self) -> RunStatus:
        """Where a run with no message pending stands."""
        if self.spawned:
            return RunStatus.RUNNING  # its background work will send messages
        waits = self.waits
        if waits.suspended or waits.scheduled or waits.approvals:
            return RunStatus.AWAITING_INPUT if waits.awaits_input else RunStatus.WAITING
        return RunStatus.STALLED if any(self.fan_in_buffers) else RunStatus.COMPLETED

    def _wake_due(self) -> bool:
        """Deliver the timers and scheduled messages that have fallen due."""
        if not self.waits:
            return False
        due = self.waits.take_due(self.clock.now())
        for executor_id, envelope in due:
            self.deliver(executor_id, envelope)
        return bool(due)

    def deliver(self, executor_id: str, envelope: Envelope) -> None:
        """Add a message to the next superstep's inbox, in stamp order."""
        box = self.pending.setdefault(executor_id, [])
        box.append(envelope)
        if len(box) > 1:
            box.sort(key=lambda e: e.stamp)

    async def _check_deadlines(self, superstep: int) -> None:
        """Fail the run past its deadline; time out the waits past theirs (``_deadlines.py``)."""
        deadline = self.deadline_at
        if deadline is not None and self.clock.now() >= deadline:
            raise RunTimeoutError(self.run_id, deadline, superstep)
        if self.waits.suspended:
            await expire_due(self)

    async def _conclude(self, status: RunStatus) -> RunStatus:
        """Checkpoint the barrier (with its resulting status), then start queued work.

        Returns the status the run moves to: ``status``, or ``PAUSED`` when
        the commit found the run paused (see :meth:`_stop_paused`). The
        caller moves the run there afterwards, so a status is announced only
        once the barrier that led to it is durable.
        """
        checkpointer = self.checkpointer
        if checkpointer is not None:
            try:
                written, self.written = frozenset(self.written), set()
                checkpoint_id = await checkpointer.save(
                    self.barrier_state(status, written), self.pool.snapshots()
                )
            except TreadleError as error:
                self.error = error
                self._set_status(RunStatus.FAILED, error)
                await self._record_status(RunStatus.FAILED, error)
                raise
            if checkpointer.paused:
                return await self._stop_paused(checkpoint_id)
            if self.spawned.queued:
                await checkpointer.flush()  # background mode: make it durable first
            if self.listening and checkpoint_id is not None:  # None only once paused
                self.publish(checkpoint_saved(self.run_id, self.superstep, checkpoint_id))
        if self.spawned.queued:
            self.spawned.start_queued()
        return status

    async def _stop_paused(self, checkpoint_id: str | None) -> RunStatus:
        """Stop at this barrier: someone paused the run, and its last commit honoured that.

        ``checkpoint_id`` is this barrier's, if its commit was the one (else
        the run paused at an earlier barrier still in flight, and this one
        is not written). The lease went with that commit; background work
        the run holds is cancelled (reported lost once it goes on).
        """
        if checkpoint_id is not None and self.listening:
            self.publish(checkpoint_saved(self.run_id, self.superstep, checkpoint_id))
        await self.spawned.cancel_all()
        return RunStatus.PAUSED

    async def save_progress(self, *, durable: bool = False) -> str | None:
        """Checkpoint the last barrier again, with the sub-workflow runs as they stand now.

        A sub-workflow runs its own supersteps inside one invocation of this
        run; each of its barriers is made durable through here, as a
        checkpoint of this run (its history shows them), so a crash inside it
        resumes from its last barrier. Until this run's own barrier, the
        loop still holds the previous barrier's committed point: that is
        what is saved, with :attr:`WaitBook.nested` (and the saved steps of
        invocations under way, :attr:`WaitBook.saved`) as it is now. Saves
        take turns. ``durable``: durable on return in every durability mode
        (a saved step's caller goes on to the next side effect only then).
        ``None`` without a store.
        """
        checkpointer = self.checkpointer
        if checkpointer is None:
            return None
        if self._progress is None:
            self._progress = asyncio.Lock()
        async with self._progress:
            barrier = self.barrier_state(_RUNNING, frozenset(self.written))
            saved = await checkpointer.save(barrier, self.pool.snapshots())
            if durable:
                await checkpointer.flush()
            return saved

    async def _record_status(self, status: RunStatus, error: BaseException | None = None) -> None:
        if self.checkpointer is not None:
            reason = f"{type(error).__name__}: {error}" if error is not None else None
            await self.checkpointer.record_status(self.run_id, status.value, reason)

    async def cancel(self) -> None:
        """Mark the run ``CANCELLED`` (the caller stops driving it)."""
        await self.spawned.cancel_all()
        if self.status is RunStatus.RUNNING:
            self._set_status(RunStatus.CANCELLED)
            await self._record_status(RunStatus.CANCELLED)
        elif self.trace is not None:
            self.trace.end(RunStatus.CANCELLED)  # cancelled asleep on a timer (no-op if ended)

    def restore(self, point: CommittedPoint, snapshots: Mapping[str, Any]) -> bool:
        """Seed the loop with a committed point instead of an input; ``False`` if it had ended.

        Background work the point still held died with its process: each
        executor that spawned it is told so (``SpawnResult(lost=True)``).
        """
        self.superstep = point.superstep
        self.state = point.state
        self.pending = {target: list(inbox) for target, inbox in point.pending.items()}
        self.fan_in_buffers = point.fan_in_buffers
        self.iterations = dict(point.iterations)
        self.outputs = list(point.outputs)
        self.outcome = point.outcome
        self.waits = point.waits.copy()
        self.deadline_at = point.deadline_at
        for executor_id, result in lost(list(point.spawned)):
            self.deliver_spawn_result(self.superstep + 1, executor_id, result)
        self.pool.restore(snapshots)
        if point.status in (RunStatus.COMPLETED, RunStatus.STALLED):
            self.status = RunStatus(point.status)  # nothing left to run
            return False
        return True

    def deliver_spawn_result(self, superstep: int, executor_id: str, result: SpawnResult) -> None:
        stamp = (superstep - 1, self.ranks[executor_id], -1, 0)
        self.deliver(executor_id, Envelope(stamp, SPAWN_SOURCE, result))

    # -- answers from outside ------------------------------------------------------
    def answer(self, request_id: str, value: Any) -> None:
        """Apply the answer to a pending request (validated), before stepping.

        Raises:
            UnknownRequestError: no such request is waiting.
            InvalidResponseError: the answer does not have the asked type.
        """
        waiting = self.waits.find_request(request_id)
        checked = self.workflow.check_answer(request_id, waiting, value)
        delivery = self.waits.answer(waiting, checked)
        if delivery is not None:  # None: a sub-workflow's invocation re-delivered already
            self.deliver(*delivery)

    def send_input(self, message: Any, target: str | None = None) -> None:
        """Deliver a session message to the invocation waiting for input.

        Raises:
            RequestError: nothing in the run waits for input.
        """
        suspension = self.waits.input_waiter(target)
        if suspension is None:
            where = f"executor {target!r} of run" if target else "run"
            msg = f"{where} {self.run_id!r} is not waiting for input ({self.status.value})"
            raise RequestError(msg)
        delivery = self.waits.answer(suspension, message)
        if delivery is not None:  # None: a sub-workflow's invocation re-delivered already
            self.deliver(*delivery)

    def _fail(self, error: WorkflowRunError, superstep: int) -> None:
        if self.listening and not self.live and isinstance(error, ExecutorFailedError):
            for event in error.events:  # earlier attempts' events, in the order raised
                self.publish(event)
            self.publish(
                ExecutorFailed(
                    run_id=self.run_id,
                    superstep=superstep,
                    executor_id=error.executor_id,
                    error=error.error,
                    attempt=error.attempt,
                )
            )
        self.error = error
        self._set_status(RunStatus.FAILED, error, superstep)
        error.result = self.result()

    def _set_status(
        self, status: RunStatus, error: BaseException | None = None, superstep: int | None = None
    ) -> None:
        """Move to ``status``, announced at ``superstep`` (a failure's; else the last committed)."""
        self.status = status
        # A run that sleeps through its timers goes on (``run_to_end``): its span stays open.
        if (
            self.trace is not None
            and status.is_stopped
            and not (status is RunStatus.WAITING and self.options.sleep_through_timers)
        ):
            self.trace.end(status, error)
        if self.listening:
            at = self.superstep if superstep is None else superstep
            self.publish(status_changed(self.run_id, at, status, error))

    # -- views ----------------------------------------------------------------------
    def barrier_state(
        self, status: RunStatus | None = None, written: frozenset[str] | None = None
    ) -> BarrierState:
        """The last committed point of the run, as one immutable value (``written``: if known)."""
        return BarrierState(
            run_id=self.run_id,
            superstep=self.superstep,
            status=status or self.status,
            pending={k: tuple(v) for k, v in self.pending.items()},
            fan_in_buffers=self.fan_in_buffers,
            state=self.state,
            iterations=dict(self.iterations),
            outputs=tuple(self.outputs),
            outcome=self.outcome,
            waits=self.waits.copy(),
            deadline_at=self.deadline_at,
            spawned=tuple(self.spawned.records()),
            written=written,
        )

    def result(self, events: list[WorkflowEvent] | None = None) -> RunResult:
        """The run as of its last barrier."""
        stalled = (
            stalled_fan_ins(self.fan_in_edges, self.fan_in_buffers, self.ranks)
            if self.status is RunStatus.STALLED
            else []
        )
        waits = self.waits
        return RunResult(
            run_id=self.run_id,
            status=self.status,
            outputs=list(self.outputs),
            state=dict(self.state),
            superstep=self.superstep,
            events=events if events is not None else [],
            stalled=stalled,
            pending_requests=waits.pending_requests() if waits else [],
            wake_at=waits.next_wake_at() if waits else None,
            last_checkpoint_id=(
                self.checkpointer.last_checkpoint_id if self.checkpointer is not None else None
            ),
            error=self.error,
            outcome=self.outcome[0] if self.outcome else None,
            outcome_summary=self.outcome[1] if self.outcome else None,
        )
