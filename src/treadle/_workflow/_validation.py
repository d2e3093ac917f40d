"""What ``build()`` checks of a graph, every problem at once.

Mistakes are collected rather than raised one at a time: ``build()``
reports every problem it finds in one :class:`WorkflowValidationError`. An
edge naming an executor nobody registered; an executor without usable
handlers; an edge along which no message type could travel; a duplicate
edge; an executor the start cannot reach. An error route is an
:class:`ErrorEdge` among the other edges, so those checks cover it too
(a handler reached only through an error route is reachable); what is
particular to it is checked here as well: its handler must take an
``ExecutorFailure``, and an executor has one error route at most (its
failure goes to one place, so which handler deals with it never depends
on declaration order).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from treadle._engine._delivery import HandoffRefused
from treadle._engine._failure import ExecutorFailure
from treadle._graph._edges import (
    Edge,
    ErrorEdge,
    FanInEdge,
    HandoffEdge,
    SwitchEdge,
    edge_sources,
    edge_targets,
)
from treadle._graph._typing import accepts_any_of
from treadle._values._text import unstorable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from collections.abc import Set as AbstractSet

    from treadle._workflow._executor_set import Entry


def graph_problems(
    start: str,
    edges: Sequence[tuple[str, Edge]],
    known: Mapping[str, Entry],
    stand_ins: AbstractSet[str] = frozenset(),
) -> list[str]:
    """Every problem of the graph from ``start`` along ``edges`` (each with where it was added).

    ``stand_ins``: ids that stand for refs already reported as no executor.
    """
    problems = _unknown_ids(start, edges, known, stand_ins)
    broken = _handler_problems(known)
    problems.extend(broken.values())
    sound = {eid: entry for eid, entry in known.items() if eid not in broken}
    problems.extend(_type_problems(edges, sound))
    problems.extend(_error_route_problems(edges, sound))
    problems.extend(_duplicate_edges(edges))
    problems.extend(_missing_edges(edges, sound))
    problems.extend(_unreachable(start, edges, known))
    return problems


def _missing_edges(edges: Sequence[tuple[str, Edge]], known: Mapping[str, Entry]) -> list[str]:
    """Edges an executor needs (``Executor.needed_edges``) that the graph does not have."""
    present = {(s, t) for _, edge in edges for s in edge_sources(edge) for t in edge_targets(edge)}
    return [
        f"executor {eid!r} sends to {target!r}: add builder.add_edge({eid!r}, {target!r})"
        for eid, entry in known.items()
        for target in entry.prototype.needed_edges()
        if (eid, target) not in present
    ]


def name_problems(name: str, executor_ids: Iterable[str]) -> list[str]:
    """The workflow's name and executor ids a store could not keep (see ``_values/_text``)."""
    named = [("the workflow's name", name)] + [("executor id", eid) for eid in executor_ids]
    found = (unstorable(what, text) for what, text in named if isinstance(text, str))
    return [problem for problem in found if problem is not None]


def _unknown_ids(
    start: str,
    edges: Sequence[tuple[str, Edge]],
    known: Mapping[str, Entry],
    stand_ins: AbstractSet[str],
) -> list[str]:
    problems = []
    if start not in known and start not in stand_ins:
        problems.append(f"start: unknown executor id {start!r}")
    for where, edge in edges:
        for eid in (*edge_sources(edge), *edge_targets(edge)):
            if eid not in known and eid not in stand_ins:
                problems.append(f"{where}: unknown executor id {eid!r}")  # noqa: PERF401 - clearer as a loop
    return problems


def _handler_problems(known: Mapping[str, Entry]) -> dict[str, str]:
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


def _type_problems(edges: Sequence[tuple[str, Edge]], known: Mapping[str, Entry]) -> list[str]:
    """Edges along which no message type could ever travel (known executors only)."""
    problems = []
    for where, edge in edges:
        if any(e not in known for e in (*edge_sources(edge), *edge_targets(edge))):
            continue  # reported as unknown or broken already
        if isinstance(edge, ErrorEdge):
            continue  # carries no message of the source's (see _error_route_problems)
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


def _duplicate_edges(edges: Sequence[tuple[str, Edge]]) -> list[str]:
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


def _unreachable(
    start: str, edges: Sequence[tuple[str, Edge]], known: Mapping[str, Entry]
) -> list[str]:
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


def _error_route_problems(
    edges: Sequence[tuple[str, Edge]], known: Mapping[str, Entry]
) -> list[str]:
    """The problems of the error routes among ``edges`` (between ``known`` executors only).

    Unknown or broken executors are reported by the builder's other checks.
    """
    problems = []
    routes: dict[str, str] = {}
    for where, edge in edges:
        if not isinstance(edge, ErrorEdge):
            continue
        first = routes.get(edge.source)
        if first is None:
            routes[edge.source] = edge.target
        else:
            problems.append(
                f"{where}: {edge.source!r} already has an error route, to {first!r}; "
                f"an executor's failures go to one handler"
            )
        entry = known.get(edge.target)
        if entry is not None and entry.prototype.find_handler(ExecutorFailure) is None:
            problems.append(
                f"{where}: {edge.target!r} has no handler for ExecutorFailure, "
                f"which the error route of {edge.source!r} delivers"
            )
    return problems
