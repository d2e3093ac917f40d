"""LangGraph: ``StateGraph`` compiled once, driven with ``ainvoke``.

State is a TypedDict; nodes return partial updates. Fan-in uses LangGraph's join
edge (``add_edge([b0, ..., b99], "sink")``: sink waits for every branch) with an
``operator.add`` reducer so the parallel writes merge. ``ckpt_chain`` compiles the
same chain with ``AsyncSqliteSaver`` and ``durability="sync"`` so every step's
checkpoint is committed before the next step starts.
"""

import asyncio
import itertools
import operator
import uuid
from collections.abc import Awaitable
from typing import Annotated, Any, TypedDict

from _workload import (
    CHAIN_NODES,
    CKPT_NODES,
    FANOUT_WIDTH,
    LOOP_ITERATIONS,
    MANY_RUNS,
    MANY_RUNS_CHAIN,
    RunFn,
    calls,
    enter,
    expect,
    scratch_path,
)
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

LIMIT = {"recursion_limit": 2 * LOOP_ITERATIONS + 10}


class ChainState(TypedDict):
    x: int


class FanState(TypedDict):
    x: int
    hits: Annotated[int, operator.add]


async def _inc(state: ChainState) -> dict[str, int]:
    calls.n += 1
    return {"x": state["x"] + 1}


def _chain_builder(n: int) -> StateGraph:
    g = StateGraph(ChainState)
    names = [f"n{i}" for i in range(n)]
    for name in names:
        g.add_node(name, _inc)
    g.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g


async def chain() -> RunFn:
    graph = _chain_builder(CHAIN_NODES).compile()
    return lambda: graph.ainvoke({"x": 0}, LIMIT)


async def fanout() -> RunFn:
    async def src(state: FanState) -> dict[str, int]:
        calls.n += 1
        return {}

    async def branch(state: FanState) -> dict[str, int]:
        calls.n += 1
        return {"hits": 1}

    async def sink(state: FanState) -> dict[str, int]:
        calls.n += 1
        expect(state["hits"], FANOUT_WIDTH, "fan-in hits")
        return {}

    g = StateGraph(FanState)
    branches = [f"b{i}" for i in range(FANOUT_WIDTH)]
    g.add_node("src", src)
    g.add_node("sink", sink)
    for b in branches:
        g.add_node(b, branch)
        g.add_edge("src", b)
    g.add_edge(START, "src")
    g.add_edge(branches, "sink")
    g.add_edge("sink", END)
    graph = g.compile()
    return lambda: graph.ainvoke({"x": 0, "hits": 0}, LIMIT)


async def loop() -> RunFn:
    async def a(state: ChainState) -> dict[str, int]:
        calls.n += 1
        return {"x": state["x"] + 1}

    async def b(state: ChainState) -> dict[str, int]:
        calls.n += 1
        return {}

    def again(state: ChainState) -> str:
        return "a" if state["x"] < LOOP_ITERATIONS else END

    g = StateGraph(ChainState)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", again, ["a", END])
    graph = g.compile()
    return lambda: graph.ainvoke({"x": 0}, LIMIT)


async def many_runs() -> RunFn:
    graph = _chain_builder(MANY_RUNS_CHAIN).compile()
    return lambda: asyncio.gather(*(graph.ainvoke({"x": 0}) for _ in range(MANY_RUNS)))


async def ckpt_chain() -> RunFn:
    saver = await enter(AsyncSqliteSaver.from_conn_string(scratch_path("langgraph.sqlite")))
    await saver.setup()  # creates the tables and sets journal_mode=WAL
    await saver.conn.execute("PRAGMA synchronous=FULL")  # the floor's setting, stated explicitly
    graph = _chain_builder(CKPT_NODES).compile(checkpointer=saver)

    def run() -> Awaitable[Any]:
        config: Any = LIMIT | {"configurable": {"thread_id": uuid.uuid4().hex}}
        return graph.ainvoke({"x": 0}, config, durability="sync")

    return run
