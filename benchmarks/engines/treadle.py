"""treadle: ``WorkflowBuilder`` of ``@executor`` functions, one workflow serving every run.

``ctx.send_message`` is synchronous (buffered until the barrier). The loop needs
``max_supersteps`` above the default 1,000. Function executors are stateless and
shareable, so ``many_runs`` gathers 1,000 runs on one workflow object.

``ckpt_chain`` runs the chain with ``store=SqliteStore(...)`` (one checkpoint per
superstep, each run a fresh UUID run id); ``ckpt_chain_background`` adds
``durability="background"``. ``idle_runs`` parks runs on ``ctx.sleep(3600)`` with a
``FakeClock`` and wakes them with one ``Runtime(...).wake_due()``.

``many_durable_runs`` gathers 1,000 runs of a 5-executor chain on one ``SqliteStore``
(``durability="sync"``). ``growing_state`` is one executor sending itself the next
number until 1,500, each time doing ``ctx.state.set("log", [item])`` on a key declared
with ``add_state("log", default=[], reducer=operator.add)``, on a ``SqliteStore``.
"""

import asyncio
import operator
import time
from typing import Any

from _workload import (
    CHAIN_NODES,
    CKPT_NODES,
    DURABLE_RUN_STEPS,
    DURABLE_RUNS,
    FANOUT_WIDTH,
    IDLE_SLEEP_S,
    LOOP_ITERATIONS,
    MANY_RUNS,
    MANY_RUNS_CHAIN,
    Growing,
    Parking,
    RunFn,
    WorkloadError,
    calls,
    expect,
    item,
    on_exit,
    scratch_path,
    stamps,
)

from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

MAX_SUPERSTEPS = 2 * LOOP_ITERATIONS + 10

NOTES = {
    "idle_runs": "one `Runtime(store, [wf], clock=FakeClock).wake_due()` resumes every due "
    "run, 64 at a time (their commits share fsyncs: group commit)",
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


def _store(name: str) -> SqliteStore:
    store = SqliteStore(scratch_path(name))
    on_exit(store.close)
    return store


async def ckpt_chain() -> RunFn:
    store = _store("treadle.sqlite")
    wf = _chain_workflow(CKPT_NODES)
    return lambda: wf.run(0, store=store)


async def ckpt_chain_background() -> RunFn:
    store = _store("treadle.sqlite")
    wf = _chain_workflow(CKPT_NODES)
    return lambda: wf.run(0, store=store, durability="background")


async def ckpt_chain_batched() -> RunFn:
    store = _store("treadle.sqlite")
    wf = _chain_workflow(CKPT_NODES)
    return lambda: wf.run(0, store=store, durability="batched")


async def idle_runs() -> Parking:
    store = _store("treadle-idle.sqlite")
    clock = FakeClock(start=0.0)

    @executor(id="nap")
    async def nap(i: int, ctx: WorkflowContext[int]) -> None:
        calls.n += 1
        await ctx.sleep(IDLE_SLEEP_S)
        ctx.yield_output(i)

    wf = WorkflowBuilder(start=nap, name="idle").build()

    async def park(i: int) -> None:
        result = await wf.run(i, store=store, clock=clock, record_events=False)
        if result.status is not RunStatus.WAITING:
            raise WorkloadError(f"run {i} rests as {result.status}, not waiting")

    async def wake_all(n: int) -> int:
        await clock.advance(IDLE_SLEEP_S)
        results = await Runtime(store, [wf], clock=clock).wake_due()
        return sum(r.status is RunStatus.COMPLETED and len(r.outputs) == 1 for r in results)

    async def stored_completed() -> int:
        return len(await store.list_runs(status=RunStatus.COMPLETED.value, workflow="idle"))

    return Parking(park, wake_all, store.path, stored_completed=stored_completed)


async def many_durable_runs() -> RunFn:
    store = _store("treadle-many.sqlite")
    wf = _chain_workflow(DURABLE_RUN_STEPS)
    return lambda: asyncio.gather(
        *(wf.run(0, store=store, durability="sync") for _ in range(DURABLE_RUNS))
    )


async def growing_state() -> Growing:
    store = _store("treadle-growing.sqlite")

    async def run(n: int) -> int:
        @executor(id="grow")
        async def grow(i: int, ctx: WorkflowContext[int]) -> None:
            calls.n += 1
            stamps.append(time.perf_counter())
            ctx.state.set("log", [item(i)])
            if i < n:
                ctx.send_message(i + 1)
            else:
                ctx.yield_output(i)

        wf = (
            WorkflowBuilder(start=grow)
            .add_edge(grow, grow)
            .add_state("log", default=[], reducer=operator.add)
            .build()
        )
        result = await wf.run(1, store=store, durability="sync", max_supersteps=n + 10)
        expect(result.outputs, [n], "outputs")
        return len(result.state["log"])

    return Growing(run, store.path)
