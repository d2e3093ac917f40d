"""The loop driver: one run's status, supersteps, barrier and limits.

The loop holds the run's environment (``RunEnv``: what it was opened
with, never changed) and its committed point (``BarrierState``: what the
last barrier committed). Each call to :meth:`RunLoop.step` applies what
arrived since (``_engine/_arrivals.py``), plans the superstep
(``plan_superstep``), runs its invocations (``_engine/_runner.py``) and
commits it (``commit_superstep``): planning and committing are pure, and
the loop only takes the point the barrier returns, so a superstep either
commits whole or leaves the run exactly as the previous barrier left it.
The point is what a checkpoint persists. Runs are opened through
``_engine/_opening.py``, the one module besides sub-workflows that sees
this one.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NoReturn

from treadle._engine._arrivals import Expiry, SpawnDone, TimerDue, apply_arrivals, inbox_arrivals
from treadle._engine._barrier import NOTHING_WRITTEN, as_saved
from treadle._engine._commit import commit_superstep
from treadle._engine._deadlines import due_deadlines, refuse_unanswerable
from treadle._engine._delivery import stalled_fan_ins
from treadle._engine._env import build_env, no_progress, saving_progress_of
from treadle._engine._errors import (
    ExecutorFailedError,
    RunTimeoutError,
    WorkflowRunError,
    infrastructure,
    outside_handlers,
)
from treadle._engine._events import (
    ExecutorFailed,
    WorkflowEvent,
    checkpoint_saved,
    status_changed,
    superstep_started,
)
from treadle._engine._inputs import TurnRolledBack, take_inputs
from treadle._engine._invocation import plan_superstep
from treadle._engine._invoke import invoke
from treadle._engine._result import RunResult, RunStatus, run_result
from treadle._engine._runner import run_superstep
from treadle._engine._slots import blank as _blank
from treadle._engine._spawn import SpawnedWork
from treadle._exceptions import TreadleError
from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._engine._arrivals import Arrival
    from treadle._engine._barrier import BarrierState
    from treadle._engine._commit import Spawn
    from treadle._engine._env import Opening, RunEnv
    from treadle._engine._inputs import InputFeed

_RUNNING = RunStatus.RUNNING  # read at every step
_no_work = SpawnedWork.__init__


class RunLoop:
    """Drives one run of a workflow, superstep by superstep."""

    __slots__ = (
        "__weakref__",
        "_progress",
        "env",
        "error",
        "point",
        "spawned",
        "status",
        "written",
    )

    def __init__(self, opening: Opening, point: BarrierState) -> None:
        """A loop at ``point`` (made by ``_engine/_opening.py``, the one door)."""
        # A run with nowhere to save has nothing to save progress to (see save_progress).
        saving = no_progress if opening.checkpointer is None else saving_progress_of(self)
        self.env: RunEnv = build_env(opening, saving)
        self.point = point
        self.status = RunStatus.RUNNING
        self.error: TreadleError | None = None
        spawned: SpawnedWork = _blank(SpawnedWork)  # see _engine/_opening.py's _fresh_point
        _no_work(spawned)
        self.spawned = spawned
        # The state keys written since the last checkpoint (tracked only when there is one).
        self.written: frozenset[str] = NOTHING_WRITTEN
        self._progress: asyncio.Lock | None = None  # made by the first save_progress

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.env.run_id

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
        env = self.env
        if not (env.options.sleep_through_timers and self.status is RunStatus.WAITING):
            return False
        wake = self.point.waits.next_wake_at()
        assert wake is not None  # noqa: S101 - WAITING means a timer is pending
        deadline = self.point.deadline_at
        await env.clock.sleep_until(min(wake, deadline or wake))
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
        env = self.env
        point = self.point
        superstep = point.superstep + 1
        try:
            waits = point.waits
            if (
                waits.suspended
                or waits.scheduled
                or env.inputs is not None  # a session taking messages while its turns run
                or (not point.pending and self.spawned)
            ):
                point = await self._gather_arrivals(superstep)
            elif point.deadline_at is not None:
                self._check_deadline(superstep)
            if not point.pending:
                # Restored and still resting: its last checkpoint says it all.
                self._set_status(self._resting_status())
                return False
            if env.trace is not None:
                env.trace.start_superstep(superstep)
            plan = plan_superstep(env, point, superstep)
            if env.listening:
                env.publish(superstep_started(env.run_id, superstep, plan.order))
            invocations = plan.invocations
            # One invocation (the common case) is its own coroutine, with no runner around it.
            await (invoke(invocations[0]) if len(invocations) == 1 else run_superstep(env, plan))
            if env.backpressure is not None:
                await env.backpressure()
            # Take the point the barrier committed, then publish what it produced.
            point, events, spawns, written = commit_superstep(env, point, plan)
            self.point = point
            if spawns or written:
                self._hold(spawns, written)
            publish = env.publish
            for event in events:  # none when nobody listens
                publish(event)
            # Dropped before the checkpoint, not kept across it for the garbage collector to walk.
            del plan, invocations, events, waits
            if not point.pending:
                point = await self._before_rest(point)
        except asyncio.CancelledError:
            await self.cancel()
            raise
        except Exception as error:  # noqa: BLE001 - raised again by _superstep_failed
            await self._superstep_failed(error, superstep)
        status = _RUNNING if point.pending else self._resting_status()
        if env.checkpointer is not None or self.spawned.queued:
            status = await self._conclude(status)
        if status is not _RUNNING:
            self._set_status(status)
        if env.trace is not None:
            env.trace.end_superstep()
        return status is _RUNNING

    def _hold(self, spawns: Sequence[Spawn], written: Sequence[str]) -> None:
        """Keep what a barrier left besides its point and events.

        Its background work is queued, to start once the point is durable;
        the keys it wrote, for the next checkpoint to store again.
        """
        if written:
            self.written = self.written.union(written)
        for record, fn, args in spawns:
            self.spawned.queue(record, fn, args)

    def admit(self, arrivals: Iterable[Arrival]) -> None:
        """Apply what arrived from outside the supersteps (see ``_engine/_arrivals.py``).

        The one door for answers, session input, timeouts, timers and
        background work: called at the top of a superstep, and by the
        opener with what a continued run was opened with.

        Raises:
            UnknownRequestError, InvalidResponseError, RequestError: a
                strict answer or session input does not fit; nothing applied.
        """
        self.point = apply_arrivals(self.env, self.point, arrivals)

    async def _gather_arrivals(self, superstep: int) -> BarrierState:
        """Timers due, background work ended, deadlines passed, session input: admitted, in order.

        Raises:
            TurnRolledBack: a session message rolls the running turn back.
            RunTimeoutError: the run passed its own deadline meanwhile.
            DurabilityError: the store could not record a timeout or read
                the inbox; nothing changed, and the run goes on from its
                last checkpoint.
        """
        env = self.env
        waits = self.point.waits
        if waits.suspended or waits.scheduled:
            self.admit([TimerDue(env.clock.now())])
        if not self.point.pending and self.spawned:
            done = await self.spawned.wait_any()
            self.admit([SpawnDone(executor_id, result) for executor_id, result in done])
        self._check_deadline(superstep)
        waits = self.point.waits
        due = due_deadlines(waits, env.clock.now()) if waits.suspended else None
        if due:
            # Unless an answer won at the store: the ledger reads the inbox in the same breath.
            arrivals: list[Arrival] = []
            if env.ledger is not None:
                requests = [(s.wait.key, s.wait.due_at) for s in due if s.wait.kind == "request"]
                read = await env.ledger.expire([(k, at) for k, at in requests if at is not None])
                arrivals = inbox_arrivals(read)
                # A request whose answer the store kept but which is not in the inbox was
                # answered on another branch of the run's history (a resume from an older
                # checkpoint): the store refuses every other answer, so it times out here.
            arrivals.append(Expiry(frozenset(s.wait.key for s in due)))
            self.admit(arrivals)
        if env.inputs is not None:
            return await self._take_inputs(env.inputs, roll_back=True)
        return self.point

    async def _before_rest(self, point: BarrierState) -> BarrierState:
        """The point a run with nothing pending goes on from, or rests at.

        A session's message queued meanwhile starts its next turn instead of
        the run resting (one rolling the turn back is left for the next
        boundary: this barrier is the turn's last, and is checkpointed). With
        no store, a run that would rest forever fails.

        Raises:
            UnanswerableWaitError: it has no store, and waits for an answer.
        """
        env = self.env
        if env.inputs is not None:
            point = await self._take_inputs(env.inputs, roll_back=False)
        if not point.pending:
            refuse_unanswerable(env, point, self.spawned)
        return point

    async def _take_inputs(self, inputs: InputFeed, *, roll_back: bool) -> BarrierState:
        """Take what the session's inbox holds that its policy lets it take now.

        A debounce burst not yet quiet is waited for here.

        Raises:
            TurnRolledBack: with ``roll_back``, a message rolls the running turn back; the feed
                holds it for the run's driver, which branches the run from
                where the turn began (``_workflow/_sessions.py``).
        """
        while True:
            items = await inputs.unapplied()
            if not items:
                return self.point
            taken = take_inputs(self.env, self.point, items, inputs.now())
            self.point = taken.point
            if taken.applied is not None or taken.ahead:
                inputs.applied(taken.applied, taken.ahead)
            if taken.rollback is not None:
                if not roll_back:
                    return self.point
                inputs.abandon(taken.rollback)
                raise TurnRolledBack(self.env.run_id)
            if taken.quiet_at is None:
                return self.point
            await inputs.wait_until(taken.quiet_at)

    def _resting_status(self) -> RunStatus:
        """Where a run with no message pending stands."""
        if self.spawned:
            return RunStatus.RUNNING  # its background work will send messages
        point = self.point
        waits = point.waits
        if waits.suspended or waits.scheduled or waits.approvals:
            return RunStatus.AWAITING_INPUT if waits.awaits_input else RunStatus.WAITING
        return RunStatus.STALLED if any(point.fan_in_buffers) else RunStatus.COMPLETED

    def _check_deadline(self, superstep: int) -> None:
        """Fail the run past its deadline.

        Raises:
            RunTimeoutError: it passed its deadline.
        """
        deadline = self.point.deadline_at
        if deadline is not None and self.env.clock.now() >= deadline:
            raise RunTimeoutError(self.env.run_id, deadline, superstep)

    async def _conclude(self, status: RunStatus) -> RunStatus:
        """Checkpoint the barrier (with its resulting status), then start queued work.

        Returns the status the run moves to: ``status``, or ``PAUSED`` when
        the commit found the run paused (see :meth:`_stop_paused`). The
        caller moves the run there afterwards, so a status is announced only
        once the barrier that led to it is durable.
        """
        env = self.env
        checkpointer = env.checkpointer
        if checkpointer is not None:
            try:
                written, self.written = self.written, NOTHING_WRITTEN
                try:
                    snapshots = env.pool.snapshots()  # executors' code
                except Exception as raised:
                    raise outside_handlers(env.run_id, self.point.superstep, raised) from raised
                barrier = self.barrier_state(status, written)
                checkpoint_id = await checkpointer.save(barrier, snapshots)
            except TreadleError as error:
                self.error = error
                self._set_status(RunStatus.FAILED, error)
                await self._record_status(RunStatus.FAILED, error)
                raise
            if checkpointer.paused:
                return await self._stop_paused(checkpoint_id, checkpointer.paused_point)
            if self.spawned.queued:
                await checkpointer.flush()  # background mode: make it durable first
            if env.listening and checkpoint_id is not None:  # None only once paused
                env.publish(checkpoint_saved(env.run_id, self.point.superstep, checkpoint_id))
        if self.spawned.queued:
            self.spawned.start_queued()
        return status

    async def _stop_paused(self, checkpoint_id: str | None, at: BarrierState | None) -> RunStatus:
        """Stop: someone paused the run, and its last commit honoured that.

        ``checkpoint_id`` is this barrier's, if its commit was the one; else
        the run paused at an earlier barrier still in flight (``at``), this
        one is not written, and the run's result is of that one: supersteps
        computed past it run again once the run goes on. The lease went with
        that commit; background work the run holds is cancelled (reported
        lost once it goes on).
        """
        env = self.env
        if checkpoint_id is None and at is not None:
            self.point = at
        elif checkpoint_id is not None and env.listening:
            env.publish(checkpoint_saved(env.run_id, self.point.superstep, checkpoint_id))
        await self.spawned.cancel_all()
        return RunStatus.PAUSED

    async def save_progress(self, *, durable: bool = False) -> str | None:
        """Checkpoint the last barrier again, with the sub-workflow runs as they stand now.

        A sub-workflow runs its own supersteps inside one invocation of this
        run; each of its barriers is made durable through here, as a
        checkpoint of this run (its history shows them), so a crash inside it
        resumes from its last barrier. Until this run's own barrier, the
        loop still holds the previous barrier's committed point: that is
        what is saved, with the in-flight part of its waits
        (:attr:`WaitBook.nested`, and the saved steps of invocations under
        way, :attr:`WaitBook.saved`) as it is now. Saves take turns.
        ``durable``: durable on return in every durability mode (a saved
        step's caller goes on to the next side effect only then). ``None``
        without a store. Invocations reach it as ``RunEnv.save_progress``.
        """
        checkpointer = self.env.checkpointer
        if checkpointer is None:
            return None
        if self._progress is None:
            self._progress = asyncio.Lock()
        async with self._progress:
            barrier = self.barrier_state(_RUNNING, self.written)
            saved = await checkpointer.save(barrier, self.env.pool.snapshots())
            if durable:
                await checkpointer.flush()
            return saved

    async def _record_status(self, status: RunStatus, error: BaseException | None = None) -> None:
        checkpointer = self.env.checkpointer
        if checkpointer is not None:
            reason = error_text(error) if error is not None else None
            await checkpointer.record_status(self.env.run_id, status.value, reason)

    async def cancel(self) -> None:
        """Mark the run ``CANCELLED`` (the caller stops driving it)."""
        await self.spawned.cancel_all()
        if self.status is RunStatus.RUNNING:
            self._set_status(RunStatus.CANCELLED)
            await self._record_status(RunStatus.CANCELLED)
        elif self.env.trace is not None:
            self.env.trace.end(RunStatus.CANCELLED)  # cancelled asleep on a timer (no-op if ended)

    async def _superstep_failed(self, error: Exception, superstep: int) -> NoReturn:
        """Fail the run on the record and raise, unless ``error`` is the store's or a lease's.

        Code outside every handler failing is raised as ``outside_handlers`` says.
        """
        if not isinstance(error, TreadleError) and not infrastructure(error):
            failure = outside_handlers(self.env.run_id, superstep, error)
            await self._fail(failure, superstep)
            raise failure from error
        if isinstance(error, WorkflowRunError):
            await self._fail(error, superstep)
        raise error

    async def _fail(self, error: WorkflowRunError, superstep: int) -> None:
        env = self.env
        if env.listening and not env.live and isinstance(error, ExecutorFailedError):
            for event in error.events:  # earlier attempts' events, in the order raised
                env.publish(event)
            env.publish(
                ExecutorFailed(
                    run_id=env.run_id,
                    superstep=superstep,
                    executor_id=error.executor_id,
                    error=error.error,
                    attempt=error.attempt,
                )
            )
        self.error = error
        self._set_status(RunStatus.FAILED, error, superstep)
        error.result = self.result()
        await self.spawned.cancel_all()
        await self._record_status(RunStatus.FAILED, error)

    def _set_status(
        self, status: RunStatus, error: BaseException | None = None, superstep: int | None = None
    ) -> None:
        """Move to ``status``, announced at ``superstep`` (a failure's; else the last committed)."""
        self.status = status
        env = self.env
        # A run that sleeps through its timers goes on (``run_to_end``): its span stays open.
        if (
            env.trace is not None
            and status.is_stopped
            and not (status is RunStatus.WAITING and env.options.sleep_through_timers)
        ):
            env.trace.end(status, error)
        if env.listening:
            at = self.point.superstep if superstep is None else superstep
            env.publish(status_changed(env.run_id, at, status, error))

    # -- views ----------------------------------------------------------------------
    def barrier_state(
        self, status: RunStatus | None = None, written: frozenset[str] | None = None
    ) -> BarrierState:
        """The last committed point of the run, as a checkpoint holds it (``written``: if known).

        Its waits are a copy (invocations under way write their in-flight
        part), and it names the background work in flight.
        """
        point = self.point
        spawned = tuple(self.spawned.records())
        return as_saved(point, status or self.status, point.waits.copy(), spawned, written)

    def result(self, events: list[WorkflowEvent] | None = None) -> RunResult:
        """The run as of its last barrier."""
        env, point = self.env, self.point
        stalled = []
        if self.status is RunStatus.STALLED:
            stalled = stalled_fan_ins(env.fan_in_edges, point.fan_in_buffers, env.ranks)
        waits = point.waits
        checkpointer = env.checkpointer
        outcome = point.outcome
        # Every field in order, made the cheap way (see run_result): every run ends here.
        return run_result(
            env.run_id,
            self.status,
            list(point.outputs),
            dict(point.state),
            point.superstep,
            events if events is not None else [],
            stalled,
            waits.pending_requests() if waits else [],
            waits.next_wake_at() if waits else None,
            checkpointer.last_checkpoint_id if checkpointer is not None else None,
            self.error,
            outcome[0] if outcome else None,
            outcome[1] if outcome else None,
        )
