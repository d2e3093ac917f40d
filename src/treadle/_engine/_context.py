"""The context a handler receives: everything it may do during one invocation.

One context exists per invocation (one message handled by one executor).
Messages, outputs and state writes are buffered on it and only become
visible at the barrier, all together or not at all: the runner takes them
as one :class:`InvocationOutcome` (:meth:`WorkflowContext.outcome`). Events
are published the moment they are raised (or kept for the canonical batch in
lockstep mode).

A plain ``def`` handler runs in a worker thread with its context: what it
raises there is handed to the loop's thread (``call_soon_threadsafe``), and
once the runner has abandoned the thread (its timeout passed, or the run was
cancelled) whatever it still raises is dropped there, on the loop's thread,
so nothing it does late can reach the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from threading import get_ident
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from treadle._engine._context_waits import DurableWaits
from treadle._engine._delivery import HandoffContext, Outgoing
from treadle._engine._ended import ENDED_OUTBOX, ended_error
from treadle._engine._events import CustomEvent, ProgressEvent, WorkflowEvent
from treadle._engine._invocation import InvocationOutcome, LaterWork
from treadle._engine._outcomes import checked_outcome
from treadle._engine._slots import blank as _blank
from treadle._engine._spawn import SpawnRecord, SpawnResult
from treadle._engine._state import SharedState
from treadle._engine._waits import Suspension, Wait
from treadle._graph._executor import Executor

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._engine._env import RunEnv
    from treadle._engine._invocation import Invocation
    from treadle._engine._journal import Journal
    from treadle._engine._limiter import Slot
    from treadle._engine._metrics import Metrics
    from treadle._engine._waits import NestedRun
    from treadle._graph._edges import Edge

SendT = TypeVar("SendT")
ResponseT = TypeVar("ResponseT")


class WorkflowContext(DurableWaits, Generic[SendT]):
    """What a handler may do; parameterize it with the types it sends.

    ``WorkflowContext[Report]`` tells the builder this handler sends
    ``Report`` messages, which lets it check edges at build time;
    ``WorkflowContext[Never]`` declares that it sends nothing.
    """

    __slots__ = (
        "_abandoned",
        "_env",
        "_events",
        "_held",
        "_invocation",
        "_later",
        "_loop",
        "_loop_thread",
        "_outbox",
        "_outputs",
        "_state",
        "executor_id",
    )

    def __init__(
        self, invocation: Invocation, events: list[WorkflowEvent] | tuple[WorkflowEvent, ...]
    ) -> None:
        """One attempt of ``invocation``, given the events kept for its batch so far.

        A list is shared by all the attempts and kept in as they go; a tuple
        is copied to a list of this attempt's own when it first keeps one
        (most never do: a tuple costs the collector nothing, a list does).
        """
        self._invocation = invocation
        self._env = invocation.env
        self.executor_id = invocation.executor.id
        # What it sends: a tuple while it holds one send at most, then a list (see
        # _sends); the collector counts a list, not a small tuple.
        self._outbox: list[Outgoing] | tuple[Outgoing, ...] = ()
        self._events = events
        # Made on first use (see _recorded and state): most invocations need none of them.
        self._journal: Journal | None = None
        self._outputs: list[Any] | tuple[()] | None = None  # () once the invocation ended
        self._later: LaterWork | None = None
        self._state: SharedState | None = None
        # The loop a worker thread hands events to; _loop_thread and _abandoned
        # are set with it, by hand_to_thread, for the few handlers that need them.
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- identity ---------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The id of the run this invocation belongs to."""
        return self._env.run_id

    @property
    def handoff_context(self) -> HandoffContext | None:
        """Who handed control to this executor, and why, if the message is a handoff."""
        return self._invocation.envelope.handoff

    @property
    def superstep(self) -> int:
        """The superstep this invocation runs in."""
        return self._invocation.superstep

    @property
    def rank(self) -> int:
        """The executor's rank: its position in the workflow's definition."""
        return self._invocation.rank

    @property
    def position(self) -> int:
        """The message's position in the executor's inbox for this superstep."""
        return self._invocation.position

    @property
    def stamp(self) -> tuple[int, int, int, int]:
        """The stamp of the message being handled: the same each time it is re-delivered."""
        return self._invocation.envelope.stamp

    @property
    def listening(self) -> bool:
        """Whether anybody listens to the run's events (build costly ones only then)."""
        return self._env.listening

    @property
    def metrics(self) -> Metrics | None:
        """Where the run reports what it counts (``None``: nowhere), for executors counting more."""
        return self._env.options.metrics

    def has_edges(self) -> bool:
        """Whether this executor has edges to send along (else what it makes is an output)."""
        return self._env.router.has_edges_from(self.executor_id)

    def is_reduced(self, key: str) -> bool:
        """Whether state ``key`` was declared with a reducer (a ``set`` then adds to it)."""
        spec = self._env.state_specs.get(key)
        return spec is not None and spec.reducer is not None

    def graph_edges(self) -> tuple[Edge, ...]:
        """The workflow's edges, as built (for an executor that looks at its neighbours)."""
        return tuple(self._env.workflow.edges)

    def prototype(self, executor_id: str) -> Executor:
        """The definition of executor ``executor_id`` of this workflow (not a run's instance)."""
        return self._env.workflow.prototype(executor_id)

    # -- for the runtime's own executors (sub-workflows) --------------------------------
    @property
    def run_env(self) -> RunEnv:
        """The environment of the run this invocation belongs to (never its loop)."""
        return self._env

    @property
    def nested_runs(self) -> dict[str, NestedRun]:
        """The sub-workflow runs of the run's invocations under way, by invocation key.

        The in-flight part of the run's waits: written here between barriers,
        saved with the last barrier by ``RunEnv.save_progress``.
        """
        return self._invocation.point.waits.nested

    @property
    def deadline_at(self) -> float | None:
        """When the run fails for passing its deadline (``None``: it has none)."""
        return self._invocation.point.deadline_at

    @property
    def idempotency_key(self) -> str:
        """Stable across retries and re-executions of this same invocation.

        Pass it to external APIs that deduplicate requests, so a side effect
        made by an invocation that is re-run (after a retry, a crash, or a
        durable wait) happens once. It is derived from the message being
        handled, which keeps its stamp when re-delivered, and its branch.
        """
        stamp = ".".join(map(str, self._invocation.envelope.stamp))
        key = f"{self._env.run_id}:{self.executor_id}:{stamp}"
        return f"{key}~{self._env.branch}" if self._env.branch else key

    def _later_work(self) -> LaterWork:
        if self._later is None:
            self._later = LaterWork()
        return self._later

    # -- the outcome ------------------------------------------------------------------
    def outcome(self, *closing: WorkflowEvent) -> InvocationOutcome:
        """What this invocation hands to the barrier, its handler having returned.

        ``closing`` are events to keep after all the others (its
        ``ExecutorCompleted``, when the runner has not kept it already).
        """
        state = self._state
        events = self._events
        # Built slot by slot: calling a class with a Python ``__init__`` goes the
        # slow way, and every invocation that returns comes here.
        outcome: Any = _blank(InvocationOutcome)
        outcome.sent = self._outbox
        outcome.writes = state.ops if state is not None else ()
        outcome.outputs = self._outputs or ()
        outcome.events = (*events, *closing) if closing else events
        outcome.later = self._later
        outcome.suspension = None
        done: InvocationOutcome = outcome
        # Closed from here on: what is left behind is told so (see _engine/_ended.py).
        self._outbox = ENDED_OUTBOX
        self._outputs = ()
        if state is not None:
            state.close(self.executor_id)
        return done

    def kept_events(self) -> list[WorkflowEvent]:
        """The events kept for the batch so far, as the list that keeps any more."""
        events = self._events
        if type(events) is not list:
            events = self._events = list(events)
        return events

    def suspended_at(self, wait: Wait) -> InvocationOutcome:
        """The outcome of an invocation that reached ``wait``: its suspension, nothing else.

        What it sent, wrote or output is discarded; the suspension keeps the
        message and the journal it re-executes with once the wait is satisfied.
        """
        journal = self._recorded()
        entries = journal.entries if journal is not None else []
        suspension = Suspension(self.executor_id, self._invocation.envelope, entries, wait)
        return InvocationOutcome((), (), (), self._events, None, suspension)

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
        if target is not None and isinstance(target, Executor):
            target = target.id
        deliveries = self._env.router.route(self.executor_id, message, target)
        if len(deliveries) == 1 and not self._outbox:  # the common case: one send so far
            [(delivered, fan_in)] = deliveries
            self._outbox = ((delivered, fan_in, message, None),)
            return
        outbox = self._sends()
        for delivered, fan_in in deliveries:
            outbox.append((delivered, fan_in, message, None))

    def _sends(self) -> list[Outgoing]:
        """The outbox, as the list that takes any more sends."""
        outbox = self._outbox
        if outbox is ENDED_OUTBOX:
            raise ended_error(self.executor_id, "send a message")
        if type(outbox) is not list:
            outbox = self._outbox = list(outbox)
        return outbox

    def yield_output(self, value: Any) -> None:
        """Add ``value`` to the run's outputs when this superstep commits."""
        outputs = self._outputs
        if outputs is None:
            self._outputs = [value]
        elif type(outputs) is list:
            outputs.append(value)
        else:  # () once the invocation ended (see outcome)
            raise ended_error(self.executor_id, "yield an output")

    def set_outcome(self, name: str, summary: str | None = None) -> None:
        """Say how the run ended for the business: ``"approved"``, ``"rejected"``, ...

        Shown beside the run's status in every list (``treadle runs``, the
        API, the page) and filtered on (``list_runs(outcome=)``), so a
        rejected expense does not read as a bare "completed". Committed with
        this superstep, like a state write: an invocation that fails or
        suspends sets nothing. A later superstep may set another; two
        executors setting different ones in one superstep is an
        ``OutcomeConflictError``.

        Args:
            name: A short word: a letter, then letters, digits, ``_``, ``-``
                or ``.``; at most 64 characters.
            summary: One line saying why, at most 200 characters.

        Raises:
            ValueError, TypeError: ``name`` or ``summary`` is not as above
                (the message names this executor).
        """
        self._later_work().outcome = checked_outcome(self.executor_id, name, summary)

    def handoff(self, target: str | Executor, payload: Any, reason: str | None = None) -> None:
        """Hand control to ``target``, which receives ``payload`` next superstep.

        The receiving handler finds who handed off, and ``reason``, in its
        ``ctx.handoff_context``. Handoffs must be declared with
        ``WorkflowBuilder.add_handoff``.
        """
        target_id = target.id if isinstance(target, Executor) else target
        router = self._env.router
        delivered, fan_in = router.handoff(self.executor_id, target_id, payload)
        handoff = HandoffContext(self.executor_id, reason)
        if router.needs_approval(self.executor_id, delivered):
            self._later_work().approvals.append((delivered, payload, handoff))
        else:
            self._sends().append((delivered, fan_in, payload, handoff))

    # -- state ----------------------------------------------------------------------
    @property
    def state(self) -> SharedState:
        """Shared state: committed values plus this executor's own writes."""
        state = self._state
        if state is None:
            invocation = self._invocation
            state = self._state = SharedState(
                invocation.point.state, self._env.state_specs, invocation.earlier
            )
        return state

    def now(self) -> float:
        """The run's clock, in epoch seconds (a ``FakeClock`` under test).

        Read time through this rather than ``time.time()`` so that tests of
        time-dependent handlers stay exact; inside a handler that suspends,
        record it with ``ctx.step("now", ctx.now)`` if re-executions must see
        the same value.
        """
        return self._env.clock.now()

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
        prototype = self._env.workflow.prototype(self.executor_id)
        if prototype.find_handler(SpawnResult) is None:
            msg = (
                f"executor {self.executor_id!r} spawns work but has no handler for SpawnResult, "
                f"where its outcome is delivered"
            )
            raise TypeError(msg)
        label: str = name or getattr(fn, "__name__", None) or "work"
        if not (
            inspect.iscoroutinefunction(fn)
            or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
        ):
            msg = (
                f"ctx.spawn({label}): takes an async function (its awaitable runs as the "
                f"run's background work), got {fn!r}; wrap blocking work as "
                f"'async def f(): return await asyncio.to_thread(...)'"
            )
            raise TypeError(msg)
        stamp = ".".join(map(str, self._invocation.envelope.stamp))
        spawns = self._later_work().spawns
        key = f"{self.executor_id}:{stamp}:{len(spawns)}"
        spawns.append((SpawnRecord(key, self.executor_id, label), fn, args))
        return key

    # -- call limits ------------------------------------------------------------------
    def report_tokens(self, used: int) -> None:
        """Count this call as having used ``used`` tokens, in its limits' token budgets.

        A call under a limit with ``tokens=`` reserved its ``estimate`` when it
        started; what it reports here is counted instead, so the budget
        follows what the model really used. An agent step reports its
        model's usage itself. Without a token budget this does nothing.
        """
        held: list[Slot] = getattr(self, "_held", None) or []  # set only under limits
        limiting = self._env.limiting
        if not held or limiting is None:
            return
        for slot in held:
            if slot.request.limit.tokens is not None:
                limiting.gate.settle(slot, float(used))

    def hold_slots(self, slots: list[Slot]) -> None:
        """Keep the attempt's slots, for :meth:`report_tokens` (``_engine/_handler_call.py``)."""
        self._held = slots

    # -- events -----------------------------------------------------------------------
    def add_event(self, data: Any) -> None:
        """Publish ``data`` to whoever streams the run, as a ``CustomEvent``."""
        if self._env.listening:
            self.announce(CustomEvent, data=data)

    def report_progress(
        self, current: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Publish a ``ProgressEvent`` (``current`` out of ``total``)."""
        if self._env.listening:
            self.announce(ProgressEvent, current=current, total=total, message=message)

    def announce(self, kind: type[WorkflowEvent], **fields: Any) -> None:
        """Emit an event of ``kind`` about this invocation (run, superstep, executor filled in)."""
        self.emit(
            kind(
                run_id=self._env.run_id,
                superstep=self.superstep,
                executor_id=self.executor_id,
                **fields,
            )
        )

    def emit(self, event: WorkflowEvent) -> None:
        """Route an event to the live stream or to this invocation's batch.

        An ephemeral or ``before_barrier`` event (a token delta, progress) of
        a stored run also goes to its checkpointer's ``relay`` at once: its
        followers in any process see it before the barrier.
        """
        loop = self._loop
        if loop is not None and get_ident() != self._loop_thread:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to tell
                loop.call_soon_threadsafe(self._emit_from_thread, event)
            return
        self._route(event)

    def _emit_from_thread(self, event: WorkflowEvent) -> None:
        """An event a worker thread raised, now on the loop's thread: kept unless abandoned."""
        if not self._abandoned:
            self._route(event)

    def _route(self, event: WorkflowEvent) -> None:
        """:meth:`emit` on the loop's thread: relayed, published live, or kept to the barrier."""
        env = self._env
        durable = env.checkpointer
        if durable is not None and (type(event).ephemeral or type(event).before_barrier):
            durable.relay(event)
        if env.live:
            env.publish(event)
            return
        if event.at is None:  # kept to the barrier: when it was raised, for the run's log
            event.at = env.clock.now()
        self.kept_events().append(event)

    # -- for the runner -------------------------------------------------------------
    @property
    def threaded(self) -> bool:
        """Whether the handler runs in a worker thread (see :meth:`hand_to_thread`)."""
        return self._loop is not None

    @property
    def abandoned(self) -> bool:
        """Whether the runner has stopped waiting for that thread (see :meth:`abandon`)."""
        return self._loop is not None and self._abandoned

    def hand_to_thread(self) -> None:
        """Note, on the loop's thread, that the handler is about to run in a worker thread.

        What it raises there is then handed to the loop's thread rather than
        recorded where it stands.
        """
        self._loop_thread = get_ident()
        self._abandoned = False
        self._loop = asyncio.get_running_loop()

    def abandon(self) -> None:
        """Stop listening to the worker thread: whatever it raises from now on is dropped.

        Called on the loop's thread once the runner stops waiting for it (its
        timeout passed, or the run was cancelled); the thread runs on, and
        the rest of what it does lands in this discarded context.
        """
        self._abandoned = True


_begin = WorkflowContext.__init__


def new_context(
    invocation: Invocation, events: list[WorkflowEvent] | tuple[WorkflowEvent, ...]
) -> WorkflowContext[object]:
    """``WorkflowContext(invocation, events)``, the way the runner makes one for each attempt.

    Made blank and then given its ``__init__`` as a plain function: calling
    the class would go the slow way a class with a Python ``__init__`` is
    called, and every invocation makes one.
    """
    ctx: WorkflowContext[object] = _blank(WorkflowContext)
    _begin(ctx, invocation, events)
    return ctx
