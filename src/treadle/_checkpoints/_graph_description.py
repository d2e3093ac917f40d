"""A workflow's shape as plain data: to fingerprint it and to say what changed.

A checkpoint only makes sense to the graph that wrote it: pending messages
name executors, fan-in buffers are indexed by edge, ranks order delivery.
Each run stores its graph's description; each checkpoint stores the
fingerprint. Resuming with a graph whose fingerprint differs is refused, and
:func:`describe_changes` turns the two descriptions into sentences that name
every executor and edge that changed.

Conditions, selectors and handler bodies are code, not data: changing them
keeps the fingerprint. Everything that decides *where* messages go and in
what order is in it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from treadle._exceptions import CheckpointCorruptError
from treadle._graph._edges import (
    DirectEdge,
    Edge,
    ErrorEdge,
    FanInEdge,
    FanOutEdge,
    HandoffEdge,
    SwitchEdge,
)

if TYPE_CHECKING:
    from treadle._engine._topology import Topology

ORIGIN = "origin"
"""Key of the import path (``pkg.module:attr``) a workflow was loaded from.

Stored with each run so tools (the CLI, workers) can load the workflow that
wrote it; not part of the fingerprint, which is about the graph's shape.
"""


def _edge_text(edge: Edge) -> str:
    if isinstance(edge, DirectEdge):
        kind = "conditional edge" if edge.condition is not None else "edge"
        return f"{kind} {edge.source!r} -> {edge.target!r}"
    if isinstance(edge, FanOutEdge):
        kind = "fan-out with selector" if edge.selector is not None else "fan-out"
        return f"{kind} {edge.source!r} -> {list(edge.targets)!r}"
    if isinstance(edge, FanInEdge):
        return f"fan-in {list(edge.sources)!r} -> {edge.target!r}"
    if isinstance(edge, SwitchEdge):
        cases = [t for _, t in edge.cases]
        return f"switch {edge.source!r} -> cases {cases!r}, default {edge.default!r}"
    if isinstance(edge, ErrorEdge):
        return f"error route {edge.source!r} -> {edge.target!r}"
    assert isinstance(edge, HandoffEdge)  # noqa: S101 - the edge kinds are closed
    return f"handoff {edge.source!r} -> {list(edge.targets)!r}"


def describe_graph(workflow: Topology) -> dict[str, Any]:
    """The routing-relevant shape of a workflow as JSON-ready data."""
    executors = {}
    for executor_id in workflow.executor_ids:
        prototype = workflow.prototype(executor_id)
        # Qualified names without modules: the same workflow run as a script
        # (``__main__``) and imported by a worker must match.
        executors[executor_id] = {
            "rank": workflow.ranks[executor_id],
            "class": type(prototype).__qualname__,
            "accepts": sorted(t.__qualname__ for t in prototype.accepted_types()),
        }
        inner: Topology | None = getattr(prototype, "subgraph", None)  # a sub-workflow
        if inner is not None:
            nested = describe_graph(inner)
            nested.pop(ORIGIN, None)
            executors[executor_id]["workflow"] = nested
    description: dict[str, Any] = {
        "name": workflow.name,
        "start": workflow.start_id,
        "executors": executors,
        "edges": [_edge_text(edge) for edge in workflow.edges],
        "state": {
            key: {"reducer": spec.reducer is not None}
            for key, spec in sorted(workflow.state_specs.items())
        },
    }
    if workflow.origin is not None:
        description[ORIGIN] = workflow.origin
    return description


def encode_description(description: dict[str, Any]) -> bytes:
    """Canonical bytes of a description (sorted keys, no spaces)."""
    return json.dumps(description, sort_keys=True, separators=(",", ":")).encode()


def decode_description(run_id: str, graph: bytes) -> dict[str, Any]:
    """The graph description a run's row stores (``b""`` for a run queued without one: ``{}``).

    Raises:
        CheckpointCorruptError: The bytes are not a JSON object (a bad disk, a
            hand edit), named as the run's ``<graph>`` rather than a decoding error.
    """
    if not graph:
        return {}
    try:
        description = json.loads(graph)
    except ValueError as error:  # not JSON, or not UTF-8
        description = error
    if not isinstance(description, dict):
        reason = f"unreadable graph: not a JSON object ({description})"
        raise CheckpointCorruptError(run_id, "<graph>", reason)
    return description


def fingerprint(description: dict[str, Any]) -> str:
    """A short, stable hash of a description (where it was imported from aside)."""
    shape = {k: v for k, v in description.items() if k != ORIGIN}
    return hashlib.blake2b(encode_description(shape), digest_size=12).hexdigest()


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every difference between two descriptions, one sentence each."""
    changes: list[str] = []
    if old.get("start") != new.get("start"):
        changes.append(
            f"the start executor changed from {old.get('start')!r} to {new.get('start')!r}"
        )
    old_ex: dict[str, Any] = old.get("executors", {})
    new_ex: dict[str, Any] = new.get("executors", {})
    changes.extend(f"executor {e!r} was removed" for e in old_ex if e not in new_ex)
    changes.extend(f"executor {e!r} was added" for e in new_ex if e not in old_ex)
    changes.extend(
        f"executor {e!r}: {field} changed from {old_ex[e][field]!r} to {new_ex[e][field]!r}"
        for e in sorted(old_ex.keys() & new_ex.keys())
        for field in ("class", "accepts", "rank")
        if old_ex[e][field] != new_ex[e][field]
    )
    for e in sorted(old_ex.keys() & new_ex.keys()):
        old_inner, new_inner = old_ex[e].get("workflow"), new_ex[e].get("workflow")
        if old_inner != new_inner:
            inside = describe_changes(old_inner or {}, new_inner or {})
            changes.append(f"executor {e!r}: its sub-workflow changed: {'; '.join(inside)}")
    old_edges, new_edges = old.get("edges", []), new.get("edges", [])
    changes.extend(f"{edge} was removed" for edge in old_edges if edge not in new_edges)
    changes.extend(f"{edge} was added" for edge in new_edges if edge not in old_edges)
    if not changes and old_edges != new_edges:
        changes.append("the edges were declared in a different order")
    if old.get("state") != new.get("state"):
        changes.append(f"state keys changed from {old.get('state')!r} to {new.get('state')!r}")
    return changes or ["the graph description differs"]
