"""Pictures of a workflow graph: Mermaid flowcharts and Graphviz DOT.

Both renderers draw the same picture, laid out once by :func:`_layout`:

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

import json
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from treadle._graph._edges import DirectEdge, ErrorEdge, FanInEdge, FanOutEdge, SwitchEdge

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._graph._edges import Edge

MARKS = ("ran", "running", "waiting", "failed")
"""What ``marks`` may say of an executor, in a run's picture."""

_NodeKind: TypeAlias = Literal["executor", "start", "fan-out", "fan-in", "switch", "workflow"]
_LinkKind: TypeAlias = Literal[
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
class _Node:
    key: str  # the node's name in the picture, never a user string
    label: str
    kind: _NodeKind
    mark: str | None = None
    inner: _Picture | None = None  # a sub-workflow's own picture, drawn as a cluster


@dataclass(frozen=True, slots=True)
class _Link:
    source: str
    target: str
    kind: _LinkKind
    label: str | None = None


_Picture: TypeAlias = tuple[list[_Node], list[_Link]]


def _flat_links(links: list[_Link], nodes: list[_Node]) -> list[_Link]:
    """Every link of the picture, the clusters' own after the graph's, in a fixed order."""
    every = list(links)
    for node in nodes:
        if node.inner is not None:
            every.extend(_flat_links(node.inner[1], node.inner[0]))
    return every


def _flat_nodes(nodes: list[_Node]) -> list[_Node]:
    """Every node of the picture, clusters' included, in a fixed order."""
    every = []
    for node in nodes:
        every.append(node)
        if node.inner is not None:
            every.extend(_flat_nodes(node.inner[0]))
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


def _layout(graph: Drawable, marks: Mapping[str, str] | None, prefix: str = "") -> _Picture:
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
            picture = _layout(inner, None, f"{key[eid]}_")
            nodes.append(_Node(key[eid], eid, "workflow", marks.get(eid), picture))
        else:
            kind: _NodeKind = "start" if eid == graph.start_id else "executor"
            nodes.append(_Node(key[eid], eid, kind, marks.get(eid)))
    links: list[_Link] = []
    for index, edge in enumerate(graph.edges):
        if isinstance(edge, DirectEdge):
            if edge.condition is None:
                links.append(_Link(key[edge.source], key[edge.target], "plain"))
            else:
                named = condition_name(edge.condition)
                label = f"if {named}" if named is not None else "if"
                links.append(_Link(key[edge.source], key[edge.target], "conditional", label))
        elif isinstance(edge, FanOutEdge):
            hub = f"fan_out_{index}"
            label = "fan-out" if edge.selector is None else "fan-out (selector)"
            nodes.append(_Node(hub, label, "fan-out"))
            links.append(_Link(key[edge.source], hub, "fan-out"))
            links.extend(_Link(hub, key[target], "fan-out") for target in edge.targets)
        elif isinstance(edge, FanInEdge):
            hub = f"fan_in_{index}"
            nodes.append(_Node(hub, "fan-in", "fan-in"))
            links.extend(_Link(key[source], hub, "fan-in") for source in edge.sources)
            links.append(_Link(hub, key[edge.target], "fan-in"))
        elif isinstance(edge, SwitchEdge):
            hub = f"switch_{index}"
            nodes.append(_Node(hub, "switch", "switch"))
            links.append(_Link(key[edge.source], hub, "switch"))
            links.extend(
                _Link(hub, key[target], "switch", condition_name(condition) or f"case {number}")
                for number, (condition, target) in enumerate(edge.cases, start=1)
            )
            if edge.default is not None:
                links.append(_Link(hub, key[edge.default], "switch", "default"))
        elif isinstance(edge, ErrorEdge):
            links.append(_Link(key[edge.source], key[edge.target], "error", "on error"))
        else:
            label = "handoff (approval)" if edge.require_approval else "handoff"
            links.extend(
                _Link(key[edge.source], key[target], "handoff", label) for target in edge.targets
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


def _visible(text: str) -> str:
    """Control characters spelt out as escapes; a newline stays a line break."""
    return "".join(
        ch if ch == "\n" or unicodedata.category(ch) != "Cc" else repr(ch)[1:-1] for ch in text
    )


# -- Mermaid ------------------------------------------------------------------------

_MERMAID_PLAIN = frozenset(" -_.,/()'!?+=")
"""Punctuation that stands for itself inside a quoted Mermaid label.

Not ``:``: Mermaid drops the last ``;`` of any line that has ``style`` then
``:`` then ``#`` (it takes the line for a style statement), and every other
character comes out as ``#code;``.
"""

_MERMAID_SHAPES: dict[_NodeKind, tuple[str, str]] = {
    "executor": ('["', '"]'),
    "start": ('(["', '"])'),
    "fan-out": ('[/"', '"\\]'),
    "fan-in": ('[\\"', '"/]'),
    "switch": ('{"', '"}'),
}

_MERMAID_ARROWS: dict[_LinkKind, str] = {
    "plain": "-->",
    "conditional": "-.->",
    "fan-out": "==>",
    "fan-in": "==>",
    "switch": "-->",
    "handoff": "-.->",
    "error": "-.->",
}

# Mermaid has one broken-line arrow; these tell a condition, a handoff and an error route apart.
_MERMAID_LINK_STYLES: dict[_LinkKind, str] = {
    "conditional": "stroke-dasharray: 8 4",
    "handoff": "stroke:#7b1fa2,stroke-dasharray: 2 3",
    "error": "stroke:#c62828,stroke-dasharray: 6 3",
}

_MERMAID_CLASSES = {
    "hub": "fill:#eeeeee,stroke:#888888,color:#333333",
    "start": "stroke-width:3px",
    "ran": "fill:#d4edda,stroke:#2e7d32,color:#1b5e20",
    "running": "fill:#d0e4ff,stroke:#1565c0,color:#0d47a1,stroke-width:3px",
    "waiting": "fill:#fff3cd,stroke:#b58900,color:#6d4c00,stroke-dasharray: 5 3",
    "failed": "fill:#f8d7da,stroke:#c62828,color:#b71c1c,stroke-width:3px",
}


def _mermaid_text(text: str) -> str:
    """``text`` as the inside of a quoted Mermaid label: anything unusual as ``#code;``."""
    parts = []
    for ch in _visible(text):
        if ch == "\n":
            parts.append("<br>")
        elif ch.isalnum() or ch in _MERMAID_PLAIN:
            parts.append(ch)
        else:
            parts.append(f"#{ord(ch)};")
    return "".join(parts)


def render_mermaid(graph: Drawable, marks: Mapping[str, str] | None = None) -> str:
    """The graph as a Mermaid ``flowchart TD`` (see the module docstring).

    Args:
        graph: The workflow to draw.
        marks: Executor id → one of :data:`MARKS`, to picture a run.

    Raises:
        ValueError: ``marks`` names an unknown executor or an unknown mark.
    """
    nodes, links = _layout(graph, marks)
    # A JSON string is a valid YAML double-quoted scalar. Mermaid reads the
    # title before it decodes #code; escapes, so the title is left as written.
    title = json.dumps(_visible(graph.name).replace("\n", " "), ensure_ascii=False)
    lines = ["---", f"title: {title}", "---", "flowchart TD"]
    lines.extend(_mermaid_nodes(nodes, "    "))
    styled: dict[_LinkKind, list[str]] = {}
    for number, link in enumerate(_flat_links(links, nodes)):
        arrow = _MERMAID_ARROWS[link.kind]
        label = f'|"{_mermaid_text(link.label)}"|' if link.label is not None else ""
        lines.append(f"    {link.source} {arrow}{label} {link.target}")
        if link.kind in _MERMAID_LINK_STYLES:
            styled.setdefault(link.kind, []).append(str(number))
    for kind, style in _MERMAID_LINK_STYLES.items():
        if kind in styled:
            lines.append(f"    linkStyle {','.join(styled[kind])} {style}")
    members: dict[str, list[str]] = {}
    for node in _flat_nodes(nodes):
        if node.kind == "workflow":
            continue  # a cluster: drawn by its frame, not styled as a node
        if node.kind in {"fan-out", "fan-in", "switch"}:
            members.setdefault("hub", []).append(node.key)
        if node.kind == "start":
            members.setdefault("start", []).append(node.key)
        if node.mark is not None:
            members.setdefault(node.mark, []).append(node.key)
    for name, style in _MERMAID_CLASSES.items():
        if name in members:
            lines.append(f"    classDef {name} {style}")
            lines.append(f"    class {','.join(members[name])} {name}")
    return "\n".join(lines) + "\n"


def _mermaid_nodes(nodes: list[_Node], indent: str) -> list[str]:
    lines = []
    for node in nodes:
        if node.inner is not None:
            lines.append(f'{indent}subgraph {node.key} ["{_mermaid_text(node.label)}"]')
            lines.extend(_mermaid_nodes(node.inner[0], indent + "    "))
            lines.append(f"{indent}end")
            continue
        opening, closing = _MERMAID_SHAPES[node.kind]
        lines.append(f"{indent}{node.key}{opening}{_mermaid_text(node.label)}{closing}")
    return lines


# -- Graphviz -----------------------------------------------------------------------

_DOT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "&": "&amp;"}
"""Backslashes start label escapes (``\\N``) and ``&`` HTML entities in DOT labels."""

_DOT_HUBS: dict[_NodeKind, str] = {
    "fan-out": 'shape=trapezium, style=filled, fillcolor="#eeeeee", fontsize=10',
    "fan-in": 'shape=invtrapezium, style=filled, fillcolor="#eeeeee", fontsize=10',
    "switch": 'shape=diamond, style=filled, fillcolor="#eeeeee", fontsize=10',
}

_DOT_ARROWS: dict[_LinkKind, str] = {
    "plain": "",
    "conditional": "style=dashed",
    "fan-out": "style=bold",
    "fan-in": "style=bold",
    "switch": "",
    "handoff": 'style=dotted, color="#7b1fa2", fontcolor="#7b1fa2", penwidth=1.5',
    "error": 'style=dashed, color="#c62828", fontcolor="#c62828"',
}

_DOT_MARKS = {
    "ran": 'fillcolor="#d4edda", color="#2e7d32"',
    "running": 'fillcolor="#d0e4ff", color="#1565c0", penwidth=3',
    "waiting": 'fillcolor="#fff3cd", color="#b58900", penwidth=2',
    "failed": 'fillcolor="#f8d7da", color="#c62828", penwidth=3',
}


def _dot_text(text: str) -> str:
    """``text`` as a quoted DOT string that a label shows as written."""
    return '"' + "".join(_DOT_ESCAPES.get(ch, ch) for ch in _visible(text)) + '"'


def _dot_node_style(node: _Node) -> str:
    if node.kind in _DOT_HUBS:
        return _DOT_HUBS[node.kind]
    styles = ["filled"]
    if node.kind == "start":
        styles += ["rounded", "bold"]
    if node.mark == "waiting":
        styles.append("dashed")
    attributes = [f'style="{",".join(styles)}"']
    if node.mark is not None:
        attributes.append(_DOT_MARKS[node.mark])
    return ", ".join(attributes)


def _dot_nodes(nodes: list[_Node], indent: str) -> list[str]:
    lines = []
    for n in nodes:
        if n.inner is not None:
            lines.append(f"{indent}subgraph cluster_{n.key} {{")
            style = "rounded,filled" + (",dashed" if n.mark == "waiting" else "")
            colour = _DOT_MARKS.get(n.mark or "", 'fillcolor="#f7f7f7", color="#888888"')
            colour = colour.replace(", ", "; ")  # statements in a cluster, not a list
            lines.append(f'{indent}    label={_dot_text(n.label)}; style="{style}"; {colour};')
            lines.extend(_dot_nodes(n.inner[0], indent + "    "))
            lines.append(f"{indent}}}")
            continue
        lines.append(f"{indent}{n.key} [label={_dot_text(n.label)}, {_dot_node_style(n)}];")
    return lines


def _dot_anchored(link: _Link, clusters: Mapping[str, _Node]) -> tuple[_Link, list[str]]:
    """``link`` with each cluster end moved to a node inside it, and clipped at its frame."""
    clipped = []
    source, target = link.source, link.target
    if source in clusters:
        clipped.append(f"ltail=cluster_{source}")
        source = _dot_anchor(clusters[source])
    if target in clusters:
        clipped.append(f"lhead=cluster_{target}")
        target = _dot_anchor(clusters[target])
    return _Link(source, target, link.kind, link.label), clipped


def _dot_anchor(cluster: _Node) -> str:
    """A node inside a cluster: its start node (itself a cluster's, if nested)."""
    assert cluster.inner is not None  # noqa: S101 - called for clusters only
    first = cluster.inner[0][0]
    return _dot_anchor(first) if first.inner is not None else first.key


def render_dot(graph: Drawable, marks: Mapping[str, str] | None = None) -> str:
    """The graph as a Graphviz ``digraph`` (see the module docstring).

    Args:
        graph: The workflow to draw.
        marks: Executor id → one of :data:`MARKS`, to picture a run.

    Raises:
        ValueError: ``marks`` names an unknown executor or an unknown mark.
    """
    nodes, links = _layout(graph, marks)
    name = _dot_text(graph.name)
    lines = [
        f"digraph {name} {{",
        f'    graph [label={name}, labelloc=t, fontname="Helvetica", bgcolor=white];',
        '    node [shape=box, fillcolor=white, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    lines.extend(_dot_nodes(nodes, "    "))
    # An arrow meets a cluster at its sub-workflow's start node, clipped at the frame.
    anchors = {n.key: n for n in _flat_nodes(nodes) if n.inner is not None}
    if anchors:
        lines.insert(1, "    compound=true;")
    for each in _flat_links(links, nodes):
        link = each
        attributes = [_DOT_ARROWS[link.kind]] if _DOT_ARROWS[link.kind] else []
        if link.source in anchors or link.target in anchors:
            link, clipped = _dot_anchored(each, anchors)
            attributes.extend(clipped)
        if link.label is not None:  # padded: dot sets a label close to its edge
            attributes.append(f"label={_dot_text(f'  {link.label}  ')}")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"    {link.source} -> {link.target}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"
