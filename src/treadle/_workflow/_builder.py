"""The fluent ``WorkflowBuilder``: executors, edges, state and search fields, then ``build()``.

Where the builder takes an executor it takes an instance, an id or a
factory (:mod:`treadle._workflow._executor_set` keeps them, in rank order).
Each call records what it declares and the mistakes it sees; ``build()``
adds the checks of the whole graph (:mod:`treadle._workflow._validation`)
and reports every problem at once, in one :class:`WorkflowValidationError`.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Self

from treadle._engine._clock import SystemClock
from treadle._engine._options import RunSettings
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
)
from treadle._graph._input_policy import InputPolicy
from treadle._graph._limits import workflow_limits
from treadle._stores._store import checked_store
from treadle._values._search_fields import SearchField, SearchFields
from treadle._workflow._executor_set import ExecutorSet
from treadle._workflow._search_declaring import search_field
from treadle._workflow._start_policy import NO_START_POLICY, StartPolicy
from treadle._workflow._validation import graph_problems, name_problems
from treadle._workflow._versions import check_version
from treadle._workflow._workflow import Workflow

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from treadle._engine._clock import Clock
    from treadle._engine._options import Durability
    from treadle._engine._tracing import Tracing
    from treadle._graph._limits import CallLimit
    from treadle._graph._policies import RetryPolicy
    from treadle._graph._remote import RemotePool
    from treadle._stores._store import Store
    from treadle._values._serialization import Serializer


class WorkflowBuilder:
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
        start_policy: How its starts take turns (:class:`StartPolicy`: one run
            per key, its own queue's concurrency, debounce), decided by the
            store; a start may give another (see ``docs/flow-control.md``).
        limits: The call limits its executors name (``CallLimit`` values;
            see ``docs/flow-control.md``), or the names of limits its host
            (a ``Runtime``, ``treadle worker``) declares. A host's
            declaration of a name wins over the workflow's.
        input_policy: What its sessions do with a message sent while a
            turn is running (:class:`InputPolicy`; default ``REJECT``: the
            sender gets ``SessionBusyError``). See ``docs/long-running.md``.
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
        start_policy: StartPolicy | None = None,
        limits: Sequence[CallLimit | str] = (),
        input_policy: InputPolicy = InputPolicy.REJECT,
    ) -> None:
        if not isinstance(input_policy, InputPolicy):
            msg = (
                f"input_policy must be an InputPolicy (InputPolicy.ENQUEUE, "
                f"InputPolicy.debounce(2), ...), got {input_policy!r}"
            )
            raise TypeError(msg)
        self._input_policy = input_policy
        if pool is not None and not callable(getattr(pool, "run", None)):
            msg = f"pool must be an executor pool (such as treadle.dask.DaskPool), got {pool!r}"
            raise TypeError(msg)
        if start_policy is not None and not isinstance(start_policy, StartPolicy):
            msg = f"start_policy must be a StartPolicy, got {start_policy!r}"
            raise TypeError(msg)
        self._start_policy = start_policy or NO_START_POLICY
        self._pool = pool
        self._name = name
        self._version = check_version(version)
        self._store = None if store is None else checked_store(store)
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
        self._limits = tuple(limits)
        self._problems: list[str] = []
        self._executors = ExecutorSet(self._problems)
        self._edges: list[tuple[str, Edge]] = []  # (how it was added, edge)
        self._state: dict[str, StateKey] = {}
        self._search_fields: list[SearchField] = []
        self._start = self._resolve(start, "start")

    # -- executors ----------------------------------------------------------------
    def _resolve(self, ref: object, where: str) -> str:
        """Register ``ref`` if new; return its id (unknown strings stay as is)."""
        return self._executors.resolve(ref, where)

    def add_executor(self, executor: ExecutorRef) -> Self:
        """Register an executor (edges register theirs too; rank is first mention)."""
        self._resolve(executor, "add_executor")
        return self

    def add_workflow(
        self,
        workflow: Workflow,
        *,
        id: str | None = None,  # noqa: A002 - `id` is the contract's name
        outputs: type | tuple[type, ...] | None = None,
    ) -> Self:
        """Add a built workflow as one executor: a sub-workflow.

        It takes what its start executor takes, runs its own supersteps
        inside one invocation, and sends what it outputs along its edges
        here (with no edge from it, its outputs are this workflow's). Its
        requests, timers, progress and events are this run's, named by
        their path (``review/approve``); it is checkpointed with this run.
        Mentioning the workflow object elsewhere in the builder (an edge,
        ``start=``) means this same executor.

        Args:
            workflow: The workflow to run.
            id: Its id here (default: the workflow's name).
            outputs: The classes it outputs, when you want them checked
                against the edges leaving it (at build time) and each
                output against them (at run time).
        """
        chosen = (outputs,) if isinstance(outputs, type) else outputs
        self._executors.add_workflow(workflow, id, chosen)
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

    def add_error_edge(self, source: ExecutorRef, handler: ExecutorRef) -> Self:
        """Send ``source``'s failures to ``handler`` instead of failing the run.

        Once ``source``'s retries are spent, its failure becomes an
        ``ExecutorFailure`` (its id, the error's type, message and
        traceback, the message it was handling) delivered to ``handler`` in
        the next superstep, and the rest of the superstep commits: only the
        failed invocation's own sends, writes and outputs are discarded.
        ``handler`` must have a handler for ``ExecutorFailure``; an executor
        has one error route at most. Timeouts, failures on executor pools
        and messages it has no handler for are failures too; a durable
        wait is not.
        """
        s = self._resolve(source, "add_error_edge")
        h = self._resolve(handler, "add_error_edge")
        self._edges.append((f"add_error_edge({s!r} -> {h!r})", ErrorEdge(s, h)))
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

    def add_search_field(
        self,
        name: str,
        kind: type | str,
        *,
        input: Callable[[Any], Any] | None = None,  # noqa: A002 - the run's input, as users say it
        state: Callable[[Mapping[str, Any]], Any] | None = None,
    ) -> Self:
        """Declare a search field: a typed value of each run, kept in an index filters read.

        Exactly one of ``input`` (a function of the run's input, computed
        once when the run is created) and ``state`` (a function of the
        committed state, computed at every commit; ``None`` unsets the
        field) says where its value comes from. Every commit writes the
        fields in its own transaction, so they never disagree with the
        run. Filters name it ``fields.NAME`` (``treadle runs --where
        'fields.customer == "42"'``; see ``docs/search.md``).

        Args:
            name: Lower-case letters, digits and ``_``.
            kind: ``str``, ``int`` or ``float`` (a number), ``datetime``, ``bool``
                (or ``"text"``, ``"number"``, ``"time"``, ``"bool"``).
            input: The value from the run's input.
            state: The value from the run's committed state (a mapping).
        """
        try:
            field = search_field(name, kind, input, state, self._search_fields)
        except ValueError as problem:
            self._problems.append(f"add_search_field({name!r}): {problem}")
        else:
            self._search_fields.append(field)
        return self

    # -- build ------------------------------------------------------------------------
    def build(self) -> Workflow:
        """Validate and freeze the graph.

        Raises:
            WorkflowValidationError: listing every problem found.
        """
        entries = self._executors.entries
        limits, limit_problems = workflow_limits(
            self._limits, {eid: entry.prototype.limits for eid, entry in entries.items()}
        )
        problems = [
            *self._problems,
            *name_problems(self._name, entries),
            *graph_problems(self._start, self._edges, entries, self._executors.stand_ins),
            *limit_problems,
        ]
        if problems:
            raise WorkflowValidationError(problems)
        return Workflow(
            name=self._name,
            version=self._version,
            start_id=self._start,
            nodes=self._executors.nodes(self._pool),
            edges=[edge for _, edge in self._edges],
            state_specs=self._state,
            defaults=self._defaults,
            store=self._store,
            serializer=self._serializer,
            checkpoint_key=self._checkpoint_key,
            types=self._types,
            search_fields=SearchFields(tuple(self._search_fields)),
            start_policy=self._start_policy,
            limits=limits,
            input_policy=self._input_policy,
        )
