"""The immutable ``Workflow`` and its entry points: run, stream, sync adapters.

A ``Workflow`` is a validated graph and nothing else: every run gets its own
:class:`RunLoop`, so one workflow object serves any number of concurrent
runs. Executors given as factories are instantiated per run; instances given
directly are shared by every run, so unless declared ``shareable`` a second
concurrent run that would use one is refused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._durable._checkpoint import CheckpointCodec
from treadle._durable._graph_description import describe_graph, fingerprint
from treadle._durable._registry import TypeRegistry
from treadle._durable._runs import RunHistory, fork_run, load_restored, run_history
from treadle._durable._serialization import JsonSerializer
from treadle._exceptions import ExecutorInUseError, TreadleError, WorkflowRunError
from treadle._graph._edges import Edge, edge_sources, edge_targets
from treadle._runtime._launch import Launch, open_run
from treadle._runtime._loop import RunOptions
from treadle._runtime._pool import ExecutorPool
from treadle._runtime._routing import Router
from treadle._runtime._stream import EventBatch, ExecutionMode, WorkflowStream
from treadle._runtime._sync import SyncEventStream, run_in_thread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from treadle._durable._serialization import Serializer
    from treadle._durable._store import Store
    from treadle._graph._executor import Executor
    from treadle._runtime._clock import Clock
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
        store: Store | None = None,
        serializer: Serializer | None = None,
        checkpoint_key: bytes | None = None,
        types: Sequence[type] = (),
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
        self.store = store
        self._serializer = serializer
        self._checkpoint_key = checkpoint_key
        self._types = tuple(types)
        self._description: dict[str, Any] | None = None
        self._fingerprint: str | None = None
        self._codec: CheckpointCodec | None = None

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

    # -- durability configuration ------------------------------------------------
    @property
    def description(self) -> dict[str, Any]:
        """The routing-relevant shape of this graph, as plain data."""
        if self._description is None:
            self._description = describe_graph(self)
        return self._description

    @property
    def fingerprint(self) -> str:
        """A stable hash of :attr:`description`; checkpoints carry it."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.description)
        return self._fingerprint

    @property
    def codec(self) -> CheckpointCodec:
        """Encodes this workflow's checkpoints, with its type allowlist."""
        if self._codec is None:
            serializer = self._serializer
            if serializer is None:
                registry = TypeRegistry()
                for node in self._nodes.values():
                    for spec in node.prototype.handler_specs():
                        for annotation in spec.annotations:
                            registry.register_annotation(annotation)
                for cls in self._types:
                    registry.register(cls)
                serializer = JsonSerializer(registry)
            self._codec = CheckpointCodec(serializer, self._checkpoint_key)
        return self._codec

    def store_for(self, store: Store | None) -> Store:
        """The store a runner method uses: the one given, else the workflow's."""
        chosen = store if store is not None else self.store
        if chosen is None:
            msg = (
                f"workflow {self.name!r} has no store: pass store=... or build it with "
                f"WorkflowBuilder(..., store=SqliteStore(path))"
            )
            raise ValueError(msg)
        return chosen

    # -- running ---------------------------------------------------------------
    def options(self, overrides: Mapping[str, Any]) -> RunOptions:
        """The run options: the workflow's defaults with per-run overrides."""
        d = self.defaults

        def pick(name: str, default: Any) -> Any:
            value = overrides.get(name)
            return default if value is None else value

        return RunOptions(
            max_supersteps=pick("max_supersteps", d.max_supersteps),
            max_node_iterations=pick("max_node_iterations", d.max_node_iterations),
            max_concurrency=pick("max_concurrency", d.max_concurrency),
            deterministic=bool(overrides.get("deterministic") or d.deterministic),
            retry=d.retry,
            clock=pick("clock", d.clock),
        )

    def claim(self, run_id: str) -> tuple[ExecutorPool, Callable[[], None]]:
        """The executor instances of a new run, and how to release them.

        Raises:
            ExecutorInUseError: a non-shareable instance serves another run.
        """
        claimed: list[str] = []
        for node in self._exclusive:
            holder = self._busy.get(node.id)
            if holder is not None:
                self._release(claimed)
                raise ExecutorInUseError(node.id, holder)
            self._busy[node.id] = run_id
            claimed.append(node.id)
        pool = ExecutorPool(
            {n.id: n.prototype for n in self._nodes.values() if n.factory is None},
            {n.id: n.factory for n in self._nodes.values() if n.factory is not None},
        )
        return pool, lambda: self._release(claimed)

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
        store: Store | None = None,
        keep_last: int | None = None,
        record_events: bool = True,
        max_supersteps: int | None = None,
        max_node_iterations: int | None = None,
        max_concurrency: int | None = None,
        deterministic: bool = False,
        clock: Clock | None = None,
    ) -> RunResult:
        """Run to the end and return the result.

        Args:
            message: The input, delivered to the start executor in superstep 1.
            run_id: The run's id (default: a fresh UUID).
            state: Initial shared state, over the declared defaults.
            store: Checkpoint every barrier here (default: the workflow's
                store; none means the run lives in memory only).
            keep_last: Checkpoints to keep for this run (default: the store's).
            record_events: Keep every event in ``RunResult.events``; turn off
                to build no events at all.
            max_supersteps: Stop a runaway loop (default 1000).
            max_node_iterations: Stop any one executor after this many
                invocations.
            max_concurrency: Most handlers running at once.
            deterministic: Run the executors of a superstep one at a time in
                rank order, for reproducible side effects.
            clock: Where timers, backoff and timeouts read the time (default:
                the workflow's, else the system clock).

        Raises:
            WorkflowRunError: The run failed; ``error.result`` has what was
                committed before the failing superstep.
        """
        launch = Launch(
            message=message,
            run_id=run_id,
            state=state,
            store=store,
            keep_last=keep_last,
            overrides=_overrides(
                max_supersteps, max_node_iterations, max_concurrency, deterministic, clock
            ),
        )
        return await self._drive(launch, record_events=record_events)

    async def _drive(self, launch: Launch, *, record_events: bool) -> RunResult:
        batch = EventBatch() if record_events else None
        loop, release = await open_run(self, launch, batch)
        events = batch.events if batch is not None else None
        try:
            await loop.run_to_end()
        except TreadleError as error:
            if isinstance(error, WorkflowRunError):
                error.result = loop.result(events)
            raise
        except asyncio.CancelledError:
            await loop.cancel()
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
        store: Store | None = None,
        keep_last: int | None = None,
        max_supersteps: int | None = None,
        max_node_iterations: int | None = None,
        max_concurrency: int | None = None,
        deterministic: bool = False,
        clock: Clock | None = None,
    ) -> WorkflowStream:
        """Start a run and stream its events (see :class:`ExecutionMode`).

        Use as ``async with workflow.stream(x) as events: async for e in
        events: ...``. Arguments are those of :meth:`run`, plus ``mode`` and
        ``max_buffered_events`` (OFF_THREAD backpressure).
        """
        launch = Launch(
            message=message,
            run_id=run_id,
            state=state,
            store=store,
            keep_last=keep_last,
            overrides=_overrides(
                max_supersteps, max_node_iterations, max_concurrency, deterministic, clock
            ),
        )
        return WorkflowStream(lambda sink: open_run(self, launch, sink), mode, max_buffered_events)

    def run_sync(self, message: Any, **options: Any) -> RunResult:
        """:meth:`run` for synchronous callers, on a dedicated loop thread."""
        return run_in_thread(lambda: self.run(message, **options))

    def stream_sync(self, message: Any, **options: Any) -> SyncEventStream:
        """:meth:`stream` for synchronous callers, on a dedicated loop thread.

        Use it in a ``with`` block (or close it): leaving early cancels the run.
        """
        return SyncEventStream(lambda: self.stream(message, **options))

    # -- durable runs ---------------------------------------------------------------
    async def resume(
        self,
        run_id: str,
        checkpoint_id: str | None = None,
        *,
        store: Store | None = None,
        keep_last: int | None = None,
        record_events: bool = True,
        max_supersteps: int | None = None,
        max_node_iterations: int | None = None,
        max_concurrency: int | None = None,
        deterministic: bool = False,
        clock: Clock | None = None,
    ) -> RunResult:
        """Continue a stored run from its latest checkpoint, or from ``checkpoint_id``.

        Only supersteps after the checkpoint run again. Resuming a run whose
        latest checkpoint is final returns its result and runs nothing;
        resuming from an older checkpoint branches the run's history there.

        Raises:
            GraphChangedError: the run was written by a different graph
                (nothing runs; the error lists what changed).
            CheckpointCorruptError: the checkpoint fails its checksum.
            RunNotFoundError, CheckpointNotFoundError: nothing to resume.
            WorkflowRunError: the resumed run failed.
        """
        chosen = self.store_for(store)
        restored = await load_restored(self, chosen, run_id, checkpoint_id)
        launch = Launch(
            restored=restored,
            store=chosen,
            keep_last=keep_last,
            overrides=_overrides(
                max_supersteps, max_node_iterations, max_concurrency, deterministic, clock
            ),
        )
        return await self._drive(launch, record_events=record_events)

    def resume_sync(
        self, run_id: str, checkpoint_id: str | None = None, **options: Any
    ) -> RunResult:
        """:meth:`resume` for synchronous callers."""
        return run_in_thread(lambda: self.resume(run_id, checkpoint_id, **options))

    async def fork(
        self,
        run_id: str,
        checkpoint_id: str,
        state_patch: Mapping[str, Any] | None = None,
        *,
        new_run_id: str | None = None,
        store: Store | None = None,
    ) -> str:
        """Branch a new run from a checkpoint, optionally patching its state.

        The new run's first checkpoint is the patched copy; it records its
        parent run and checkpoint, and the parent lists it among its forks.
        The parent is untouched. Continue the new run with :meth:`resume`.
        """
        chosen = self.store_for(store)
        return await fork_run(self, chosen, run_id, checkpoint_id, state_patch, new_run_id)

    async def history(self, run_id: str, *, store: Store | None = None) -> RunHistory:
        """A stored run's checkpoints, oldest first, with its lineage (time travel)."""
        return await run_history(self.store_for(store), run_id)

    async def prune(self, run_id: str, keep_last: int, *, store: Store | None = None) -> int:
        """Delete all but the newest ``keep_last`` checkpoints; return how many went."""
        if keep_last < 1:
            msg = f"keep_last must be at least 1, got {keep_last}"
            raise ValueError(msg)
        removed: int = await self.store_for(store).prune(run_id, keep_last)
        return removed


def _overrides(
    max_supersteps: int | None,
    max_node_iterations: int | None,
    max_concurrency: int | None,
    deterministic: bool,
    clock: Clock | None,
) -> dict[str, Any]:
    return {
        "max_supersteps": max_supersteps,
        "max_node_iterations": max_node_iterations,
        "max_concurrency": max_concurrency,
        "deterministic": deterministic,
        "clock": clock,
    }


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
