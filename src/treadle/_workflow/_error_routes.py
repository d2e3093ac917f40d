"""Error routes in the builder: ``add_error_edge``, and what ``build()`` checks of them.

An error route is an :class:`ErrorEdge` among the builder's other edges, so
the checks every edge gets (unknown ids, reachability: a handler reached
only through an error route is reachable) cover it too. What is particular
to it is checked here: the handler must take an ``ExecutorFailure``, and an
executor has one error route at most (its failure goes to one place, so
which handler deals with it never depends on declaration order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Self

from treadle._engine._failure import ExecutorFailure
from treadle._graph._edges import ErrorEdge

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._graph._edges import Edge, ExecutorRef
    from treadle._graph._executor import Executor


class ErrorRouting:
    """The builder's ``add_error_edge`` (a base of ``WorkflowBuilder``)."""

    __slots__ = ()

    _edges: list[tuple[str, Edge]]

    if TYPE_CHECKING:

        def _resolve(self, ref: object, where: str) -> str:
            """Register ``ref`` if new; return its id (the builder's own)."""
            ...

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


class _Registered(Protocol):
    """What the builder keeps of an executor (its ``_Entry``)."""

    @property
    def prototype(self) -> Executor:
        """The instance its handlers are read from."""
        ...


def error_route_problems(
    edges: Sequence[tuple[str, Edge]], known: Mapping[str, _Registered]
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
