"""The kinds of edge a workflow graph may hold.

Edges are plain frozen values naming executors by id. The builder resolves
user references (instances, ids, factories) into these; the router reads them
to decide where a sent message goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from treadle._graph._executor import Executor
    from treadle._graph._render import Drawable

ExecutorRef: TypeAlias = "Executor | str | Callable[[], Executor] | Drawable"
"""How users name an executor: the instance, its id, or a factory; or a built
workflow (a ``Drawable``), which runs as a sub-workflow."""

Condition: TypeAlias = Callable[[Any], bool]
Selector: TypeAlias = Callable[[Any, Sequence[str]], Iterable[str]]


@dataclass(frozen=True, slots=True)
class Case:
    """A switch case: messages for which ``condition`` is true go to ``target``."""

    condition: Condition
    target: ExecutorRef


@dataclass(frozen=True, slots=True)
class Default:
    """The switch branch taken when no :class:`Case` matched."""

    target: ExecutorRef


@dataclass(frozen=True, slots=True)
class DirectEdge:
    """``source`` → ``target``, taken when ``condition`` (if any) holds."""

    source: str
    target: str
    condition: Condition | None = None


@dataclass(frozen=True, slots=True)
class FanOutEdge:
    """``source`` → every target, or those the ``selector`` picks."""

    source: str
    targets: tuple[str, ...]
    selector: Selector | None = None


@dataclass(frozen=True, slots=True)
class FanInEdge:
    """Every source → ``target``, delivered as one list once each has sent."""

    sources: tuple[str, ...]
    target: str


@dataclass(frozen=True, slots=True)
class SwitchEdge:
    """``source`` → the target of the first matching case, else the default."""

    source: str
    cases: tuple[tuple[Condition, str], ...]
    default: str | None


@dataclass(frozen=True, slots=True)
class HandoffEdge:
    """Executors ``source`` may hand control to with ``ctx.handoff``.

    With ``require_approval`` each handoff waits as a request until someone
    approves it (then it is delivered) or refuses it (then the source gets a
    ``HandoffRefused`` message).
    """

    source: str
    targets: tuple[str, ...]
    require_approval: bool = False


@dataclass(frozen=True, slots=True)
class ErrorEdge:
    """``source``'s failures, once its retries are spent, go to ``target``.

    Not a path for messages the source sends: ``target`` receives only the
    ``ExecutorFailure`` that replaces a failed invocation's outcome.
    """

    source: str
    target: str


Edge: TypeAlias = DirectEdge | FanOutEdge | FanInEdge | SwitchEdge | HandoffEdge | ErrorEdge


def edge_sources(edge: Edge) -> tuple[str, ...]:
    """The executors a message may leave from along this edge."""
    if isinstance(edge, FanInEdge):
        return edge.sources
    return (edge.source,)


def edge_targets(edge: Edge) -> tuple[str, ...]:
    """The executors a message may arrive at along this edge."""
    if isinstance(edge, DirectEdge | FanInEdge | ErrorEdge):
        return (edge.target,)
    if isinstance(edge, FanOutEdge | HandoffEdge):
        return edge.targets
    targets = tuple(t for _, t in edge.cases)
    return (*targets, edge.default) if edge.default is not None else targets
