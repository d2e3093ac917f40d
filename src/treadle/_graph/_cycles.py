"""Which executors sit on cycles: for naming the loop a run got stuck in.

Tarjan's strongly connected components, iterative so that long chains do
not hit Python's recursion limit. Pure: no asyncio, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._graph._edges import Edge, edge_sources, edge_targets

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence


def cycle_members(ranks: Mapping[str, int], edges: Sequence[Edge]) -> dict[str, tuple[str, ...]]:
    """Map each executor on a cycle to the members of its cycle (Tarjan)."""
    successors: dict[str, set[str]] = {node: set() for node in ranks}
    for edge in edges:
        for source in edge_sources(edge):
            successors[source].update(edge_targets(edge))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: dict[str, tuple[str, ...]] = {}
    counter = 0
    for root in ranks:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(successors[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in successors[node]:
                    members = tuple(sorted(component, key=ranks.__getitem__))
                    for member in component:
                        result[member] = members
    return result
