"""Pictures of a workflow graph: Mermaid flowcharts and Graphviz DOT.

Both renderers draw the same picture, laid out once by :func:`_layout`:

==============  ==========================================================
graph element   drawn as
==============  ==========================================================
executor        a box labelled with its id
start executor  a rounded box (a stadium in Mermaid) with a bold border
plain edge      a solid arrow
conditional     a dashed arrow labelled ``if``
fan-out         bold arrows through a trapezium labelled ``fan-out`` (or
                ``fan-out (selector)``) to every target
fan-in          bold arrows from every source into an inverted trapezium
                labelled ``fan-in``, and one from it to the target
switch          an arrow into a diamond labelled ``switch``, and from it
                arrows labelled ``case 1``, ``case 2``, ... and ``default``
handoff         a dotted purple arrow labelled ``handoff`` or
                ``handoff (approval)``
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
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from treadle._graph._edges import DirectEdge, FanInEdge, FanOutEdge, SwitchEdge

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._graph._edges import Edge

MARKS = ("ran", "running", "waiting", "failed")
"""What ``marks`` may say of an executor, in a run's picture."""

_NodeKind: TypeAlias = Literal["executor", "start", "fan-out", "fan-in", "switch"]
_LinkKind: TypeAlias = Literal["plain", "conditional", "fan-out", "fan-in", "switch", "handoff"]


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


@dataclass(frozen=True, slots=True)
class _Node:
    key: str  # the node's name in the picture, never a user string
    label: str
    kind: _NodeKind
    mark: str | None = None


@dataclass(frozen=True, slots=True)
class _Link:
    source: str
    target: str
    kind: _LinkKind
    label: str | None = None


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


def _layout(graph: Drawable, marks: Mapping[str, str] | None) -> tuple[list[_Node], list[_Link]]:
    """The nodes and links of the picture, in a fixed order.

    Raises:
        ValueError: ``marks`` names an executor the graph lacks, or a mark
            not in :data:`MARKS`.
    """
    marks = marks or {}
    _check_marks(marks, graph.executor_ids)
    key = {eid: f"n{rank}" for rank, eid in enumerate(graph.executor_ids)}
    nodes = [
        _Node(key[eid], eid, "start" if eid == graph.start_id else "executor", marks.get(eid))
        for eid in graph.executor_ids
    ]
    links: list[_Link] = []
    for index, edge in enumerate(graph.edges):
        if isinstance(edge, DirectEdge):
            if edge.condition is None:
                links.append(_Link(key[edge.source], key[edge.target], "plain"))
            else:
                links.append(_Link(key[edge.source], key[edge.target], "conditional", "if"))
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
                _Link(hub, key[target], "switch", f"case {number}")
                for number, (_, target) in enumerate(edge.cases, start=1)
            )
            if edge.default is not None:
                links.append(_Link(hub, key[edge.default], "switch", "default"))
        else:
            label = "handoff (approval)" if edge.require_approval else "handoff"
            links.extend(
                _Link(key[edge.source], key[target], "handoff", label) for target in edge.targets
            )
    return nodes, links


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
}

# Mermaid has one broken-line arrow; these tell a condition from a handoff.
_MERMAID_LINK_STYLES: dict[_LinkKind, str] = {
    "conditional": "stroke-dasharray: 8 4",
    "handoff": "stroke:#7b1fa2,stroke-dasharray: 2 3",
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
    for node in nodes:
        opening, closing = _MERMAID_SHAPES[node.kind]
        lines.append(f"    {node.key}{opening}{_mermaid_text(node.label)}{closing}")
    styled: dict[_LinkKind, list[str]] = {}
    for number, link in enumerate(links):
        arrow = _MERMAID_ARROWS[link.kind]
        label = f'|"{_mermaid_text(link.label)}"|' if link.label is not None else ""
        lines.append(f"    {link.source} {arrow}{label} {link.target}")
        if link.kind in _MERMAID_LINK_STYLES:
            styled.setdefault(link.kind, []).append(str(number))
    for kind, style in _MERMAID_LINK_STYLES.items():
        if kind in styled:
            lines.append(f"    linkStyle {','.join(styled[kind])} {style}")
    members: dict[str, list[str]] = {}
    for node in nodes:
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
    lines.extend(f"    {n.key} [label={_dot_text(n.label)}, {_dot_node_style(n)}];" for n in nodes)
    for link in links:
        attributes = [_DOT_ARROWS[link.kind]] if _DOT_ARROWS[link.kind] else []
        if link.label is not None:  # padded: dot sets a label close to its edge
            attributes.append(f"label={_dot_text(f'  {link.label}  ')}")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"    {link.source} -> {link.target}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"
