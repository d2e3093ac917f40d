"""The fluent ``WorkflowBuilder`` and build-time validation.

Executors may be named three ways wherever the builder takes one: the
instance (shared by every run), its id (a string, resolved at ``build()``),
or a factory (an ``Executor`` subclass or any zero-argument callable that
returns an executor; each run gets a fresh instance). An executor's rank, the
tie-breaker of every ordering guarantee, is the order in which the builder
first met it, the start executor first.

Mistakes are collected rather than raised one at a time: ``build()`` reports
every problem it finds in one :class:`WorkflowValidationError`.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any, Self

from treadle._engine._clock import SystemClock
from treadle._engine._delivery import HandoffRefused
from treadle._engine._options import RunSettings
from treadle._engine._pool import ExecutorNode
from treadle._engine._state import MISSING, Reducer, StateKey
from treadle._exceptions import WorkflowValidationError
from treadle._graph._edges import (
    Case,
    Condition,
    Default,
    DirectEdge,
    Edge,
    ErrorEdge,
    ExecutorRef,
    FanInEdge,
    FanOutEdge,
    HandoffEdge,
    Selector,
    SwitchEdge,
    edge_sources,
    edge_targets,
)
from treadle._graph._executor import Executor, FunctionExecutor
from treadle._graph._typing import accepts_any_of
from treadle._values._search_fields import SearchFields
from treadle._workflow._composing import Composing
from treadle._workflow._error_routes import ErrorRouting, error_route_problems
from treadle._workflow._search_declaring import SearchDeclaring
from treadle._workflow._versions import check_version
from treadle._workflow._workflow import Workflow
from treadle._workflow._workflow_graph import WorkflowGraph

if TYPE_CHECKING:
    from treadle._engine._clock import Clock
    from treadle._engine._options import Durability
    from treadle._engine._tracing import Tracing
    from treadle._graph._policies import RetryPolicy
    from treadle._graph._remote import RemotePool
    from treadle._stores._store import Store
    from treadle._values._serialization import Serializer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


class _Entry:
    __slots__ = ("factory", "prototype")

    def __init__(self, prototype: Executor, factory: Callable[[], Executor] | None) -> None:
        self.prototype = prototype
        self.factory = factory


class WorkflowBuilder(ErrorRouting, Composing, SearchDeclaring):
    """Builds an immutable :class:`Workflow` from executors and edges.

    Args:
        start: The executor that receives the run's input.
        name: A name for the workflow, used in messages and registries.
        version: Which version of the workflow this is (an int from 1). A
            runtime, worker or server may host several versions of one name:
            a run goes on with the version it started with, new runs take the
            newest, and ``treadle migrate`` moves parked runs between them
            (see ``docs/versions.md``).
        max_supersteps: Default cap on supersteps per run (runaway loops).
        max_node_iterations: Default cap on invocations per executor per run.
        max_concurrency: Default cap on handlers running at once.
        deterministic: Default for running a superstep's executors one at a
            time in rank order.
        store: Where runs are checkpointed by default (``SqliteStore`` for
            the embedded set-up); runner methods may pass another.
        checkpoint_key: Seal checkpoints with a keyed digest (HMAC) so that
            data not written with this key is refused.
        serializer: How checkpoint values become bytes; the default is safe
            typed JSON over an allowlist built from handler annotations plus
            :meth:`register_type`. ``PickleSerializer`` is opt-in and unsafe.
        retry: The retry policy of handlers whose executor declares none.
        clock: Where timers, backoff and timeouts read the time
            (``treadle.testing.FakeClock`` in tests).
        durability: ``"sync"``, ``"background"`` or ``"batched"`` checkpoint
            commits (see ``Workflow.run``).
        tracing: Spans for every run, superstep and invocation, e.g.
            ``treadle.otel.OpenTelemetryTracing()`` (see ``docs/tracing.md``).
        pool: Where every function executor with a plain ``def`` handler
            runs, unless it names a pool of its own or is pinned with
            ``sync_handlers="loop"``: e.g. ``treadle.dask.DaskPool()`` (see
            ``docs/cluster.md``). ``async def`` handlers and ``Executor``
            subclasses stay in the run's process.
        four_eyes: Whether its requests refuse the person who started the
            run (a request's or an executor's own ``four_eyes`` wins).
    """

    def __init__(
        self,
        start: ExecutorRef,
        *,
        name: str = "workflow",
        version: int = 1,
        max_supersteps: int = 1000,
        max_node_iterations: int | None = None,
        max_concurrency: int | None = None,
        deterministic: bool = False,
        store: Store | None = None,
        checkpoint_key: bytes | None = None,
        serializer: Serializer | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        durability: Durability = "sync",
        tracing: Tracing[Any] | None = None,
        pool: RemotePool | None = None,
        four_eyes: bool = False,
    ) -> None:
        if pool is not None and not callable(getattr(pool, "run", None)):
            msg = f"pool must be an executor pool (such as treadle.dask.DaskPool), got {pool!r}"
            raise TypeError(msg)
        self._pool = pool
        self._name = name
        self._version = check_version(version)
        self._store = store
        self._checkpoint_key = checkpoint_key
        self._serializer = serializer
        self._types: list[type] = []
        self._defaults = RunSettings(
            max_supersteps=max_supersteps,
            max_node_iterations=max_node_iterations,
            max_concurrency=max_concurrency,
            deterministic=deterministic,
            retry=retry,
            clock=clock if clock is not None else SystemClock(),
            durability=durability,
            tracing=tracing,
            four_eyes=four_eyes,
        )
        self._entries: dict[str, _Entry] = {}
        self._edges: list[tuple[str, Edge]] = []  # (how it was added, edge)
        self._state: dict[str, StateKey] = {}
        self._problems: list[str] = []
        self._subworkflows = {}
        self._search_fields = []
        self._start = self._resolve(start, "start")

    # -- executors ----------------------------------------------------------------
    def _resolve(self, ref: object, where: str) -> str:
        """Register ``ref`` if new; return its id (unknown strings stay as is)."""
        if isinstance(ref, str):
            return ref
        if isinstance(ref, Executor):
            return self._register(ref, None, where)
        if isinstance(ref, WorkflowGraph):  # a built workflow: a sub-workflow
            return self._register(self._subworkflow(ref), None, where)
        if callable(ref):
            try:
                made = ref()
            except Exception as error:  # noqa: BLE001 - reported with every other problem
                self._problems.append(
                    f"{where}: the factory {_name_of(ref)} raised {type(error).__name__}: {error}"
                )
                return f"<{_name_of(ref)}>"
            if not isinstance(made, Executor):
                self._problems.append(
                    f"{where}: the factory {_name_of(ref)} returned {made!r}, not an Executor"
                )
                return f"<{_name_of(ref)}>"
            return self._register(made, ref, where)
        self._problems.append(f"{where}: {ref!r} is not an executor, an executor id or a factory")
        return f"<{ref!r}>"

    def _register(
        self, prototype: Executor, factory: Callable[[], Executor] | None, where: str
    ) -> str:
        existing = self._entries.get(prototype.id)
        if existing is None:
            self._entries[prototype.id] = _Entry(prototype, factory)
        elif factory is not None and existing.factory is not factory:
            self._problems.append(
                f"{where}: duplicate executor id {prototype.id!r} (two different factories make it)"
            )
        elif factory is None and existing.prototype is not prototype:
            self._problems.append(
                f"{where}: duplicate executor id {prototype.id!r} (two different instances)"
            )
        return prototype.id

    def add_executor(self, executor: ExecutorRef) -> Self:
        """Register an executor (edges register theirs too; rank is first mention)."""
        self._resolve(executor, "add_executor")
        return self

    # -- edges ----------------------------------------------------------------------
    def add_edge(
        self, source: ExecutorRef, target: ExecutorRef, condition: Condition | None = None
    ) -> Self:
        """``source`` → ``target``; with ``condition``, only messages it accepts."""
        s = self._resolve(source, "add_edge")
        t = self._resolve(target, "add_edge")
        self._edges.append((f"add_edge({s!r} -> {t!r})", DirectEdge(s, t, condition)))
        return self

    def add_chain(self, executors: Sequence[ExecutorRef]) -> Self:
        """Direct edges along ``executors``, first to last."""
        ids = [self._resolve(e, "add_chain") for e in executors]
        if len(ids) < 2:  # noqa: PLR2004 - a chain links at least two
            self._problems.append(f"add_chain({ids!r}): a chain needs at least two executors")
        for s, t in itertools.pairwise(ids):
            self._edges.append((f"add_chain(... {s!r} -> {t!r} ...)", DirectEdge(s, t)))
        return self

    def add_fan_out(
        self,
        source: ExecutorRef,
        targets: Sequence[ExecutorRef],
        selector: Selector | None = None,
    ) -> Self:
        """``source`` → every target, or those ``selector(message, ids)`` returns."""
        s = self._resolve(source, "add_fan_out")
        ts = tuple(self._resolve(t, "add_fan_out") for t in targets)
        where = f"add_fan_out({s!r} -> {list(ts)!r})"
        if not ts:
            self._problems.append(f"{where}: a fan-out needs at least one target")
        self._edges.append((where, FanOutEdge(s, ts, selector)))
        return self

    def add_fan_in(self, sources: Sequence[ExecutorRef], target: ExecutorRef) -> Self:
        """Every source → ``target``, which gets one list once all have sent."""
        ss = tuple(self._resolve(s, "add_fan_in") for s in sources)
        t = self._resolve(target, "add_fan_in")
        where = f"add_fan_in({list(ss)!r} -> {t!r})"
        if not ss:
            self._problems.append(f"{where}: a fan-in needs at least one source")
        if len(set(ss)) != len(ss):
            self._problems.append(f"{where}: a source is listed twice")
        self._edges.append((where, FanInEdge(ss, t)))
        return self

    def add_switch(self, source: ExecutorRef, cases: Sequence[Case | Default]) -> Self:
        """``source`` → the first :class:`Case` whose condition holds, else :class:`Default`."""
        s = self._resolve(source, "add_switch")
        where = f"add_switch({s!r})"
        compiled: list[tuple[Condition, str]] = []
        defaults: list[str] = []
        for case in cases:
            if isinstance(case, Case):
                compiled.append((case.condition, self._resolve(case.target, where)))
            elif isinstance(case, Default):
                defaults.append(self._resolve(case.target, where))
            else:
                self._problems.append(f"{where}: {case!r} is neither a Case nor a Default")
        if not compiled and not defaults:
            self._problems.append(f"{where}: a switch needs at least one Case or Default")
        if len(defaults) > 1:
            self._problems.append(f"{where}: a switch takes one Default, got {len(defaults)}")
        default = defaults[0] if defaults else None
        self._edges.append((where, SwitchEdge(s, tuple(compiled), default)))
        return self

    def add_handoff(
        self,
        source: ExecutorRef,
        targets: Sequence[ExecutorRef],
        *,
        require_approval: bool = False,
    ) -> Self:
        """Allow ``source`` to hand control to any of ``targets`` (``ctx.handoff``).

        With ``require_approval=True`` every such handoff pauses the run as a
        request (``AWAITING_INPUT``); ``respond(run_id, {request_id: True})``
        delivers it, ``False`` sends a ``HandoffRefused`` back to the source,
        which must therefore have a handler for it.
        """
        s = self._resolve(source, "add_handoff")
        ts = tuple(self._resolve(t, "add_handoff") for t in targets)
        where = f"add_handoff({s!r} -> {list(ts)!r})"
        if not ts:
            self._problems.append(f"{where}: a handoff needs at least one target")
        self._edges.append((where, HandoffEdge(s, ts, require_approval)))
        return self

    # -- state ------------------------------------------------------------------------
    def add_state(
        self, key: str, *, default: Any = MISSING, reducer: Reducer | None = None
    ) -> Self:
        """Declare a state key with an initial value and/or a reducer.

        With a reducer, several executors may ``set`` the key in one
        superstep; their values are merged as ``reducer(current, new)`` in
        rank order instead of raising ``StateConflictError``.
        """
        if not isinstance(key, str) or not key:
            self._problems.append(f"add_state({key!r}): a state key must be a non-empty string")
        elif key in self._state:
            self._problems.append(f"add_state({key!r}): the key is declared twice")
        elif reducer is not None and not callable(reducer):
            self._problems.append(f"add_state({key!r}): the reducer {reducer!r} is not callable")
        else:
            self._state[key] = StateKey(default, reducer)
        return self

    def register_type(self, *classes: type) -> Self:
        """Allow classes in checkpoints that no handler annotation mentions.

        Handler annotations already allow every enum, dataclass and pydantic
        model they name (recursively); register what else your state,
        outputs or snapshots hold.
        """
        self._types.extend(classes)
        return self

    # -- build ------------------------------------------------------------------------
    def build(self) -> Workflow:
        """Validate and freeze the graph.

        Raises:
            WorkflowValidationError: listing every problem found.
        """
        problems = list(self._problems)
        known = self._entries
        problems.extend(_unknown_ids(self._start, self._edges, known))
        broken = _handler_problems(known)
        problems.extend(broken.values())
        sound = {eid: entry for eid, entry in known.items() if eid not in broken}
        problems.extend(_type_problems(self._edges, sound))
        problems.extend(error_route_problems(self._edges, sound))
        problems.extend(_duplicate_edges(self._edges))
        problems.extend(_unreachable(self._start, self._edges, known))
        if problems:
            raise WorkflowValidationError(problems)
        nodes = [
            ExecutorNode(
                id=eid,
                rank=rank,
                prototype=_pooled(entry.prototype, self._pool),
                factory=_pooled_factory(entry.factory, self._pool),
            )
            for rank, (eid, entry) in enumerate(known.items())
        ]
        return Workflow(
            name=self._name,
            version=self._version,
            start_id=self._start,
            nodes=nodes,
            edges=[edge for _, edge in self._edges],
            state_specs=self._state,
            defaults=self._defaults,
            store=self._store,
            serializer=self._serializer,
            checkpoint_key=self._checkpoint_key,
            types=self._types,
            search_fields=SearchFields(tuple(self._search_fields)),
        )


def _pooled(executor: Executor, pool: RemotePool | None) -> Executor:
    """``executor`` on the workflow's pool, if it is one that runs there.

    Those are function executors with a plain ``def`` handler that name no
    pool of their own and are not pinned to the loop; the rest stay as they are.
    """
    if (
        pool is None
        or not isinstance(executor, FunctionExecutor)
        or executor.pool is not None
        or executor.pool_problem(pool) is not None
    ):
        return executor
    return executor.on_pool(pool)


def _pooled_factory(
    factory: Callable[[], Executor] | None, pool: RemotePool | None
) -> Callable[[], Executor] | None:
    """A factory whose executors run on the workflow's pool where they can."""
    if factory is None or pool is None:
        return factory
    return lambda: _pooled(factory(), pool)


