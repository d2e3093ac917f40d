"""Microsoft Agent Framework workflows: ``WorkflowBuilder`` of ``@executor`` functions.

Function executors typed ``(msg: int, ctx: WorkflowContext[int])`` exchange messages with
``await ctx.send_message``; ``await workflow.run(0)`` runs to idle. The builder's
``add_chain``, ``add_fan_out_edges``/``add_fan_in_edges`` (the fan-in target gets one
list) and ``add_edge(..., condition=...)`` express the workloads directly.
``max_iterations`` (supersteps, default 100) is raised for the chain and the loop.

A ``Workflow`` refuses a second concurrent ``run`` ("concurrent runs are not allowed
on the same instance"), so ``many_runs`` builds 1,000 identical workflows up front
(untimed) and gathers one run on each.
"""

import asyncio
from typing import Never

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
from agent_framework import (
    Executor,
    FunctionExecutor,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)

MAX_SUPERSTEPS = 2 * LOOP_ITERATIONS + 10

ABSENT = {
    "ckpt_chain": "no comparable store: checkpoints go to memory or to FileCheckpointStorage "
    "(JSON files, atomic rename, no fsync), there is no SQLite store",
    "ckpt_chain_background": "no comparable store (see `ckpt_chain`)",
    "ckpt_chain_batched": "no comparable store (see `ckpt_chain`)",
    "idle_runs": "no durable timer and no fsync'd store: a run can pause on "
    "`ctx.request_info` and be checkpointed to FileCheckpointStorage (no fsync), but nothing "
    "records a wake-up time or finds the runs that are due",
    "many_durable_runs": "no comparable store (see `ckpt_chain`)",
    "growing_state": "no comparable store (see `ckpt_chain`)",
}
NOTES = {
    "many_runs": "1,000 Workflow objects, one run each: a Workflow refuses concurrent runs",
}


def _forward(node_id: str) -> FunctionExecutor:
    async def forward(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        await ctx.send_message(msg + 1)

    return executor(id=node_id)(forward)


def _last(node_id: str) -> FunctionExecutor:
    async def last(msg: int, ctx: WorkflowContext[Never, int]) -> None:
        calls.n += 1
        await ctx.yield_output(msg)

    return executor(id=node_id)(last)


def _chain_workflow(n: int) -> Workflow:
    nodes: list[Executor] = [_forward(f"n{i}") for i in range(n - 1)]
    nodes.append(_last(f"n{n - 1}"))
    return WorkflowBuilder(MAX_SUPERSTEPS, start_executor=nodes[0]).add_chain(nodes).build()


async def chain() -> RunFn:
    wf = _chain_workflow(CHAIN_NODES)
    return lambda: wf.run(0)


async def fanout() -> RunFn:
    @executor(id="src")
    async def src(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        await ctx.send_message(msg)

    @executor(id="sink")
    async def sink(msgs: list[int], ctx: WorkflowContext[Never, int]) -> None:
        calls.n += 1
        expect(len(msgs), FANOUT_WIDTH, "fan-in list length")
        await ctx.yield_output(len(msgs))

    branches: list[Executor] = [_forward(f"b{i}") for i in range(FANOUT_WIDTH)]
    wf = (
        WorkflowBuilder(start_executor=src)
        .add_fan_out_edges(src, branches)
        .add_fan_in_edges(branches, sink)
        .build()
    )
    return lambda: wf.run(0)


async def loop() -> RunFn:
    @executor(id="a")
    async def a(msg: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        await ctx.send_message(msg + 1)

    @executor(id="b")
    async def b(msg: int, ctx: WorkflowContext[int, int]) -> None:
        calls.n += 1
        await ctx.send_message(msg)  # the edge condition drops the last one
        if msg >= LOOP_ITERATIONS:
            await ctx.yield_output(msg)

    wf = (
        WorkflowBuilder(MAX_SUPERSTEPS, start_executor=a)
        .add_edge(a, b)
        .add_edge(b, a, condition=lambda m: m < LOOP_ITERATIONS)
        .build()
    )
    return lambda: wf.run(0)


async def many_runs() -> RunFn:
    wfs = [_chain_workflow(MANY_RUNS_CHAIN) for _ in range(MANY_RUNS)]
    return lambda: asyncio.gather(*(wf.run(0) for wf in wfs))
