"""Where a sent message goes: pure routing over the graph's edges.

No asyncio and no I/O here. The router is built once per workflow and caches,
per (source, message class), the edges whose targets can handle that class,
so the per-message work on the hot path is a dict lookup plus any user
conditions.

Edges are type-filtered: a message only travels along edges whose target has
a handler for its class. A message that no edge can carry at all is a bug in
the graph and raises :class:`RoutingError` in the sending handler, where the
traceback points at the send.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from treadle._exceptions import RoutingError
from treadle._graph._edges import (
    Condition,
    DirectEdge,
    Edge,
    ErrorEdge,
    FanInEdge,
    FanOutEdge,
    HandoffEdge,
    Selector,
    SwitchEdge,
    edge_targets,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

Delivery: TypeAlias = tuple[str, int]
"""(target id, fan-in index or -1 for a direct delivery)."""

NOT_FAN_IN = -1


@dataclass(frozen=True, slots=True)
class Always:
    """Deliveries that do not depend on the message (direct edges, fan-ins, plain fan-outs)."""

    deliveries: tuple[Delivery, ...]


@dataclass(frozen=True, slots=True)
class When:
    """A conditional direct edge: delivers to ``target`` when ``condition(message)``."""

    condition: Condition
    target: str


@dataclass(frozen=True, slots=True)
class FanOutTo:
    """A fan-out: its targets that accept the class, narrowed by ``selector`` if any."""

    targets: tuple[str, ...]
    selector: Selector | None


@dataclass(frozen=True, slots=True)
class FanInTo:
    """One source of a fan-in: into buffer ``index`` of ``target``."""

    target: str
    index: int


@dataclass(frozen=True, slots=True)
class SwitchTo:
    """A switch: the first case whose condition holds, else ``default`` (if any)."""

    cases: tuple[tuple[Condition, str], ...]
    default: str | None


Route: TypeAlias = Always | When | FanOutTo | FanInTo | SwitchTo
"""One compiled edge (or several folded together) for a (source, message class)."""


@dataclass(frozen=True, slots=True)
class Routes:
    """The compiled routes of a (source, message class) whose deliveries depend on the message."""

    routes: tuple[Route, ...]


class Router:
    """Routes messages along a workflow's edges.

    Args:
        edges: Every edge of the graph.
        can_handle: ``can_handle(target_id, cls)`` tells whether the target
            has a handler for messages of class ``cls``.
    """

    __slots__ = (
        "_approvals",
        "_by_source",
        "_can_handle",
        "_compiled",
        "_error_routes",
        "_fan_ins",
        "_handoffs",
        "_neighbours",
    )

    def __init__(self, edges: Sequence[Edge], can_handle: Callable[[str, type], bool]) -> None:
        self._can_handle = can_handle
        self._by_source: dict[str, list[Edge]] = {}
        self._handoffs: dict[str, frozenset[str]] = {}
        self._approvals: set[tuple[str, str]] = set()
        self._neighbours: dict[str, dict[str, int]] = {}
        self._error_routes: dict[str, str] = {}
        fan_ins: list[FanInEdge] = []
        for edge in edges:
            if isinstance(edge, ErrorEdge):  # carries no message the source sends
                self._error_routes[edge.source] = edge.target
                continue
            if isinstance(edge, HandoffEdge):
                known = self._handoffs.get(edge.source, frozenset())
                self._handoffs[edge.source] = known | frozenset(edge.targets)
                if edge.require_approval:
                    self._approvals.update((edge.source, t) for t in edge.targets)
                continue
            if isinstance(edge, FanInEdge):
                index = len(fan_ins)
                fan_ins.append(edge)
                for source in edge.sources:
                    self._by_source.setdefault(source, []).append(edge)
                    self._neighbours.setdefault(source, {})[edge.target] = index
                continue
            self._by_source.setdefault(edge.source, []).append(edge)
            for target in edge_targets(edge):
                self._neighbours.setdefault(edge.source, {}).setdefault(target, NOT_FAN_IN)
        self._fan_ins: tuple[FanInEdge, ...] = tuple(fan_ins)
        # Compiled per (source, message class): the deliveries themselves when
        # nothing depends on the message (a tuple), else the routes to follow.
        self._compiled: dict[tuple[str, type], tuple[Delivery, ...] | Routes] = {}

    def has_edges_from(self, source: str) -> bool:
        """Whether any edge (other than a handoff) leaves ``source``."""
        return source in self._by_source

    @property
    def error_routes(self) -> Mapping[str, str]:
        """Executor id → the handler its failures go to (``add_error_edge``)."""
        return self._error_routes

    @property
    def fan_ins(self) -> tuple[FanInEdge, ...]:
        """The fan-in edges, in the order their buffers are indexed."""
        return self._fan_ins

    def route(self, source: str, message: Any, target: str | None = None) -> Sequence[Delivery]:
        """The deliveries of one message sent by ``source``.

        Args:
            source: The sending executor's id.
            message: The message; its class selects the edges.
            target: When given, deliver only to this neighbour, bypassing
                conditions, selectors and switch cases (the sender decided).

        Raises:
            RoutingError: No edge from ``source`` can carry the message.
        """
        if target is not None:
            return [self._explicit(source, type(message), target)]
        compiled = self._compiled.get((source, type(message)))
        if compiled is None:
            compiled = self._compile(source, type(message))
        if isinstance(compiled, tuple):  # static: compiled once and never mutated, no copy
            return compiled
        deliveries: list[Delivery] = []
        for route in compiled.routes:
            # Class patterns without sub-patterns: attributes read directly cost less.
            match route:
                case When():
                    if route.condition(message):
                        deliveries.append((route.target, NOT_FAN_IN))
                case SwitchTo():
                    cases, default = route.cases, route.default
                    chosen = next((t for condition, t in cases if condition(message)), default)
                    if chosen is not None:
                        deliveries.append((chosen, NOT_FAN_IN))
                case FanOutTo():
                    deliveries.extend(_select(source, route.targets, route.selector, message))
                case FanInTo():
                    deliveries.append((route.target, route.index))
                case Always():
                    deliveries.extend(route.deliveries)
        return deliveries

    def handoff(self, source: str, target: str, message: Any) -> Delivery:
        """The delivery of a handoff, checked against the declared handoffs."""
        if target not in self._handoffs.get(source, frozenset()):
            msg = (
                f"executor {source!r} may not hand off to {target!r}: declare it with "
                f"builder.add_handoff({source!r}, [{target!r}, ...])"
            )
            raise RoutingError(msg)
        self._require_handler(source, target, type(message))
        return (target, NOT_FAN_IN)

    def needs_approval(self, source: str, target: str) -> bool:
        """Whether a handoff from ``source`` to ``target`` waits for approval."""
        return (source, target) in self._approvals

    def _explicit(self, source: str, cls: type, target: str) -> Delivery:
        fan_in = self._neighbours.get(source, {}).get(target)
        if fan_in is None:
            msg = f"executor {source!r} sent a message to {target!r}, but no edge connects them"
            raise RoutingError(msg)
        if fan_in == NOT_FAN_IN:
            self._require_handler(source, target, cls)
        return (target, fan_in)

    def _require_handler(self, source: str, target: str, cls: type) -> None:
        if not self._can_handle(target, cls):
            msg = (
                f"executor {source!r} sent a {cls.__qualname__} to {target!r}, "
                f"which has no handler for it"
            )
            raise RoutingError(msg)

    def _compile(self, source: str, cls: type) -> tuple[Delivery, ...] | Routes:
        """Compile (and keep) the routes of ``cls`` from ``source``.

        Raises:
            RoutingError: no edge from ``source`` leads to an executor accepting ``cls``.
        """
        ok = self._can_handle
        routes: list[Route] = []
        always: list[Delivery] = []
        for edge in self._by_source.get(source, ()):
            if isinstance(edge, DirectEdge):
                if not ok(edge.target, cls):
                    continue
                if edge.condition is None:
                    always.append((edge.target, NOT_FAN_IN))
                else:
                    routes.append(When(edge.condition, edge.target))
            elif isinstance(edge, FanInEdge):
                routes.append(FanInTo(edge.target, self._fan_ins.index(edge)))
            elif isinstance(edge, FanOutEdge):
                targets = tuple(t for t in edge.targets if ok(t, cls))
                if targets:
                    routes.append(FanOutTo(targets, edge.selector))
            elif isinstance(edge, SwitchEdge):
                cases = tuple((c, t) for c, t in edge.cases if ok(t, cls))
                default = (
                    edge.default if edge.default is not None and ok(edge.default, cls) else None
                )
                if cases or default is not None:
                    routes.append(SwitchTo(cases, default))
        if always:
            routes.insert(0, Always(tuple(always)))
        if not routes:
            msg = (
                f"executor {source!r} sent a {cls.__qualname__}, but no edge from {source!r} "
                f"leads to an executor that accepts it"
            )
            raise RoutingError(msg)
        fixed = [_static_deliveries(route) for route in routes]
        compiled: tuple[Delivery, ...] | Routes
        if all(deliveries is not None for deliveries in fixed):
            # Nothing depends on the message: deliver one precomputed tuple, in route order.
            compiled = tuple(
                d for deliveries in fixed if deliveries is not None for d in deliveries
            )
        else:
            compiled = Routes(tuple(routes))
        self._compiled[(source, cls)] = compiled
        return compiled


def _static_deliveries(route: Route) -> tuple[Delivery, ...] | None:
    """What ``route`` delivers whatever the message, or ``None`` if that depends on it."""
    match route:
        case Always(deliveries):
            return deliveries
        case FanInTo(target, index):
            return ((target, index),)
        case FanOutTo(targets, None):
            return tuple((t, NOT_FAN_IN) for t in targets)
        case _:
            return None


def _select(
    source: str, targets: tuple[str, ...], selector: Selector | None, message: Any
) -> list[Delivery]:
    if selector is None:
        return [(t, NOT_FAN_IN) for t in targets]
    chosen = list(selector(message, targets))
    unknown = [t for t in chosen if t not in targets]
    if unknown:
        msg = (
            f"the fan-out selector of {source!r} chose {unknown!r}, which are not among "
            f"its targets that accept this message: {list(targets)!r}"
        )
        raise RoutingError(msg)
    # Deliver in the edge's declared order whatever order the selector used.
    picked = set(chosen)
    return [(t, NOT_FAN_IN) for t in targets if t in picked]
