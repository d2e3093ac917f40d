"""LangGraph: ``StateGraph`` compiled once, driven with ``ainvoke``.

State is a TypedDict; nodes return partial updates. Fan-in uses LangGraph's join
edge (``add_edge([b0, ..., b99], "sink")``: sink waits for every branch) with an
``operator.add`` reducer so the parallel writes merge. ``ckpt_chain`` compiles the
same chain with ``AsyncSqliteSaver`` and ``durability="sync"`` so every step's
checkpoint is committed before the next step starts; ``ckpt_chain_background`` uses
``durability="async"`` (a step's checkpoint is written while the next step runs).

``idle_runs``: LangGraph has no durable timer. The closest durable parked run is a
node calling ``interrupt()`` on a SQLite checkpointer: the run's thread rests in the
store, and ``Command(resume=...)`` on the same thread id continues it (the node runs
again from its start and ``interrupt()`` returns the resume value). Nothing records
when a thread is due, so the adapter resumes every thread by id, one after another.

``many_durable_runs`` gathers 1,000 ``ainvoke`` calls of a 5-node chain compiled with
one ``AsyncSqliteSaver``, a fresh thread id each, ``durability="sync"``.
``growing_state`` is one node looping on itself through a conditional edge, returning
``{"log": [item]}`` to an ``Annotated[list[str], operator.add]`` channel every step, on
an ``AsyncSqliteSaver`` file with ``durability="sync"`` and ``recursion_limit`` above
the step count.
"""

import asyncio
import itertools
import operator
import time
import uuid
from collections.abc import Awaitable
from typing import Annotated, Any, TypedDict

from _workload import (
    CHAIN_NODES,
    CKPT_NODES,
    DURABLE_RUN_STEPS,
    DURABLE_RUNS,
    FANOUT_WIDTH,
    IDLE_RUNS,
    IDLE_SLEEP_S,
    LOOP_ITERATIONS,
    MANY_RUNS,
    MANY_RUNS_CHAIN,
    Growing,
    Parking,
    RunFn,
    WorkloadError,
    calls,
    enter,
    expect,
    item,
    scratch_path,
    stamps,
)
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

LIMIT = {"recursion_limit": 2 * LOOP_ITERATIONS + 10}

ABSENT = {
    "ckpt_chain_batched": 'no mode with a loss window of a few steps: `durability="async"` '
    '(one step, the `ckpt_chain_background` row) or `"exit"` (the whole run, nothing '
    "written until it ends)",
}
IDLE_RUNS_HERE = IDLE_RUNS // 10

NOTES = {
    "idle_runs": f"N = {IDLE_RUNS_HERE:,}, a tenth of the others', to keep the default run "
    "short; no durable timer: each run parks on `interrupt()` (AsyncSqliteSaver, "
    '`durability="sync"`) and the adapter resumes every thread by id with '
    "`Command(resume=True)`",
}


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


async def _saver(path: str) -> AsyncSqliteSaver:
    saver = await enter(AsyncSqliteSaver.from_conn_string(path))
    await saver.setup()  # creates the tables and sets journal_mode=WAL
    await saver.conn.execute("PRAGMA synchronous=FULL")  # the floor's setting, stated explicitly
    return saver


async def _ckpt_chain(durability: Any) -> RunFn:
    saver = await _saver(scratch_path("langgraph.sqlite"))
    graph = _chain_builder(CKPT_NODES).compile(checkpointer=saver)

    def run() -> Awaitable[Any]:
        config: Any = LIMIT | {"configurable": {"thread_id": uuid.uuid4().hex}}
        return graph.ainvoke({"x": 0}, config, durability=durability)

    return run


async def ckpt_chain() -> RunFn:
    return await _ckpt_chain("sync")


async def ckpt_chain_background() -> RunFn:
    return await _ckpt_chain("async")


class NapState(TypedDict):
    x: int
    woken: bool


async def idle_runs() -> Parking:
    path = scratch_path("langgraph-idle.sqlite")
    saver = await _saver(path)

    async def nap(state: NapState) -> dict[str, bool]:
        calls.n += 1
        woken = interrupt({"sleep": IDLE_SLEEP_S})  # raises while parking; the value on resume
        return {"woken": woken}

    g = StateGraph(NapState)
    g.add_node("nap", nap)
    g.add_edge(START, "nap")
    g.add_edge("nap", END)
    graph = g.compile(checkpointer=saver)

    def config(i: int) -> Any:
        return {"configurable": {"thread_id": f"t{i}"}}

    async def park(i: int) -> None:
        out = await graph.ainvoke({"x": i, "woken": False}, config(i), durability="sync")
        if "__interrupt__" not in out:
            raise WorkloadError(f"run {i} did not park: {out!r}")

    async def wake_all(n: int) -> int:
        completed = 0
        for i in range(n):
            out = await graph.ainvoke(Command(resume=True), config(i), durability="sync")
            completed += out["woken"] is True and out["x"] == i and "__interrupt__" not in out
        return completed

    return Parking(park, wake_all, path, n=IDLE_RUNS_HERE)


async def many_durable_runs() -> RunFn:
    saver = await _saver(scratch_path("langgraph-many.sqlite"))
    graph = _chain_builder(DURABLE_RUN_STEPS).compile(checkpointer=saver)

    def one() -> Awaitable[Any]:
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
        return graph.ainvoke({"x": 0}, config, durability="sync")

    return lambda: asyncio.gather(*(one() for _ in range(DURABLE_RUNS)))


class LogState(TypedDict):
    i: int
    n: int
    log: Annotated[list[str], operator.add]


async def growing_state() -> Growing:
    path = scratch_path("langgraph-growing.sqlite")
    saver = await _saver(path)

    async def grow(state: LogState) -> dict[str, Any]:
        calls.n += 1
        stamps.append(time.perf_counter())
        i = state["i"] + 1
        return {"i": i, "log": [item(i)]}

    def again(state: LogState) -> str:
        return "grow" if state["i"] < state["n"] else END

    g = StateGraph(LogState)
    g.add_node("grow", grow)
    g.add_edge(START, "grow")
    g.add_conditional_edges("grow", again, ["grow", END])
    graph = g.compile(checkpointer=saver)

    async def run(n: int) -> int:
        config: Any = {"recursion_limit": n + 10, "configurable": {"thread_id": "growing"}}
        out = await graph.ainvoke({"i": 0, "n": n, "log": []}, config, durability="sync")
        expect(out["i"], n, "the loop's last step")
        return len(out["log"])

    return Growing(run, path)
