"""A workflow's graph as JSON, for the page to draw and colour by a run's events.

``{"nodes": [{"id", "kind", "rank"[, "graph"]}], "edges": [{"source",
"target", "kind"[, "label"]}], "start": id}``. A node's ``id`` is its
executor's id, the name events give it, so a run's live status maps onto
the picture without a lookup; nodes come in rank order (the order messages
are delivered in). Edges are drawn from executor to executor: a fan-out is
one ``fan-out`` edge per target, a fan-in one ``fan-in`` edge per source,
a switch one ``switch`` edge per case (labelled ``case 1``, ..., ``default``).
Kinds are those of the Mermaid and DOT pictures (``treadle graph``): nodes
``start``, ``executor``, ``workflow`` (a sub-workflow, with a ``graph`` of
its own); edges ``plain``, ``conditional``, ``fan-out``, ``fan-in``,
``switch``, ``handoff``, ``error``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._graph._edges import DirectEdge, ErrorEdge, FanInEdge, FanOutEdge, SwitchEdge

if TYPE_CHECKING:
    from treadle._graph._edges import Edge
    from treadle._graph._render import Drawable


def graph_json(graph: Drawable) -> dict[str, Any]:
    """The graph's nodes and edges as described in the module docstring."""
    nodes: list[dict[str, Any]] = []
    for rank, executor_id in enumerate(graph.executor_ids):
        inner = graph.subgraph_of(executor_id)
        node: dict[str, Any] = {"id": executor_id, "rank": rank}
        if inner is not None:
            node |= {"kind": "workflow", "graph": graph_json(inner)}
        else:
            node["kind"] = "start" if executor_id == graph.start_id else "executor"
        nodes.append(node)
    edges = [edge for one in graph.edges for edge in _edges_of(one)]
    return {"nodes": nodes, "edges": edges, "start": graph.start_id}


def _edge(source: str, target: str, kind: str, label: str | None = None) -> dict[str, Any]:
    edge = {"source": source, "target": target, "kind": kind}
    if label is not None:
        edge["label"] = label
    return edge


def _edges_of(edge: Edge) -> list[dict[str, Any]]:
    if isinstance(edge, DirectEdge):
        if edge.condition is None:
            return [_edge(edge.source, edge.target, "plain")]
        return [_edge(edge.source, edge.target, "conditional", "if")]
    if isinstance(edge, FanOutEdge):
        label = "fan-out" if edge.selector is None else "fan-out (selector)"
        return [_edge(edge.source, target, "fan-out", label) for target in edge.targets]
    if isinstance(edge, FanInEdge):
        return [_edge(source, edge.target, "fan-in", "fan-in") for source in edge.sources]
    if isinstance(edge, SwitchEdge):
        found = [
            _edge(edge.source, target, "switch", f"case {number}")
            for number, (_, target) in enumerate(edge.cases, start=1)
        ]
        if edge.default is not None:
            found.append(_edge(edge.source, edge.default, "switch", "default"))
        return found
    if isinstance(edge, ErrorEdge):
        return [_edge(edge.source, edge.target, "error", "on error")]
    label = "handoff (approval)" if edge.require_approval else "handoff"
    return [_edge(edge.source, target, "handoff", label) for target in edge.targets]
