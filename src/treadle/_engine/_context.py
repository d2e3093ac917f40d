"""The context a handler receives: everything it may do during one invocation.

One context exists per invocation (one message handled by one executor).
Messages, outputs and state writes are buffered on it and only become
visible at the barrier, all together or not at all. Events are published the
moment they are raised (or kept for the canonical batch in lockstep mode).
"""

from __future__ import annotations

import datetime as dt
import inspect
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from treadle._engine._delivery import Envelope, HandoffContext, Outgoing
from treadle._engine._events import CustomEvent, ProgressEvent, WorkflowEvent
from treadle._engine._spawn import SpawnRecord, SpawnResult
from treadle._engine._state import Op, SharedState
from treadle._engine._waits import JournalEntry, Suspend, Suspension, Wait, WaitKind, wait_key
from treadle._exceptions import JournalMismatchError, PollTimeout, RoutingError
from treadle._graph._executor import Executor
from treadle._graph._policies import ExponentialBackoff

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._engine._loop import RunLoop

SendT = TypeVar("SendT")
ResponseT = TypeVar("ResponseT")


def _epoch(when: dt.datetime | float) -> float:
    if isinstance(when, dt.datetime):
        if when.tzinfo is None:
            msg = f"{when!r} has no time zone: give an aware datetime (or epoch seconds)"
            raise ValueError(msg)
        return when.timestamp()
    return float(when)


class LaterWork:
    """What an invocation leaves for after its barrier; made only if it leaves any.

    ``scheduled``: (due, target, payload) from ``schedule_message``;
    ``approvals``: (target, payload, handoff) handoffs awaiting approval;
    ``spawns``: (record, function, arguments) background work to start.
    """

    __slots__ = ("approvals", "scheduled", "spawns")

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, str, Any]] = []
        self.approvals: list[tuple[str, Any, HandoffContext]] = []
        self.spawns: list[tuple[SpawnRecord, Callable[..., Awaitable[Any]], tuple[Any, ...]]] = []


