"""pydantic-graph 2.x: ``GraphBuilder`` of step functions, run with ``await graph.run(...)``.

Steps are async functions of a ``StepContext`` whose ``inputs`` is the message; their
return value flows along the edges. Fan-out is a broadcast edge (``edge_from(src).to(
*branches)``), fan-in a ``join`` with the ``reduce_sum`` reducer feeding the sink, and
the loop's exit a ``decision`` with two ``match`` branches. ``auto_instrument=False``
skips the (no-op without logfire) span machinery; naming the graph skips the
frame inspection ``run`` otherwise does to infer a name.
"""

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from _workload import (
    CHAIN_NODES,
    FANOUT_WIDTH,
    LOOP_ITERATIONS,
    MANY_RUNS,
    MANY_RUNS_CHAIN,
    RunFn,
    calls,
    expect,
)
from pydantic_graph import Graph, GraphBuilder, StepContext, reduce_sum

ABSENT = {
    "ckpt_chain": "pydantic-graph 2.x ships no state-persistence module (earlier "
    "releases had `pydantic_graph.persistence`): nothing to checkpoint to",
    "ckpt_chain_background": "no state persistence in 2.x (see `ckpt_chain`)",
    "ckpt_chain_batched": "no state persistence in 2.x (see `ckpt_chain`)",
    "idle_runs": "no state persistence and no timer in 2.x: a run exists only while its "
    "coroutine runs, so it cannot rest outside the process",
    "many_durable_runs": "no state persistence in 2.x (see `ckpt_chain`)",
    "growing_state": "no state persistence in 2.x (see `ckpt_chain`)",
}

Ctx = StepContext[None, None, int]


def _builder(name: str) -> GraphBuilder[None, None, int, int]:
    return GraphBuilder(name=name, input_type=int, output_type=int, auto_instrument=False)


async def _inc(ctx: Ctx) -> int:
    calls.n += 1
    return ctx.inputs + 1


def _run(graph: Graph[None, None, int, int]) -> Callable[[], Awaitable[Any]]:
    return lambda: graph.run(inputs=0)


def _chain_graph(n: int) -> Graph[None, None, int, int]:
    g = _builder(f"chain{n}")
    steps = [g.step(_inc, node_id=f"n{i}") for i in range(n)]
    g.add_edge(g.start_node, steps[0])
    for a, b in itertools.pairwise(steps):
        g.add_edge(a, b)
    g.add_edge(steps[-1], g.end_node)
    return g.build()


async def chain() -> RunFn:
    return _run(_chain_graph(CHAIN_NODES))


async def fanout() -> RunFn:
    g = _builder("fanout")

    async def sink(ctx: Ctx) -> int:
        calls.n += 1
        expect(ctx.inputs, FANOUT_WIDTH, "fan-in sum")
        return ctx.inputs

    async def branch(ctx: Ctx) -> int:
        calls.n += 1
        return 1

    src = g.step(_inc, node_id="src")
    branches = [g.step(branch, node_id=f"b{i}") for i in range(FANOUT_WIDTH)]
    join = g.join(reduce_sum, initial=0, node_id="join")
    sink_step = g.step(sink, node_id="sink")
    g.add_edge(g.start_node, src)
    g.add(g.edge_from(src).to(*branches))
    for b in branches:
        g.add_edge(b, join)
    g.add_edge(join, sink_step)
    g.add_edge(sink_step, g.end_node)
    return _run(g.build())


async def loop() -> RunFn:
    g = _builder("loop")

    async def b(ctx: Ctx) -> int:
        calls.n += 1
        return ctx.inputs

    a_step = g.step(_inc, node_id="a")
    b_step = g.step(b, node_id="b")
    again = (
        g.decision(node_id="again")
        .branch(g.match(int, matches=lambda m: m < LOOP_ITERATIONS).to(a_step))
        .branch(g.match(int).to(g.end_node))
    )
    g.add_edge(g.start_node, a_step)
    g.add_edge(a_step, b_step)
    g.add_edge(b_step, again)
    return _run(g.build())


async def many_runs() -> RunFn:
    graph = _chain_graph(MANY_RUNS_CHAIN)
    return lambda: asyncio.gather(*(graph.run(inputs=0) for _ in range(MANY_RUNS)))
