"""An "agent" call that may hang: a handler timeout with retries, and a fallback.

1. ``@executor(timeout=60, retry=RetryPolicy(...))``: an attempt that runs past
   60 s is abandoned with ``HandlerTimeoutError`` (nothing it did commits) and
   the policy tries again after a backoff. If the last attempt times out too,
   the run FAILS: there is no "on failure, go there" edge.
2. So a fallback is decided inside the handler: ``careful_agent`` bounds each
   model call itself and, after two slow ones, hands the question to a cheap
   ``fallback`` executor.

Run it with ``python examples/long_running_agent_timeout.py`` (a FakeClock:
the minutes pass at once; see docs/long-running.md to use real time).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from treadle import (
    Clock,
    ExponentialBackoff,
    RetryPolicy,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.errors import HandlerTimeoutError, WorkflowRunError
from treadle.events import ExecutorFailed
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1_772_438_400.0  # 2026-03-02 08:00 UTC
RETRY = RetryPolicy(
    max_attempts=3,
    backoff=ExponentialBackoff(initial=5, jitter=0),  # 5 s, then 10 s
    retry_on=(HandlerTimeoutError,),
)


@dataclass(frozen=True)
class Fallback:
    question: str


@dataclass
class Model:
    """A stand-in for a model API: call n takes ``latencies[n]`` seconds."""

    clock: Clock
    latencies: list[float]
    calls: int = 0

    async def answer(self, question: str) -> str:
        latency = self.latencies[min(self.calls, len(self.latencies) - 1)]
        self.calls += 1
        await self.clock.sleep_until(self.clock.now() + latency)
        return f"answer to {question!r} (took {latency:g}s)"


async def within(clock: Clock, seconds: float, work):
    """``await work``, or ``None`` if it takes over ``seconds`` on ``clock``.

    With the system clock, ``asyncio.timeout(seconds)`` does the same; this
    one reads the injected clock, so the example runs on fake time.
    """
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep_until(clock.now() + seconds))
    await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    timer.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


def build(model: Model, store: SqliteStore, clock: Clock):
    @executor(timeout=60, retry=RETRY)
    async def agent(question: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await model.answer(question))

    @executor
    async def careful_agent(question: str, ctx: WorkflowContext[Fallback]) -> None:
        for _ in range(2):
            answer = await within(clock, 60, model.answer(question))
            if answer is not None:
                ctx.yield_output(answer)
                return
        ctx.send_message(Fallback(question))

    @executor
    async def fallback(job: Fallback, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"no quick answer to {job.question!r}: a person will follow up")

    retrying = WorkflowBuilder(start=agent, name="agent", store=store, clock=clock).build()
    careful = (
        WorkflowBuilder(start=careful_agent, name="careful", store=store, clock=clock)
        .add_edge(careful_agent, fallback)
        .build()
    )
    return retrying, careful


async def ask(workflow, question: str, clock: Clock) -> dict:
    started = clock.now()
    run = workflow.run(question)
    try:
        result = await (clock.run(run) if isinstance(clock, FakeClock) else run)
    except WorkflowRunError as error:  # the last attempt failed too: the run is FAILED
        result = error.result
        print(f"    {error}")
    for event in result.events:
        if isinstance(event, ExecutorFailed) and event.retrying:
            print(f"    attempt {event.attempt}: {type(event.error).__name__}, retrying")
    print(f"  {result.status.value} at +{clock.now() - started:g}s: {result.outputs}")
    return {"status": result.status, "outputs": result.outputs, "took": clock.now() - started}


async def main(path: str | None = None, clock: Clock | None = None) -> dict:
    clock = clock or FakeClock(start=START)
    hangs_once = Model(clock, latencies=[600, 20])
    always_hangs = Model(clock, latencies=[600])
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(path or Path(tmp) / "runs.sqlite")
        try:
            print("agent, timeout=60 and 3 attempts; the model hangs once:")
            recovered = await ask(build(hangs_once, store, clock)[0], "status?", clock)
            print("the same agent; the model always hangs:")
            failed = await ask(build(always_hangs, store, clock)[0], "status?", clock)
            calls_before = always_hangs.calls
            print("careful_agent, 2 calls of at most 60 s each, then a fallback:")
            fell_back = await ask(build(always_hangs, store, clock)[1], "status?", clock)
        finally:
            await store.close()
    return {
        "recovered": recovered | {"calls": hangs_once.calls},
        "failed": failed | {"calls": calls_before},
        "fell_back": fell_back | {"calls": always_hangs.calls - calls_before},
    }


if __name__ == "__main__":
    asyncio.run(main())
