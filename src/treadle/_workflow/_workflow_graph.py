"""What a workflow *is*: its validated graph, and everything derived from it.

``WorkflowGraph`` holds the executors, edges, ranks and router, and what
durability derives from them (the description and fingerprint, the type
allowlist, the checkpoint codec); it draws itself. ``Workflow`` (in
``_workflow.py``) adds how to run it. The split keeps each module to one
concern; users only ever see ``Workflow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._checkpoints._codec import CheckpointCodec
from treadle._checkpoints._graph_description import (
    describe_graph,
    encode_description,
    fingerprint,
)
from treadle._engine._answers import (
    asker_of,
    response_type_name,
    response_type_of,
    validate_response,
)
from treadle._engine._delivery import HandoffRefused
from treadle._engine._failure import ExecutorFailure
from treadle._engine._later import ScheduledHandle
from treadle._engine._options import DEFAULT_OPTIONS
from treadle._engine._pool import ExecutorNode, ExecutorPool, InstanceClaims
from treadle._engine._routing import Router
from treadle._engine._spawn import SpawnResult
from treadle._exceptions import InvalidResponseError
from treadle._graph._cycles import cycle_members
from treadle._graph._input_policy import InputPolicy
from treadle._graph._limits import NO_LIMITS, WorkflowLimits
from treadle._stores._store import checked_store
from treadle._values._registry import TypeRegistry
from treadle._values._search_fields import NO_SEARCH_FIELDS
from treadle._values._serialization import JsonSerializer
from treadle._workflow._limit_board import LimitBoard
from treadle._workflow._start_policy import NO_START_POLICY

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from treadle._engine._options import RunOptions, RunSettings
    from treadle._engine._state import StateKey
    from treadle._engine._waits import Waiting
    from treadle._graph._edges import Edge
    from treadle._graph._executor import Executor
    from treadle._graph._limits import CallLimit
    from treadle._stores._store import Store
    from treadle._values._search_fields import SearchFields
    from treadle._values._serialization import Serializer
    from treadle._workflow._start_policy import StartPolicy


class WorkflowGraph:
    """A validated, immutable graph of executors (the base of ``Workflow``)."""

    def __init__(
        self,
        *,
        name: str,
        start_id: str,
        version: int = 1,
        nodes: Sequence[ExecutorNode],
        edges: Sequence[Edge],
        state_specs: Mapping[str, StateKey],
        defaults: RunSettings,
        store: Store | None = None,
        serializer: Serializer | None = None,
        checkpoint_key: bytes | None = None,
        types: Sequence[type] = (),
        search_fields: SearchFields = NO_SEARCH_FIELDS,
        start_policy: StartPolicy = NO_START_POLICY,
        limits: WorkflowLimits = NO_LIMITS,
        input_policy: InputPolicy = InputPolicy.REJECT,
    ) -> None:
        self.name = name
        # What its sessions do with a message sent while a turn runs.
        self.input_policy = input_policy
        self.version = version
        self.start_id = start_id
        self.edges: tuple[Edge, ...] = tuple(edges)
        self.state_specs: Mapping[str, StateKey] = dict(state_specs)
        self.defaults = defaults
        self._nodes = {node.id: node for node in nodes}
        self.ranks: Mapping[str, int] = {node.id: node.rank for node in nodes}
        self.router = Router(self.edges, self._can_handle)
        self._loops = cycle_members(self.ranks, self.edges)
        self._claims = InstanceClaims(
            n.id for n in nodes if n.factory is None and not n.prototype.shareable
        )
        # What each run's pool is made from, sorted out once (see ExecutorPool).
        self._pool_parts = ExecutorPool.parts(nodes)
        self.store = store
        self._serializer = serializer
        self._checkpoint_key = checkpoint_key
        self._types = tuple(types)
        self.search_fields = search_fields
        self.start_policy = start_policy
        self.limits = limits
        # Its runs driven by nobody's driver share these counts (a driver has its own).
        self.own_limits = LimitBoard(limits.declared.values())
        self._nested = tuple(
            (node.id, inner)
            for node in nodes
            if isinstance(inner := getattr(node.prototype, "subgraph", None), WorkflowGraph)
        )
        # Whether a sub-workflow (at any depth) names a call limit: its runs then need a scope.
        self.nests_limits: bool = any(
            inner.limits.by_executor or inner.nests_limits for _, inner in self._nested
        )
        self._description: dict[str, Any] | None = None
        self._stored_description: bytes | None = None
        self._fingerprint: str | None = None
        self._codec: CheckpointCodec | None = None
        self._registry: TypeRegistry | None = None
        self._origin: str | None = None
        self._plain_settings: dict[bool, RunSettings] = {}
        # The settings last made from other options, with those options (see settings).
        self._last_settings: tuple[RunOptions, bool, RunSettings] | None = None

    def __repr__(self) -> str:
        shape = f"{len(self._nodes)} executors, start {self.start_id!r}"
        return f"<Workflow {self.name!r} v{self.version}: {shape}>"

    @property
    def executor_ids(self) -> tuple[str, ...]:
        """Every executor id, in rank (definition) order."""
        return tuple(self._nodes)

    def subgraph_of(self, executor_id: str) -> WorkflowGraph | None:
        """The workflow an executor runs as a sub-workflow (``None``: it is not one)."""
        inner = getattr(self._nodes[executor_id].prototype, "subgraph", None)
        return inner if isinstance(inner, WorkflowGraph) else None

    def limit_problems(self, host: Mapping[str, CallLimit]) -> list[str]:
        """Each limit an executor here or in a sub-workflow names that nobody declares.

        ``host``: what the run's driver declares. A sub-workflow's names are
        resolved in what encloses it too (``_engine/_limit_scope.py``); its
        problems are named by its path.
        """
        problems = self.limits.missing(host)
        if self.nests_limits:
            enclosing = {**self.limits.declared, **host}
            for executor_id, inner in self._nested:
                problems.extend(
                    f"sub-workflow {executor_id!r}: {problem}"
                    for problem in inner.limit_problems(enclosing)
                )
        return problems

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

    @property
    def origin(self) -> str | None:
        """Where the workflow was imported from (``pkg.module:attr``), when known.

        Stored with each run so tools (the CLI, workers) can load the workflow
        that wrote it; not part of the fingerprint.
        """
        return self._origin

    @origin.setter
    def origin(self, value: str | None) -> None:
        self._origin = value
        self._description = None  # the stored description carries it
        self._stored_description = None

    # -- durability configuration ------------------------------------------------
    @property
    def description(self) -> dict[str, Any]:
        """The routing-relevant shape of this graph, as plain data."""
        if self._description is None:
            self._description = describe_graph(self)
        return self._description

    @property
    def stored_description(self) -> bytes:
        """:attr:`description` as a run's row stores it: encoded once, not once per run."""
        if self._stored_description is None:
            self._stored_description = encode_description(self.description)
        return self._stored_description

    @property
    def fingerprint(self) -> str:
        """A stable hash of :attr:`description`; checkpoints carry it."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.description)
        return self._fingerprint

    @property
    def type_registry(self) -> TypeRegistry:
        """The allowlist: classes named by handler annotations, plus registered ones."""
        if self._registry is None:
            registry = TypeRegistry()
            for node in self._nodes.values():
                for spec in node.prototype.handler_specs():
                    for annotation in spec.annotations:
                        registry.register_annotation(annotation)
                inner = getattr(node.prototype, "subgraph", None)  # a SubWorkflow's workflow
                if isinstance(inner, WorkflowGraph):
                    registry.include(inner.type_registry)
            # Fixed names, as stored before these classes moved: checkpoints
            # written by earlier versions still load, and later moves are free.
            registry.register(SpawnResult, "treadle._runtime._spawn.SpawnResult")
            registry.register(HandoffRefused, "treadle._runtime._delivery.HandoffRefused")
            registry.register(ExecutorFailure, "treadle.ExecutorFailure")
            registry.register(ScheduledHandle, "treadle.ScheduledHandle")  # kept in state
            for cls in self._types:
                registry.register(cls)
            self._registry = registry
        return self._registry

    @property
    def codec(self) -> CheckpointCodec:
        """Encodes this workflow's checkpoints, with its type allowlist."""
        if self._codec is None:
            serializer = self._serializer or JsonSerializer(self.type_registry)
            self._codec = CheckpointCodec(serializer, self._checkpoint_key)
        return self._codec

    @property
    def serializer(self) -> Serializer:
        """How this workflow turns values into bytes (checkpoints, clients' inbox items)."""
        return self._serializer or self.codec.serializer

    def response_type_name(self, cls: type) -> str:
        """The stored name of a ``ctx.request`` response type (see ``_answers``)."""
        return response_type_name(self.type_registry, cls)

    def validate_response(self, request_id: str, type_name: str | None, value: Any) -> Any:
        """An answer checked against the type its request asked for."""
        return validate_response(self.type_registry, request_id, type_name, value)

    def check_answer(self, request_id: str, waiting: Waiting, value: Any) -> Any:
        """An answer checked against its type, then by the executor that asked.

        The one check of every answer, wherever it arrives (``respond``, a
        client, the command line, the HTTP API) and again when the run
        applies it.

        Raises:
            InvalidResponseError: It does not fit, naming each field at fault.
        """
        type_name = response_type_of(waiting)
        checked = validate_response(self.type_registry, request_id, type_name, value)
        asker = asker_of(waiting)
        if asker is not None and asker[0] in self._nodes:
            executor_id, question = asker
            problems = self.prototype(executor_id).answer_problems(question, checked)
            if problems:
                msg = f"request {request_id!r} expects {type_name}: {'; '.join(problems)}"
                raise InvalidResponseError(msg)
        return checked

    def store_for(self, store: Store | None) -> Store:
        """The store a runner method uses: the one given, else the workflow's."""
        chosen = store if store is not None else self.store
        if chosen is None:
            msg = (
                f"workflow {self.name!r} has no store: pass store=... or build it with "
                f"WorkflowBuilder(..., store=SqliteStore(path))"
            )
            raise ValueError(msg)
        return checked_store(chosen)

    # -- running ---------------------------------------------------------------
    def settings(self, options: RunOptions, *, sleep_through_timers: bool) -> RunSettings:
        """What a run runs with: the workflow's defaults with ``options`` over them.

        Runs opened without options (most of them) share one value per
        ``sleep_through_timers``: settings are immutable, and building them,
        checks included, costs a small run as much as a superstep.
        """
        if options is not DEFAULT_OPTIONS:
            # A service continues every run it wakes with one options value, and a caller
            # passing the same keywords to each run makes equal ones: their runs share
            # the settings made for the first. The clock and the metrics must be the
            # very same objects, not equal ones: a clock equal now may differ later.
            last = self._last_settings
            if last is not None and last[1] is sleep_through_timers:
                seen = last[0]
                if seen is options or (
                    seen.clock is options.clock
                    and seen.metrics is options.metrics
                    and seen == options
                ):
                    return last[2]
            made = self.defaults.with_options(options, sleep_through_timers=sleep_through_timers)
            self._last_settings = (options, sleep_through_timers, made)
            return made
        plain = self._plain_settings.get(sleep_through_timers)
        if plain is None:
            plain = self._plain_settings[sleep_through_timers] = self.defaults.with_options(
                options, sleep_through_timers=sleep_through_timers
            )
        return plain

    def claim(self, run_id: str) -> tuple[ExecutorPool, Callable[[], None]]:
        """The executor instances of a new run, and how to release them.

        Raises:
            ExecutorInUseError: a non-shareable instance serves another run.
        """
        release = self._claims.claim(run_id)
        return ExecutorPool(*self._pool_parts), release

    # -- pictures -------------------------------------------------------------------
    def to_mermaid(self, *, marks: Mapping[str, str] | None = None) -> str:
        """The graph as a Mermaid flowchart, each edge kind drawn its own way.

        Args:
            marks: Executor id → ``"ran"``, ``"running"``, ``"waiting"`` or
                ``"failed"``, to colour the executors of a run.

        Raises:
            ValueError: ``marks`` names an unknown executor or mark.
        """
        from treadle._graph._mermaid import render_mermaid  # noqa: PLC0415 - only pictures need it

        return render_mermaid(self, marks)

    def to_dot(self, *, marks: Mapping[str, str] | None = None) -> str:
        """The graph as a Graphviz ``digraph``; the same picture as :meth:`to_mermaid`.

        Args:
            marks: Executor id → ``"ran"``, ``"running"``, ``"waiting"`` or
                ``"failed"``, to colour the executors of a run.

        Raises:
            ValueError: ``marks`` names an unknown executor or mark.
        """
        from treadle._graph._dot import render_dot  # noqa: PLC0415 - only pictures need it

        return render_dot(self, marks)
