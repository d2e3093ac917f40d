"""Pictures of a workflow graph: Mermaid flowcharts and Graphviz DOT.

Both renderers draw the same picture, laid out once by :func:`layout`:

==============  ==========================================================
graph element   drawn as
==============  ==========================================================
executor        a box labelled with its id
start executor  a rounded box (a stadium in Mermaid) with a bold border
plain edge      a solid arrow
conditional     a dashed arrow labelled ``if`` and its condition's name or text
fan-out         bold arrows through a trapezium labelled ``fan-out`` (or
                ``fan-out (selector)``) to every target
fan-in          bold arrows from every source into an inverted trapezium
                labelled ``fan-in``, and one from it to the target
switch          an arrow into a diamond labelled ``switch``, and from it
                arrows labelled with each case's condition (its name, or
                its text in a definition; ``case 2`` for a lambda) and
                ``default``
handoff         a dotted purple arrow labelled ``handoff`` or
                ``handoff (approval)``
error route     a dashed red arrow labelled ``on error``
sub-workflow    a cluster labelled with its id, holding its own picture;
                arrows to and from it meet the cluster
==============  ==========================================================

``marks`` colours executors by what a run did with them (see :data:`MARKS`).
Executor ids are arbitrary strings, so the picture never uses them as node
names: executors are ``n0``, ``n1``, ... in rank order, and every label is
escaped for its format. The same graph and marks always give the same text,
so pictures can be snapshot-tested. Pure: no I/O.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from treadle._graph._edges import DirectEdge, ErrorEdge, FanInEdge, FanOutEdge, SwitchEdge

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._graph._edges import Edge

MARKS = ("ran", "running", "waiting", "failed")
"""What ``marks`` may say of an executor, in a run's picture."""

NodeKind: TypeAlias = Literal["executor", "start", "fan-out", "fan-in", "switch", "workflow"]
LinkKind: TypeAlias = Literal[
    "plain", "conditional", "fan-out", "fan-in", "switch", "handoff", "error"
]


class Drawable(Protocol):
    """What a picture needs of a workflow (``Workflow`` has all of it)."""

    @property
    def name(self) -> str:
        """The workflow's name, the picture's title."""
        ...

    @property
    def start_id(self) -> str:
        """The executor that receives the run's input."""
        ...

    @property
    def executor_ids(self) -> tuple[str, ...]:
        """Every executor id, in rank order."""
        ...

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge, in the order it was added."""
        ...

    def subgraph_of(self, executor_id: str) -> Drawable | None:
        """The workflow an executor runs as a sub-workflow (``None``: it is not one)."""
        ...


@dataclass(frozen=True, slots=True)
class Node:
    key: str  # the node's name in the picture, never a user string
    label: str
    kind: NodeKind
    mark: str | None = None
    inner: Picture | None = None  # a sub-workflow's own picture, drawn as a cluster


@dataclass(frozen=True, slots=True)
class Link:
    source: str
    target: str
    kind: LinkKind
    label: str | None = None


Picture: TypeAlias = tuple[list[Node], list[Link]]


def flat_links(links: list[Link], nodes: list[Node]) -> list[Link]:
    """Every link of the picture, the clusters' own after the graph's, in a fixed order."""
    every = list(links)
    for node in nodes:
        if node.inner is not None:
            every.extend(flat_links(node.inner[1], node.inner[0]))
    return every


def flat_nodes(nodes: list[Node]) -> list[Node]:
    """Every node of the picture, clusters' included, in a fixed order."""
    every = []
    for node in nodes:
        every.append(node)
        if node.inner is not None:
            every.extend(flat_nodes(node.inner[0]))
    return every


def _check_marks(marks: Mapping[str, str], executor_ids: tuple[str, ...]) -> None:
    known = set(executor_ids)
    problems = []
    strangers = sorted(repr(eid) for eid in marks if eid not in known)
    if strangers:
        problems.append(f"marks name unknown executors: {', '.join(strangers)}")
    kinds = sorted({repr(mark) for mark in marks.values() if mark not in MARKS})
    if kinds:
        allowed = ", ".join(map(repr, MARKS))
        problems.append(f"unknown marks {', '.join(kinds)} (use {allowed})")
    if problems:
        raise ValueError("; ".join(problems))


