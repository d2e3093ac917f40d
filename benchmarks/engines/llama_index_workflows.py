"""LlamaIndex Workflows (the ``workflows`` package): ``@step`` functions routed by event type.

A step is selected by the type of event it accepts, so a chain of N nodes is N
steps over N event classes (built here in a loop and attached to a ``Workflow``
subclass with ``@step(workflow=...)``). One ``Workflow`` instance serves every run;
``timeout=None`` turns off the per-run deadline (2,000-step loops outlast the 45 s
default on slow engines).

Fan-out / fan-in uses the package's collection streams: the source returns a
``list[Work]`` of 100 events, one ``work`` step (``num_workers=100``, so all 100 run
concurrently) handles each, and the sink's ``list[Done]`` parameter fires once with
every result. That is the idiomatic parallel form here: 100 invocations of one step
rather than 100 distinct steps.
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
from workflows import Workflow, step
from workflows.events import Event, StartEvent, StopEvent

ABSENT = {
    "ckpt_chain": "no per-step durable store in the library: a run's context can be "
    "serialized by hand, SQLite persistence exists only in the separate workflow server",
    "ckpt_chain_background": "no per-step durable store in the library (see `ckpt_chain`)",
    "ckpt_chain_batched": "no per-step durable store in the library (see `ckpt_chain`)",
    "idle_runs": "no durable timer or store in the library: `ctx.wait_for_event` waits inside "
    "the live process (the run stays in memory, with a timeout), and its SQLite store is in "
    "the separate llama-agents-server package",
    "many_durable_runs": "no per-step durable store in the library (see `ckpt_chain`)",
    "growing_state": "no per-step durable store in the library (see `ckpt_chain`)",
}
NOTES = {"fanout": "one `work` step with num_workers=100 handling 100 events"}


class Msg(Event):
    x: int


def _chain_workflow(n: int) -> Workflow:
    """N steps s0..s{n-1}; s_i accepts event class E_i and returns E_{i+1} (or StopEvent)."""
    wf_cls: type[Workflow] = type(f"Chain{n}", (Workflow,), {})
    events: list[type[Event]] = [StartEvent] + [
        type(f"E{i}", (Msg,), {"__module__": __name__}) for i in range(1, n)
    ]
    for i in range(n):
        step_fn = _make_step(events[i], events[i + 1] if i + 1 < n else StopEvent)
        step_fn.__name__ = step_fn.__qualname__ = f"s{i}"
        step(workflow=wf_cls)(step_fn)
    return wf_cls(timeout=None)


def _make_step(accepts: type[Event], returns: type[Event]) -> Any:
    if returns is StopEvent:

        async def last(ev: Any) -> Any:
            calls.n += 1
            return StopEvent(result=ev.x)

        fn = last
    else:

        async def forward(ev: Any) -> Any:
            calls.n += 1
            return returns(x=ev.x + 1 if isinstance(ev, Msg) else 1)

        fn = forward
    fn.__annotations__ = {"ev": accepts, "return": returns}
    return fn


async def chain() -> RunFn:
    wf = _chain_workflow(CHAIN_NODES)
    return wf.run


class Work(Event):
    x: int


class Done(Event):
    x: int


class FanOut(Workflow):
    @step
    async def src(self, ev: StartEvent) -> list[Work]:
        calls.n += 1
        return [Work(x=i) for i in range(FANOUT_WIDTH)]

    @step(num_workers=FANOUT_WIDTH)
    async def work(self, ev: Work) -> Done:
        calls.n += 1
        return Done(x=ev.x)

    @step
    async def sink(self, results: list[Done]) -> StopEvent:
        calls.n += 1
        expect(len(results), FANOUT_WIDTH, "fan-in results")
        return StopEvent(result=len(results))


async def fanout() -> RunFn:
    wf = FanOut(timeout=None)
    return wf.run


class Ping(Event):
    x: int


class Pong(Event):
    x: int


class Loop(Workflow):
    @step
    async def a(self, ev: StartEvent | Pong) -> Ping:
        calls.n += 1
        return Ping(x=ev.x + 1 if isinstance(ev, Pong) else 1)

    @step
    async def b(self, ev: Ping) -> Pong | StopEvent:
        calls.n += 1
        if ev.x < LOOP_ITERATIONS:
            return Pong(x=ev.x)
        return StopEvent(result=ev.x)


async def loop() -> RunFn:
    wf = Loop(timeout=None)
    return wf.run


async def many_runs() -> RunFn:
    wf = _chain_workflow(MANY_RUNS_CHAIN)
    return lambda: asyncio.gather(*(wf.run() for _ in range(MANY_RUNS)))