class WorkflowContext(Generic[SendT]):
    """What a handler may do; parameterize it with the types it sends.

    ``WorkflowContext[Report]`` tells the builder this handler sends
    ``Report`` messages, which lets it check edges at build time;
    ``WorkflowContext[Never]`` declares that it sends nothing.
    """

    __slots__ = (
        "_cursor",
        "_earlier",
        "_events",
        "_journal",
        "_later",
        "_outbox",
        "_outputs",
        "_run",
        "_stamp",
        "_state",
        "executor_id",
        "handoff_context",
        "position",
        "rank",
        "superstep",
        "suspension",
        "threaded",
    )

    def __init__(
        self,
        run: RunLoop,
        executor_id: str,
        rank: int,
        position: int,
        superstep: int,
        envelope: Envelope,
        earlier: Sequence[Sequence[Op]],
        events: list[WorkflowEvent],
    ) -> None:
        self._run = run
        self.executor_id = executor_id
        self.rank = rank
        self.position = position
        self.superstep = superstep
        self.handoff_context: HandoffContext | None = envelope.handoff
        self._stamp = envelope.stamp
        # Made on first use, like _later and _outputs: most invocations need none of them.
        self._journal: list[JournalEntry] | None = (
            list(envelope.journal) if envelope.journal else None
        )
        self._cursor = 0
        self._earlier = earlier
        self._outbox: list[Outgoing] = []
        self._outputs: list[Any] | None = None
        self._events = events  # shared by a retried invocation's attempts
        self._later: LaterWork | None = None
        self._state: SharedState | None = None
        self.suspension: Suspension | None = None
        self.threaded = False

    # -- identity ---------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The id of the run this invocation belongs to."""
        return self._run.run_id

    @property
    def idempotency_key(self) -> str:
        """Stable across retries and re-executions of this same invocation.

        Pass it to external APIs that deduplicate requests, so a side effect
        made by an invocation that is re-run (after a retry, a crash, or a
        durable wait) happens once. It is derived from the message being
        handled, which keeps its stamp when re-delivered.
        """
        stamp = ".".join(map(str, self._stamp))
        return f"{self._run.run_id}:{self.executor_id}:{stamp}"

    def _later_work(self) -> LaterWork:
        if self._later is None:
            self._later = LaterWork()
        return self._later

    # -- messages and outputs -----------------------------------------------------
    def send_message(self, message: SendT, target: str | Executor | None = None) -> None:
        """Send ``message`` along this executor's edges, for the next superstep.

        Args:
            message: The message; its class selects the edges it travels.
            target: Deliver only to this neighbour (an id or the executor),
                bypassing edge conditions, selectors and switch cases.

        Raises:
            RoutingError: No edge from this executor can carry the message.
        """
        target_id = target.id if isinstance(target, Executor) else target
        outbox = self._outbox
        for target_id_, fan_in in self._run.router.route(self.executor_id, message, target_id):
            outbox.append((target_id_, fan_in, message, None))

    def yield_output(self, value: Any) -> None:
        """Add ``value`` to the run's outputs when this superstep commits."""
        if self._outputs is None:
            self._outputs = [value]
        else:
            self._outputs.append(value)

    def handoff(self, target: str | Executor, payload: Any, reason: str | None = None) -> None:
        """Hand control to ``target``, which receives ``payload`` next superstep.

        The receiving handler finds who handed off, and ``reason``, in its
        ``ctx.handoff_context``. Handoffs must be declared with
        ``WorkflowBuilder.add_handoff``.
        """
        target_id = target.id if isinstance(target, Executor) else target
        router = self._run.router
        delivered, fan_in = router.handoff(self.executor_id, target_id, payload)
        handoff = HandoffContext(self.executor_id, reason)
        if router.needs_approval(self.executor_id, delivered):
            self._later_work().approvals.append((delivered, payload, handoff))
        else:
            self._outbox.append((delivered, fan_in, payload, handoff))

    # -- state ----------------------------------------------------------------------
    @property
    def state(self) -> SharedState:
        """Shared state: committed values plus this executor's own writes."""
        state = self._state
        if state is None:
            run = self._run
            state = self._state = SharedState(run.state, run.state_specs, self._earlier)
        return state

    def now(self) -> float:
        """The run's clock, in epoch seconds (a ``FakeClock`` under test).

        Read time through this rather than ``time.time()`` so that tests of
        time-dependent handlers stay exact; inside a handler that suspends,
        record it with ``ctx.step("now", ctx.now)`` if re-executions must see
        the same value.
        """
        return self._run.clock.now()

    # -- durable steps and waits ----------------------------------------------------------
    def _replayed(self, kind: str, name: str) -> tuple[bool, Any]:
        """The recorded result of the next journal entry, if re-executing."""
        journal = self._journal
        if journal is not None and self._cursor < len(journal):
            recorded_kind, recorded_name, value = journal[self._cursor]
            if (recorded_kind, recorded_name) != (kind, name):
                raise JournalMismatchError(
                    self.executor_id,
                    self._cursor,
                    f"{recorded_kind} {recorded_name!r}",
                    f"{kind} {name!r}",
                )
            self._cursor += 1
            return True, value
        return False, None

    @property
    def replaying(self) -> bool:
        """Whether the handler is re-executing recorded steps after a wait."""
        return self._journal is not None and self._cursor < len(self._journal)

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` once per invocation, however often it re-executes.

        The result is recorded in the invocation's journal (it must be
        serializable); when the handler re-executes after a durable wait,
        the recorded result is returned and ``fn`` is not called again — so
        an external job submitted in a step is submitted once.

        Raises:
            JournalMismatchError: re-executing, the handler reached a step
                other than the one recorded at this point.
        """
        replayed, value = self._replayed("step", name)
        if replayed:
            return value
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
        if self._journal is None:
            self._journal = []
        self._journal.append(("step", name, value))
        self._cursor += 1
        return value

    def _wait(self, kind: WaitKind, **fields: Any) -> Any:
        key = wait_key(kind, self._run.run_id, self.executor_id, self._stamp, self._cursor)
        replayed, value = self._replayed("wait", key)
        if replayed:
            return value
        raise Suspend(Wait(kind, key, **fields))

    async def request(self, payload: Any, response_type: type[ResponseT]) -> ResponseT:
        """Ask a human (or any outside party) and wait durably for the answer.

        The run surfaces a ``RequestEvent`` and a ``PendingRequest``, and
        rests as ``AWAITING_INPUT`` — for as long as it takes, across
        restarts. ``Workflow.respond(run_id, {request_id: answer})`` checks
        the answer against ``response_type`` and resumes the handler, which
        re-executes from the top; this call then returns the answer.
        """
        name = self._run.workflow.response_type_name(response_type)
        answer: ResponseT = self._wait("request", payload=payload, response_type=name)
        return answer

    async def wait_for_input(self) -> Any:
        """Wait durably for the next message of a session.

        The run rests as ``AWAITING_INPUT`` until
        ``Workflow.send_message(run_id, message)``; this call then returns it.
        """
        return self._wait("input")

    async def sleep(self, delay: dt.timedelta | float) -> None:
        """Wait durably for ``delay`` (a ``timedelta`` or seconds).

        The invocation suspends; the run rests as ``WAITING`` (its result
        says when it wakes) and may be resumed by another process.
        """
        seconds = delay.total_seconds() if isinstance(delay, dt.timedelta) else float(delay)
        if self.replaying:
            self._wait("timer")  # returns the recorded wake-up, computes no new time
            return
        self._wait("timer", due_at=self._run.clock.now() + max(seconds, 0.0))

    async def sleep_until(self, when: dt.datetime | float) -> None:
        """Wait durably until ``when`` (an aware ``datetime`` or epoch seconds)."""
        self._wait("timer", due_at=_epoch(when))

    async def poll_until_complete(
        self,
        check: Callable[[], Any],
        is_complete: Callable[[Any], bool],
        *,
        backoff: ExponentialBackoff | None = None,
        max_duration: dt.timedelta | float | None = None,
    ) -> Any:
        """Poll an external job until ``is_complete(check())``, durably.

        Each poll is a journaled step and each pause a durable timer, so the
        run is checkpointed between polls, holds no thread while waiting,
        and survives restarts; a progress event is raised per poll.

        Raises:
            PollTimeout: the job was still incomplete after ``max_duration``.
        """
        backoff = backoff or ExponentialBackoff(initial=1.0, maximum=60.0)
        limit = (
            max_duration.total_seconds() if isinstance(max_duration, dt.timedelta) else max_duration
        )
        started = await self.step("poll:started", self._run.clock.now)
        attempt = 0
        while True:
            attempt += 1
            fresh = not self.replaying
            result = await self.step(f"poll:{attempt}", check)
            if fresh:
                self.report_progress(attempt, None, f"poll {attempt}")
            if is_complete(result):
                return result
            expired = await self.step(
                f"poll:{attempt}:expired",
                lambda: limit is not None and self._run.clock.now() - started >= limit,
            )
            if expired:
                msg = f"executor {self.executor_id!r}: job incomplete after {attempt} polls"
                raise PollTimeout(msg)
            await self.sleep(backoff.delay(attempt))

    def schedule_message(
        self,
        message: Any,
        *,
        after: dt.timedelta | float | None = None,
        at: dt.datetime | float | None = None,
        target: str | Executor | None = None,
    ) -> None:
        """Send ``message`` later: a durable timer that does not suspend the sender.

        Routed like ``send_message`` (now, so routing errors surface here),
        delivered in the first superstep after it falls due.
        """
        if (after is None) == (at is None):
            msg = "schedule_message takes exactly one of after= or at="
            raise TypeError(msg)
        if after is not None:
            seconds = after.total_seconds() if isinstance(after, dt.timedelta) else float(after)
            due = self._run.clock.now() + seconds
        else:
            assert at is not None  # noqa: S101 - an invariant, narrows the type for mypy
            due = _epoch(at)
        target_id = target.id if isinstance(target, Executor) else target
        for delivered, fan_in in self._run.router.route(self.executor_id, message, target_id):
            if fan_in >= 0:
                msg = f"executor {self.executor_id!r}: a scheduled message cannot feed a fan-in"
                raise RoutingError(msg)
            self._later_work().scheduled.append((due, delivered, message))

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> str:
        """Start ``fn(*args)`` as background work owned by the run; return its key.

        It starts once the barrier that commits this invocation is durable
        (nothing starts if the invocation fails or suspends, and a superstep
        re-run after a crash never started it before); the run does not
        complete while it is pending; its outcome arrives at this executor
        as a ``SpawnResult`` message, which the executor must have a handler
        for. If the process dies first, a resumed run delivers
        ``SpawnResult(lost=True)`` instead.
        """
        prototype = self._run.workflow.prototype(self.executor_id)
        if prototype.find_handler(SpawnResult) is None:
            msg = (
                f"executor {self.executor_id!r} spawns work but has no handler for SpawnResult, "
                f"where its outcome is delivered"
            )
            raise TypeError(msg)
        label: str = name or getattr(fn, "__name__", None) or "work"
        stamp = ".".join(map(str, self._stamp))
        spawns = self._later_work().spawns
        key = f"{self.executor_id}:{stamp}:{len(spawns)}"
        spawns.append((SpawnRecord(key, self.executor_id, label), fn, args))
        return key

    # -- events -----------------------------------------------------------------------
    def add_event(self, data: Any) -> None:
        """Publish ``data`` to whoever streams the run, as a ``CustomEvent``."""
        if self._run.listening:
            self.announce(CustomEvent, data=data)

    def report_progress(
        self, current: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Publish a ``ProgressEvent`` (``current`` out of ``total``)."""
        if self._run.listening:
            self.announce(ProgressEvent, current=current, total=total, message=message)

    def announce(self, kind: type[WorkflowEvent], **fields: Any) -> None:
        """Emit an event of ``kind`` about this invocation (run, superstep, executor filled in)."""
        self.emit(
            kind(
                run_id=self._run.run_id,
                superstep=self.superstep,
                executor_id=self.executor_id,
                **fields,
            )
        )

    def emit(self, event: WorkflowEvent) -> None:
        """Route an event to the live stream or to this invocation's batch."""
        run = self._run
        if run.live:
            run.publish_live(event, from_thread=self.threaded)
        else:
            self._events.append(event)