def _name_of(ref: object) -> str:
    return getattr(ref, "__qualname__", None) or repr(ref)


def _unknown_ids(start: str, edges: list[tuple[str, Edge]], known: dict[str, _Entry]) -> list[str]:
    problems = []
    if start not in known and not start.startswith("<"):
        problems.append(f"start: unknown executor id {start!r}")
    for where, edge in edges:
        for eid in (*edge_sources(edge), *edge_targets(edge)):
            if eid not in known and not eid.startswith("<"):
                problems.append(f"{where}: unknown executor id {eid!r}")  # noqa: PERF401 - clearer as a loop
    return problems


def _handler_problems(known: dict[str, _Entry]) -> dict[str, str]:
    """Executors whose handlers cannot be used, with the problem of each."""
    problems = {}
    for eid, entry in known.items():
        try:
            specs = entry.prototype.handler_specs()
        except TypeError as error:
            problems[eid] = f"executor {eid!r}: {error}"
            continue
        if not specs:
            problems[eid] = f"executor {eid!r} has no handlers (mark methods with @handler)"
    return problems


def _names(types: Sequence[type]) -> str:
    return " | ".join(t.__qualname__ for t in types) or "nothing"


def _type_problems(edges: list[tuple[str, Edge]], known: dict[str, _Entry]) -> list[str]:
    """Edges along which no message type could ever travel (known executors only)."""
    problems = []
    for where, edge in edges:
        if any(e not in known for e in (*edge_sources(edge), *edge_targets(edge))):
            continue  # reported as unknown or broken already
        if isinstance(edge, ErrorEdge):
            continue  # carries no message of the source's (see _error_routes.py)
        if isinstance(edge, HandoffEdge) and edge.require_approval:
            source = known[edge.source].prototype
            if source.find_handler(HandoffRefused) is None:
                problems.append(
                    f"{where}: handoffs that require approval may be refused, and {edge.source!r} "
                    f"has no handler for HandoffRefused"
                )
            continue
        if isinstance(edge, FanInEdge):
            accepted = known[edge.target].prototype.accepted_types()
            if not accepts_any_of(accepted, (list,)):
                problems.append(
                    f"{where}: the fan-in target {edge.target!r} must accept a list, "
                    f"it accepts {_names(accepted)}"
                )
            continue
        sent = known[edge.source].prototype.sent_types()
        if sent is None:
            continue  # the context is not parameterized: trust the author
        for target in edge_targets(edge):
            accepted = known[target].prototype.accepted_types()
            if not accepts_any_of(accepted, sent):
                problems.append(
                    f"{where}: {edge.source!r} sends {_names(sent)}, "
                    f"but {target!r} accepts {_names(accepted)}"
                )
    return problems


def _duplicate_edges(edges: list[tuple[str, Edge]]) -> list[str]:
    problems = []
    seen: set[tuple[str, str, str]] = set()
    for where, edge in edges:
        if isinstance(edge, SwitchEdge | HandoffEdge | ErrorEdge):
            continue
        for source in edge_sources(edge):
            for target in edge_targets(edge):
                key = (type(edge).__name__, source, target)
                if key in seen:
                    problems.append(f"{where}: duplicate edge {source!r} -> {target!r}")
                seen.add(key)
    return problems


def _unreachable(start: str, edges: list[tuple[str, Edge]], known: dict[str, _Entry]) -> list[str]:
    if start not in known:
        return []
    successors: dict[str, set[str]] = {eid: set() for eid in known}
    for _, edge in edges:
        for source in edge_sources(edge):
            if source in successors:
                successors[source].update(t for t in edge_targets(edge) if t in known)
    reached = {start}
    queue = deque([start])
    while queue:
        for nxt in successors[queue.popleft()]:
            if nxt not in reached:
                reached.add(nxt)
                queue.append(nxt)
    return [
        f"executor {eid!r} is unreachable from the start executor {start!r}"
        for eid in known
        if eid not in reached
    ]
