"""The context a handler receives: everything it may do during one invocation.

One context exists per invocation (one message handled by one executor).
Messages, outputs and state writes are buffered on it and only become
visible at the barrier, all together or not at all. Events are published the
moment they are raised (or kept for the canonical batch in lockstep mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from treadle._graph._executor import Executor
from treadle._runtime._delivery import HandoffContext, Outgoing
from treadle._runtime._events import CustomEvent, ProgressEvent, WorkflowEvent
from treadle._runtime._state import Op, SharedState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._runtime._loop import RunLoop

SendT = TypeVar("SendT")


class WorkflowContext(Generic[SendT]):
    """What a handler may do; parameterize it with the types it sends.

    ``WorkflowContext[Report]`` tells the builder this handler sends
    ``Report`` messages, which lets it check edges at build time;
    ``WorkflowContext[Never]`` declares that it sends nothing.
    """

    __slots__ = (
        "_earlier",
        "_events",
        "_outbox",
        "_outputs",
        "_run",
        "_state",
        "executor_id",
        "handoff_context",
        "position",
        "rank",
        "superstep",
        "threaded",
    )

    def __init__(
        self,
        run: RunLoop,
        executor_id: str,
        rank: int,
        position: int,
        superstep: int,
        handoff: HandoffContext | None,
        earlier: Sequence[Sequence[Op]],
    ) -> None:
        self._run = run
        self.executor_id = executor_id
        self.rank = rank
        self.position = position
        self.superstep = superstep
        self.handoff_context: HandoffContext | None = handoff
        self._earlier = earlier
        self._outbox: list[Outgoing] = []
        self._outputs: list[Any] = []
        self._events: list[WorkflowEvent] = []
        self._state: SharedState | None = None
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
        made by an invocation that is re-run happens once.
        """
        return f"{self._run.run_id}:{self.superstep}:{self.executor_id}:{self.position}"

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
        self._outputs.append(value)

    def handoff(self, target: str | Executor, payload: Any, reason: str | None = None) -> None:
        """Hand control to ``target``, which receives ``payload`` next superstep.

        The receiving handler finds who handed off, and ``reason``, in its
        ``ctx.handoff_context``. Handoffs must be declared with
        ``WorkflowBuilder.add_handoff``.
        """
        target_id = target.id if isinstance(target, Executor) else target
        delivered, fan_in = self._run.router.handoff(self.executor_id, target_id, payload)
        self._outbox.append((delivered, fan_in, payload, HandoffContext(self.executor_id, reason)))

    # -- state ----------------------------------------------------------------------
    @property
    def state(self) -> SharedState:
        """Shared state: committed values plus this executor's own writes."""
        state = self._state
        if state is None:
            run = self._run
            state = self._state = SharedState(run.state, run.state_specs, self._earlier)
        return state

    @property
    def state_ops(self) -> list[Op]:
        """The writes this invocation buffered (empty if it never wrote)."""
        return self._state.ops if self._state is not None else []

    # -- events -----------------------------------------------------------------------
    def add_event(self, data: Any) -> None:
        """Publish ``data`` to whoever streams the run, as a ``CustomEvent``."""
        if self._run.listening:
            self.emit(
                CustomEvent(
                    run_id=self._run.run_id,
                    superstep=self.superstep,
                    executor_id=self.executor_id,
                    data=data,
                )
            )

    def report_progress(
        self, current: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Publish a ``ProgressEvent`` (``current`` out of ``total``)."""
        if self._run.listening:
            self.emit(
                ProgressEvent(
                    run_id=self._run.run_id,
                    superstep=self.superstep,
                    executor_id=self.executor_id,
                    current=current,
                    total=total,
                    message=message,
                )
            )

    def emit(self, event: WorkflowEvent) -> None:
        """Route an event to the live stream or to this invocation's batch."""
        run = self._run
        if run.live:
            run.publish_live(event, from_thread=self.threaded)
        else:
            self._events.append(event)
