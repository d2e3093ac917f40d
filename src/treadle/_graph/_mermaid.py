"""A workflow's picture as a Mermaid ``flowchart TD`` (laid out by :mod:`treadle._graph._render`).

Mermaid reads a quoted label's ``#code;`` escapes, so every character that
is not a letter, a digit or plain punctuation is written as one; its one
broken-line arrow is told apart by a style per link.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from treadle._graph._render import (
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


_MERMAID_PLAIN = frozenset(" -_.,/()'!?+=")
"""Punctuation that stands for itself inside a quoted Mermaid label.

Not ``:``: Mermaid drops the last ``;`` of any line that has ``style`` then
``:`` then ``#`` (it takes the line for a style statement), and every other
character comes out as ``#code;``.
"""

_MERMAID_SHAPES: Final[Mapping[NodeKind, tuple[str, str]]] = {
    "executor": ('["', '"]'),
    "start": ('(["', '"])'),
    "fan-out": ('[/"', '"\\]'),
    "fan-in": ('[\\"', '"/]'),
    "switch": ('{"', '"}'),
}

_MERMAID_ARROWS: Final[Mapping[LinkKind, str]] = {
    "plain": "-->",
    "conditional": "-.->",
    "fan-out": "==>",
    "fan-in": "==>",
    "switch": "-->",
    "handoff": "-.->",
    "error": "-.->",
}

# Mermaid has one broken-line arrow; these tell a condition, a handoff and an error route apart.
_MERMAID_LINK_STYLES: Final[Mapping[LinkKind, str]] = {
    "conditional": "stroke-dasharray: 8 4",
    "handoff": "stroke:#7b1fa2,stroke-dasharray: 2 3",
    "error": "stroke:#c62828,stroke-dasharray: 6 3",
}

_MERMAID_CLASSES = MappingProxyType(
    {
        "hub": "fill:#eeeeee,stroke:#888888,color:#333333",
        "start": "stroke-width:3px",
        "ran": "fill:#d4edda,stroke:#2e7d32,color:#1b5e20",
        "running": "fill:#d0e4ff,stroke:#1565c0,color:#0d47a1,stroke-width:3px",
        "waiting": "fill:#fff3cd,stroke:#b58900,color:#6d4c00,stroke-dasharray: 5 3",
        "failed": "fill:#f8d7da,stroke:#c62828,color:#b71c1c,stroke-width:3px",
    }
)


def _mermaid_text(text: str) -> str:
    """``text`` as the inside of a quoted Mermaid label: anything unusual as ``#code;``."""
    parts = []
    for ch in visible(text):
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
    nodes, links = layout(graph, marks)
    # A JSON string is a valid YAML double-quoted scalar. Mermaid reads the
    # title before it decodes #code; escapes, so the title is left as written.
    title = json.dumps(visible(graph.name).replace("\n", " "), ensure_ascii=False)
    lines = ["---", f"title: {title}", "---", "flowchart TD"]
    lines.extend(_mermaid_nodes(nodes, "    "))
    styled: dict[LinkKind, list[str]] = {}
    for number, link in enumerate(flat_links(links, nodes)):
        arrow = _MERMAID_ARROWS[link.kind]
        label = f'|"{_mermaid_text(link.label)}"|' if link.label is not None else ""
        lines.append(f"    {link.source} {arrow}{label} {link.target}")
        if link.kind in _MERMAID_LINK_STYLES:
            styled.setdefault(link.kind, []).append(str(number))
    for kind, style in _MERMAID_LINK_STYLES.items():
        if kind in styled:
            lines.append(f"    linkStyle {','.join(styled[kind])} {style}")
    members: dict[str, list[str]] = {}
    for node in flat_nodes(nodes):
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


def _mermaid_nodes(nodes: list[Node], indent: str) -> list[str]:
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