def layout(graph: Drawable, marks: Mapping[str, str] | None, prefix: str = "") -> Picture:
    """The nodes and links of the picture, in a fixed order.

    A sub-workflow's node holds its own picture, whose keys start with the
    node's key (``n1_n0``), so no two nodes of the whole picture share one.

    Raises:
        ValueError: ``marks`` names an executor the graph lacks, or a mark
            not in :data:`MARKS`.
    """
    marks = marks or {}
    _check_marks(marks, graph.executor_ids)
    key = {eid: f"{prefix}n{rank}" for rank, eid in enumerate(graph.executor_ids)}
    nodes = []
    for eid in graph.executor_ids:
        inner = graph.subgraph_of(eid)
        if inner is not None:
            picture = layout(inner, None, f"{key[eid]}_")
            nodes.append(Node(key[eid], eid, "workflow", marks.get(eid), picture))
        else:
            kind: NodeKind = "start" if eid == graph.start_id else "executor"
            nodes.append(Node(key[eid], eid, kind, marks.get(eid)))
    links: list[Link] = []
    for index, edge in enumerate(graph.edges):
        if isinstance(edge, DirectEdge):
            if edge.condition is None:
                links.append(Link(key[edge.source], key[edge.target], "plain"))
            else:
                named = condition_name(edge.condition)
                label = f"if {named}" if named is not None else "if"
                links.append(Link(key[edge.source], key[edge.target], "conditional", label))
        elif isinstance(edge, FanOutEdge):
            hub = f"fan_out_{index}"
            label = "fan-out" if edge.selector is None else "fan-out (selector)"
            nodes.append(Node(hub, label, "fan-out"))
            links.append(Link(key[edge.source], hub, "fan-out"))
            links.extend(Link(hub, key[target], "fan-out") for target in edge.targets)
        elif isinstance(edge, FanInEdge):
            hub = f"fan_in_{index}"
            nodes.append(Node(hub, "fan-in", "fan-in"))
            links.extend(Link(key[source], hub, "fan-in") for source in edge.sources)
            links.append(Link(hub, key[edge.target], "fan-in"))
        elif isinstance(edge, SwitchEdge):
            hub = f"switch_{index}"
            nodes.append(Node(hub, "switch", "switch"))
            links.append(Link(key[edge.source], hub, "switch"))
            links.extend(
                Link(hub, key[target], "switch", condition_name(condition) or f"case {number}")
                for number, (condition, target) in enumerate(edge.cases, start=1)
            )
            if edge.default is not None:
                links.append(Link(hub, key[edge.default], "switch", "default"))
        elif isinstance(edge, ErrorEdge):
            links.append(Link(key[edge.source], key[edge.target], "error", "on error"))
        else:
            label = "handoff (approval)" if edge.require_approval else "handoff"
            links.extend(
                Link(key[edge.source], key[target], "handoff", label) for target in edge.targets
            )
    return nodes, links


_CONDITION_LABEL = 60
"""Characters of a condition's text a picture shows; a longer one is cut with ``…``."""


def condition_name(condition: Callable[..., Any]) -> str | None:
    """What a picture calls a condition: its text or its name; ``None`` for a lambda.

    A condition that carries its text (``source``: a declarative
    definition's CEL, as written) is labelled with it, a function with its
    name (``is_urgent``); a lambda has neither, and keeps its place
    (``case 2``).
    """
    source = getattr(condition, "source", None)
    name = source if isinstance(source, str) else getattr(condition, "__name__", None)
    if not isinstance(name, str) or not name or name.startswith("<"):
        return None
    name = " ".join(name.split())  # one line, however the definition wrapped it
    return name if len(name) <= _CONDITION_LABEL else name[: _CONDITION_LABEL - 1] + "…"


def visible(text: str) -> str:
    """Control characters spelt out as escapes; a newline stays a line break."""
    return "".join(
        ch if ch == "\n" or unicodedata.category(ch) != "Cc" else repr(ch)[1:-1] for ch in text
    )
