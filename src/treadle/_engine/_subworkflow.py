"""Sub-workflows: a built workflow run as one executor of another.

A :class:`SubWorkflow` is an executor whose one handler runs a whole
workflow on the message it receives: its own supersteps, inside one
invocation of the parent. What it outputs becomes what that invocation
sends along its edges (or the parent's outputs, when it has none).

It is durable as the parent is, with nothing stored apart: each of its
barriers is checkpointed as a checkpoint of the parent run
(``RunEnv.save_progress``), holding the sub-workflow's run in the parent's
:attr:`WaitBook.nested` under the invocation's key. A crash inside it
resumes the parent's superstep, and this invocation goes on from the
sub-workflow's last barrier: no superstep of it commits twice. When it
rests (a request, a timer), the invocation suspends on a ``"workflow"``
wait; its requests are the parent's pending requests, named by their path
(``review/legal/approve``) and answered through the parent's ``respond``,
which applies the answer inside and re-delivers the invocation. Its events
are the parent's, each executor id prefixed with the path; its clock,
limits, deadline and cancellation are the parent's. Its executors' call
limits are counted with the parent's calls, at the parent run's gate
(``_engine/_limit_scope.py``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from treadle._engine._env import Opening
from treadle._engine._events import (
    OutputEvent,
    RunStarted,
    StatusChanged,
    SuperstepCompleted,
    SuperstepStarted,
)
from treadle._engine._opening import Continuation, FreshStart, open_loop
from treadle._engine._result import RunStatus
from treadle._engine._topology import Topology
from treadle._engine._waits import NestedRun, Suspend, Wait, invocation_key
from treadle._exceptions import SubWorkflowError
from treadle._graph._executor import Executor, HandlerSpec
from treadle._graph._policies import RetryPolicy
from treadle._graph._typing import promotions

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from treadle._engine._barrier import BarrierState
    from treadle._engine._context import WorkflowContext
    from treadle._engine._deadlines import AnswerLedger, InboxRead
    from treadle._engine._env import RunEnv
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._pool import ExecutorPool
    from treadle._graph._limits import WorkflowLimits

_ONCE = RetryPolicy(max_attempts=1)
"""A sub-workflow is not retried whole: its own executors have their own policies."""

# The inner run's own framing: the parent reports its supersteps, statuses and outputs.
_UNFORWARDED = (RunStarted, StatusChanged, SuperstepStarted, SuperstepCompleted, OutputEvent)

# Where it stops short of its end. PAUSED: a save of one of its barriers found the parent
# run paused, so the parent stops at its own barrier too, which is not written.
_RESTING = (RunStatus.AWAITING_INPUT, RunStatus.WAITING, RunStatus.PAUSED)


class NestedGraph(Topology, Protocol):
    """What a sub-workflow needs of the workflow it runs: a graph, its limits, instances per run."""

    limits: WorkflowLimits
    """The call limits it declares, leaves to its host, and its executors name."""
    nests_limits: bool
    """Whether a sub-workflow of its own names a call limit."""

    def claim(self, run_id: str) -> tuple[ExecutorPool, Callable[[], None]]:
        """The executor instances of one run, and how to release them."""
        ...


class SubWorkflow(Executor):
    """A workflow run as one executor of another (``WorkflowBuilder.add_workflow``).

    Args:
        workflow: The workflow it runs.
        id: Its id in the parent (default: the workflow's name).
        outputs: The classes the workflow outputs, when known: what this
            executor sends, checked against the parent's edges at build
            time and against each output at run time. ``None``: unknown,
            so the parent's edges from it are trusted.
    """

    def __init__(
        self,
        workflow: NestedGraph,
        *,
        id: str | None = None,  # noqa: A002 - `id` is the contract's name
        outputs: tuple[type, ...] | None = None,
    ) -> None:
        super().__init__(id if id is not None else workflow.name, shareable=True, retry=_ONCE)
        self.workflow = workflow
        self.outputs = outputs
        start = workflow.prototype(workflow.start_id)
        raw = tuple(spec.annotations[0] for spec in start.handler_specs() if spec.annotations)
        self._spec = HandlerSpec(
            name="run",
            fn=self._run,
            accepts=start.accepted_types(),
            sends=outputs,
            is_async=True,
            bound=False,
            annotations=(*raw, *(outputs or ())),
        )
        self._own_cache: dict[type, HandlerSpec] = {}

    @property
    def subgraph(self) -> NestedGraph:
        """The workflow it runs (pictures draw it as a cluster)."""
        return self.workflow

    def handler_specs(self) -> tuple[HandlerSpec, ...]:
        """One handler: the sub-workflow's start executor's input types."""
        return (self._spec,)

    def find_handler(self, message_type: type) -> HandlerSpec | None:
        """The handler when the sub-workflow's start executor takes the message."""
        spec = self._own_cache.get(message_type)
        if spec is None:
            candidates = (*message_type.__mro__, *promotions(message_type))
            if not any(klass in self._spec.accepts for klass in candidates):
                return None
            spec = self._own_cache[message_type] = self._spec
        return spec

    async def _run(self, message: Any, ctx: WorkflowContext[Any]) -> None:
        """Run the sub-workflow on ``message``, or go on with it, until it rests or ends."""
        host = ctx.run_env
        nested_runs = ctx.nested_runs
        key = invocation_key(self.id, ctx.stamp)
        nested = nested_runs.get(key)
        inner_id = f"{host.run_id}/{key}"
        pool, release = self.workflow.claim(inner_id)
        try:
            opening = self._opening(host, ctx, key, inner_id, pool)
            start: FreshStart | Continuation = (
                FreshStart(message)
                if nested is None
                else Continuation(nested.barrier, nested.snapshots)
            )
            inner = open_loop(opening, start)
            await inner.run_to_end()
        except BaseException:
            nested_runs.pop(key, None)  # this invocation is over: a retry starts afresh
            raise
        finally:
            release()
        status = inner.status
        if status in _RESTING:
            nested_runs[key] = NestedRun(self.id, inner.barrier_state(), pool.snapshots())
            raise Suspend(Wait("workflow", key, due_at=inner.point.waits.next_wake_at()))
        nested_runs.pop(key, None)
        if status is RunStatus.STALLED:
            stalled = ", ".join(f"{s.target!r}" for s in inner.result().stalled)
            msg = f"sub-workflow {self.id!r} stalled: fan-in {stalled} still waits for sources"
            raise SubWorkflowError(msg)
        self._hand_on(host, ctx, inner.point.outputs)

    def _opening(
        self, host: RunEnv, ctx: WorkflowContext[Any], key: str, inner_id: str, pool: ExecutorPool
    ) -> Opening:
        """What its run is opened with: the parent's clock, limits, deadline and store, nested."""
        # It rests rather than sleeping through its timers: the parent suspends on them.
        settings = dataclasses.replace(
            host.options, sleep_through_timers=False, tracing=None, timeout=None
        )
        sink = _Forwarding(ctx, self.id, host.run_id, host.live) if host.listening else None
        saving = host.checkpointer is not None
        progress = _Progress(host, ctx.nested_runs, key, self.id) if saving else None
        # Its requests' deadlines are decided by the store too, when the parent's are.
        ledger = _NestedLedger(host.ledger) if host.ledger is not None else None
        # Its calls wait at the parent's gate, counted with the parent's (_limit_scope.py).
        scope = host.limit_scope
        limiting, inner_scope = (
            (None, None)
            if scope is None
            else scope.enter(self.workflow.limits, self.workflow.nests_limits)
        )
        return Opening(
            self.workflow,
            inner_id,
            settings,
            pool,
            sink,
            progress,
            ledger,
            f"{host.wait_scope}/{key}",
            ctx.deadline_at,
            limiting,
            limit_scope=inner_scope,
            branch=host.branch,
        )

    def _hand_on(self, host: RunEnv, ctx: WorkflowContext[Any], outputs: Sequence[Any]) -> None:
        """Send the outputs along this executor's edges; with none, they are the parent's."""
        declared = self.outputs
        sends = host.router.has_edges_from(self.id)
        for value in outputs:
            if declared is not None and not isinstance(value, declared):
                names = ", ".join(t.__qualname__ for t in declared)
                msg = (
                    f"sub-workflow {self.id!r} output a {type(value).__qualname__}, "
                    f"but declares outputs={names}"
                )
                raise SubWorkflowError(msg)
            if sends:
                ctx.send_message(value)
            else:
                ctx.yield_output(value)


class _Forwarding:
    """The sub-workflow's event sink: its events become the parent invocation's.

    Each keeps its kind and fields; its run and superstep become the
    parent's, and its executor id is prefixed with the sub-workflow's path.
    """

    backpressure: Callable[[], Awaitable[None]] | None = None

    def __init__(self, ctx: WorkflowContext[Any], path: str, run_id: str, live: bool) -> None:
        self._ctx = ctx
        self._path = path
        self._run_id = run_id
        self.live = live

    def publish(self, event: WorkflowEvent) -> None:
        if isinstance(event, _UNFORWARDED):
            return
        inner = event.executor_id
        self._ctx.emit(
            dataclasses.replace(
                event,
                run_id=self._run_id,
                superstep=self._ctx.superstep,
                executor_id=f"{self._path}/{inner}" if inner else self._path,
            )
        )


class _NestedLedger:
    """The parent's answer ledger, deciding the sub-workflow's request deadlines only.

    A deadline inside falls due while the parent's superstep runs: the store
    decides it against answers as for the parent's own, but the rest of the
    parent's inbox is not the sub-workflow's to apply, so it stays there.
    """

    def __init__(self, ledger: AnswerLedger) -> None:
        self._ledger = ledger

    async def expire(
        self, deadlines: Sequence[tuple[str, float]], *, whole: bool = True
    ) -> InboxRead:
        del whole  # never the parent's whole inbox, whoever asks
        return await self._ledger.expire(deadlines, whole=False)


class _Progress:
    """The sub-workflow's checkpointing: each of its barriers, saved with the parent's."""

    def __init__(
        self, host: RunEnv, nested_runs: dict[str, NestedRun], key: str, path: str
    ) -> None:
        self._checkpointer = host.checkpointer
        self._save_progress = host.save_progress
        self._nested_runs = nested_runs
        self._key = key
        self._path = path

    @property
    def last_checkpoint_id(self) -> str | None:
        checkpointer = self._checkpointer
        return checkpointer.last_checkpoint_id if checkpointer is not None else None

    @property
    def paused(self) -> bool:
        """Whether a save found the parent run paused: the sub-workflow stops there too."""
        checkpointer = self._checkpointer
        return checkpointer is not None and checkpointer.paused

    @property
    def paused_point(self) -> BarrierState | None:
        """Not the sub-workflow's: the parent's barrier is what the parent's result shows."""
        return None

    async def save(self, barrier: BarrierState, snapshots: Mapping[str, Any]) -> str | None:
        self._nested_runs[self._key] = NestedRun(self._path, barrier, dict(snapshots))
        return await self._save_progress()

    async def record_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Nothing of its own: the parent records what the sub-workflow's end means to it."""

    def relay(self, event: WorkflowEvent) -> None:
        """Nothing here: the event reaches the parent's context, which relays it as its own."""

    async def flush(self) -> None:
        checkpointer = self._checkpointer
        if checkpointer is not None:
            await checkpointer.flush()
