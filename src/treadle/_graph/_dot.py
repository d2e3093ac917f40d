"""A workflow's picture as Graphviz DOT source (laid out by :mod:`treadle._graph._render`).

Every label is a quoted DOT string shown as written; a sub-workflow is a
``cluster`` subgraph, and an arrow to or from it is drawn to its start node
and clipped at the cluster's frame.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from treadle._graph._render import (
    Link,
    LinkKind,
    Node,
    NodeKind,
    flat_links,
    flat_nodes,
    layout,
    visible,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._graph._render import Drawable


_DOT_ESCAPES = MappingProxyType({"\\": "\\\\", '"': '\\"', "\n": "\\n", "&": "&amp;"})
"""Backslashes start label escapes (``\\N``) and ``&`` HTML entities in DOT labels."""

_DOT_HUBS: Final[Mapping[NodeKind, str]] = {
    "fan-out": 'shape=trapezium, style=filled, fillcolor="#eeeeee", fontsize=10',
    "fan-in": 'shape=invtrapezium, style=filled, fillcolor="#eeeeee", fontsize=10',
    "switch": 'shape=diamond, style=filled, fillcolor="#eeeeee", fontsize=10',
}

_DOT_ARROWS: Final[Mapping[LinkKind, str]] = {
    "plain": "",
    "conditional": "style=dashed",
    "fan-out": "style=bold",
    "fan-in": "style=bold",
    "switch": "",
    "handoff": 'style=dotted, color="#7b1fa2", fontcolor="#7b1fa2", penwidth=1.5',
    "error": 'style=dashed, color="#c62828", fontcolor="#c62828"',
}

_DOT_MARKS = MappingProxyType(
    {
        "ran": 'fillcolor="#d4edda", color="#2e7d32"',
        "running": 'fillcolor="#d0e4ff", color="#1565c0", penwidth=3',
        "waiting": 'fillcolor="#fff3cd", color="#b58900", penwidth=2',
        "failed": 'fillcolor="#f8d7da", color="#c62828", penwidth=3',
    }
)


def _dot_text(text: str) -> str:
    """``text`` as a quoted DOT string that a label shows as written."""
    return '"' + "".join(_DOT_ESCAPES.get(ch, ch) for ch in visible(text)) + '"'


def _dot_node_style(node: Node) -> str:
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


def _dot_nodes(nodes: list[Node], indent: str) -> list[str]:
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


def _dot_anchored(link: Link, clusters: Mapping[str, Node]) -> tuple[Link, list[str]]:
    """``link`` with each cluster end moved to a node inside it, and clipped at its frame."""
    clipped = []
    source, target = link.source, link.target
    if source in clusters:
        clipped.append(f"ltail=cluster_{source}")
        source = _dot_anchor(clusters[source])
    if target in clusters:
        clipped.append(f"lhead=cluster_{target}")
        target = _dot_anchor(clusters[target])
    return Link(source, target, link.kind, link.label), clipped


def _dot_anchor(cluster: Node) -> str:
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
    nodes, links = layout(graph, marks)
    name = _dot_text(graph.name)
    lines = [
        f"digraph {name} {{",
        f'    graph [label={name}, labelloc=t, fontname="Helvetica", bgcolor=white];',
        '    node [shape=box, fillcolor=white, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    lines.extend(_dot_nodes(nodes, "    "))
    # An arrow meets a cluster at its sub-workflow's start node, clipped at the frame.
    anchors = {n.key: n for n in flat_nodes(nodes) if n.inner is not None}
    if anchors:
        lines.insert(1, "    compound=true;")
    for each in flat_links(links, nodes):
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
