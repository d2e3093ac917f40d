"""treadle: ``WorkflowBuilder`` of ``@executor`` functions, one workflow serving every run.

``ctx.send_message`` is synchronous (buffered until the barrier). The loop needs
``max_supersteps`` above the default 1,000. Function executors are stateless and
shareable, so ``many_runs`` gathers 1,000 runs on one workflow object.
"""

import asyncio
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

from treadle import WorkflowBuilder, WorkflowContext, executor

MAX_SUPERSTEPS = 2 * LOOP_ITERATIONS + 10

ABSENT = {
    "ckpt_chain": "adapter not written yet: it comes with treadle's durable store "
    "(SqliteStore, checkpoint per superstep)",
}


def _forward(node_id: str) -> Any:
    async def forward(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        ctx.send_message(msg + 1)

    return executor(id=node_id)(forward)


def _last(node_id: str) -> Any:
    async def last(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        ctx.yield_output(msg)

    return executor(id=node_id)(last)


def _chain_workflow(n: int) -> Any:
    nodes = [_forward(f"n{i}") for i in range(n - 1)]
    nodes.append(_last(f"n{n - 1}"))
    return WorkflowBuilder(start=nodes[0]).add_chain(nodes).build()


async def chain() -> RunFn:
    wf = _chain_workflow(CHAIN_NODES)
    return lambda: wf.run(0)


async def fanout() -> RunFn:
    @executor(id="src")
    async def src(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        ctx.send_message(msg)

    @executor(id="sink")
    async def sink(msg: list[int], ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        expect(len(msg), FANOUT_WIDTH, "fan-in list length")
        ctx.yield_output(len(msg))

    branches = [_forward(f"b{i}") for i in range(FANOUT_WIDTH)]
    wf = WorkflowBuilder(start=src).add_fan_out(src, branches).add_fan_in(branches, sink).build()
    return lambda: wf.run(0)


async def loop() -> RunFn:
    @executor(id="a")
    async def a(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        ctx.send_message(msg + 1)

    @executor(id="b")
    async def b(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        ctx.send_message(msg)  # the edge condition drops the last one
        if msg >= LOOP_ITERATIONS:
            ctx.yield_output(msg)

    wf = (
        WorkflowBuilder(start=a)
        .add_edge(a, b)
        .add_edge(b, a, condition=lambda m: m < LOOP_ITERATIONS)
        .build()
    )
    return lambda: wf.run(0, max_supersteps=MAX_SUPERSTEPS)


async def many_runs() -> RunFn:
    wf = _chain_workflow(MANY_RUNS_CHAIN)
    return lambda: asyncio.gather(*(wf.run(0) for _ in range(MANY_RUNS)))
