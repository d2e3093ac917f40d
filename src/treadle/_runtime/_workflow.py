"""The immutable ``Workflow`` and its entry points: run, stream, sync adapters.

A ``Workflow`` is a validated graph and nothing else: every run gets its own
:class:`RunLoop`, so one workflow object serves any number of concurrent
runs. Executors given as factories are instantiated per run; instances given
directly are shared by every run, so unless declared ``shareable`` a second
concurrent run that would use one is refused.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._exceptions import ExecutorInUseError, WorkflowRunError
from treadle._graph._edges import Edge, edge_sources, edge_targets
from treadle._runtime._loop import RunLoop, RunOptions
from treadle._runtime._routing import Router
from treadle._runtime._stream import EventBatch, EventChannel, ExecutionMode, WorkflowStream
from treadle._runtime._sync import run_in_thread, stream_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from treadle._graph._executor import Executor
    from treadle._runtime._events import WorkflowEvent
    from treadle._runtime._result import RunResult
    from treadle._runtime._state import StateKey


@dataclass(frozen=True, slots=True)
class ExecutorNode:
    """One executor of the graph: its rank, and how a run gets an instance.

    ``prototype`` answers questions about handlers; with a ``factory`` each
    run calls it for a fresh instance, without one the prototype is shared.
    """

    id: str
    rank: int
    prototype: Executor
    factory: Callable[[], Executor] | None


class Workflow:
    """A validated, immutable graph of executors; build one with ``WorkflowBuilder``.

    Call :meth:`run` for a result, :meth:`stream` for live events, and their
    ``_sync`` twins from code that is not async.
    """

    def __init__(
        self,
        *,
        name: str,
        start_id: str,
        nodes: Sequence[ExecutorNode],
        edges: Sequence[Edge],
        state_specs: Mapping[str, StateKey],
        defaults: RunOptions,
    ) -> None:
        self.name = name
        self.start_id = start_id
        self.edges: tuple[Edge, ...] = tuple(edges)
        self.state_specs: Mapping[str, StateKey] = dict(state_specs)
        self.defaults = defaults
        self._nodes = {node.id: node for node in nodes}
        self.ranks: Mapping[str, int] = {node.id: node.rank for node in nodes}
        self.router = Router(self.edges, self._can_handle)
        self._loops = _strongly_connected(self.ranks, self.edges)
        self._exclusive = tuple(n for n in nodes if n.factory is None and not n.prototype.shareable)
        self._busy: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r}: {len(self._nodes)} executors, start {self.start_id!r}>"

    @property
    def executor_ids(self) -> tuple[str, ...]:
        """Every executor id, in rank (definition) order."""
        return tuple(self._nodes)

    def prototype(self, executor_id: str) -> Executor:
        """The instance used to inspect an executor's handlers."""
        return self._nodes[executor_id].prototype

    def _can_handle(self, executor_id: str, cls: type) -> bool:
        return self._nodes[executor_id].prototype.find_handler(cls) is not None

    def loop_members(self, executor_ids: Iterator[str] | Mapping[str, Any]) -> tuple[str, ...]:
        """The executors of the cycles that the given executors sit on.

        Falls back to the given executors themselves when none is on a cycle.
        """
        given = list(executor_ids)
        members: dict[str, None] = {}
        for executor_id in given:
            for member in self._loops.get(executor_id, ()):
                members[member] = None
        found = members or dict.fromkeys(given)
        return tuple(sorted(found, key=self.ranks.__getitem__))

    # -- running ---------------------------------------------------------------
    def _options(self, overrides: Mapping[str, Any]) -> RunOptions:
        d = self.defaults

        def pick(name: str, default: Any) -> Any:
            value = overrides.get(name)
            return default if value is None else value

        return RunOptions(
            max_supersteps=pick("max_supersteps", d.max_supersteps),
            max_node_iterations=pick("max_node_iterations", d.max_node_iterations),
            max_concurrency=pick("max_concurrency", d.max_concurrency),
            deterministic=bool(overrides.get("deterministic") or d.deterministic),
        )

    def _open(
        self,
        message: Any,
        sink: EventChannel | EventBatch | None,
        run_id: str | None,
        state: Mapping[str, Any] | None,
        overrides: Mapping[str, Any],
    ) -> tuple[RunLoop, Callable[[], None]]:
        """Start a run: claim exclusive instances, deliver the input."""
        options = self._options(overrides)
        run_id = run_id or uuid.uuid4().hex
        claimed: list[str] = []
        for node in self._exclusive:
            holder = self._busy.get(node.id)
            if holder is not None:
                self._release(claimed)
                raise ExecutorInUseError(node.id, holder)
            self._busy[node.id] = run_id
            claimed.append(node.id)
        instances: dict[str, Executor] = {
            n.id: n.prototype for n in self._nodes.values() if n.factory is None
        }
        nodes = self._nodes

        def instance_for(executor_id: str) -> Executor:
            instance = instances.get(executor_id)
            if instance is None:
                factory = nodes[executor_id].factory
                assert factory is not None  # noqa: S101 - an invariant, narrows the type for mypy
                instance = _checked(factory(), executor_id)
                instances[executor_id] = instance
            return instance

        try:
            loop = RunLoop(self, run_id, options, sink, instance_for, state)
            loop.start(message)
        except BaseException:
            self._release(claimed)
            raise
        return loop, lambda: self._release(claimed)

    def _release(self, claimed: list[str]) -> None:
        for executor_id in claimed:
            self._busy.pop(executor_id, None)
        claimed.clear()

    async def run(
        self,
        message: Any,
        *,
        run_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        record_events: bool = True,
        max_supersteps: int | None = None,
        max_node_iterations: int | None = None,
        max_concurrency: int | None = None,
        deterministic: bool = False,
    ) -> RunResult:
        """Run to the end and return the result.

        Args:
            message: The input, delivered to the start executor in superstep 1.
            run_id: The run's id (default: a fresh UUID).
            state: Initial shared state, over the declared defaults.
            record_events: Keep every event in ``RunResult.events``; turn off
                to build no events at all.
            max_supersteps: Stop a runaway loop (default 1000).
            max_node_iterations: Stop any one executor after this many
                invocations.
            max_concurrency: Most handlers running at once.
            deterministic: Run the executors of a superstep one at a time in
                rank order, for reproducible side effects.

        Raises:
            WorkflowRunError: The run failed; ``error.result`` has what was
                committed before the failing superstep.
        """
        batch = EventBatch() if record_events else None
        loop, release = self._open(
            message,
            batch,
            run_id,
            state,
            {
                "max_supersteps": max_supersteps,
                "max_node_iterations": max_node_iterations,
                "max_concurrency": max_concurrency,
                "deterministic": deterministic,
            },
        )
        events = batch.events if batch is not None else None
        try:
            await loop.run_to_end()
        except WorkflowRunError as error:
            error.result = loop.result(events)
            raise
        except asyncio.CancelledError:
            loop.cancel()
            raise
        finally:
            release()
        return loop.result(events)

    def stream(
        self,
        message: Any,
        *,
        mode: ExecutionMode = ExecutionMode.OFF_THREAD,
        max_buffered_events: int | None = None,
        run_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        max_supersteps: int | None = None,
        max_node_iterations: int | None = None,
        max_concurrency: int | None = None,
        deterministic: bool = False,
    ) -> WorkflowStream:
        """Start a run and stream its events (see :class:`ExecutionMode`).

        Use as ``async with workflow.stream(x) as events: async for e in
        events: ...``. Arguments are those of :meth:`run`, plus ``mode`` and
        ``max_buffered_events`` (OFF_THREAD backpressure).
        """
        overrides = {
            "max_supersteps": max_supersteps,
            "max_node_iterations": max_node_iterations,
            "max_concurrency": max_concurrency,
            "deterministic": deterministic,
        }
        return WorkflowStream(
            lambda sink: self._open(message, sink, run_id, state, overrides),
            mode,
            max_buffered_events,
        )

    def run_sync(self, message: Any, **options: Any) -> RunResult:
        """:meth:`run` for synchronous callers, on a dedicated loop thread."""
        return run_in_thread(lambda: self.run(message, **options))

    def stream_sync(self, message: Any, **options: Any) -> Iterator[WorkflowEvent]:
        """:meth:`stream` for synchronous callers, on a dedicated loop thread.

        Closing the iterator early cancels the run.
        """
        return stream_in_thread(lambda: self.stream(message, **options))


def _checked(instance: object, executor_id: str) -> Executor:
    from treadle._graph._executor import Executor  # noqa: PLC0415 - a local import breaks an import cycle

    if not isinstance(instance, Executor):
        msg = f"the factory of executor {executor_id!r} returned {instance!r}, not an Executor"
        raise TypeError(msg)
    if instance.id != executor_id:
        msg = f"the factory of executor {executor_id!r} returned one with id {instance.id!r}"
        raise ValueError(msg)
    return instance


def _strongly_connected(
    ranks: Mapping[str, int], edges: Sequence[Edge]
) -> dict[str, tuple[str, ...]]:
    """Map each executor on a cycle to the members of its cycle (Tarjan)."""
    successors: dict[str, set[str]] = {node: set() for node in ranks}
    for edge in edges:
        for source in edge_sources(edge):
            successors[source].update(edge_targets(edge))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: dict[str, tuple[str, ...]] = {}
    counter = 0
    for root in ranks:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(successors[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in successors[node]:
                    members = tuple(sorted(component, key=ranks.__getitem__))
                    for member in component:
                        result[member] = members
    return result
