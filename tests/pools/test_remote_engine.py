"""The engine's side of a pool, through a pool that is only a wire: no cluster needed.

``WirePool`` pickles each job as Dask would (cloudpickle), with an audit of
every object the pickle holds, runs it on a thread, and delivers the events
it emits however a test asks: late, twice, out of order, or not at all.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import operator
from dataclasses import dataclass

import cloudpickle
import pytest

from treadle import ExponentialBackoff, RetryPolicy, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError, PoolError, WorkerLostError
from treadle.events import ExecutorFailed, ProgressEvent
from treadle.testing import FakeClock


@dataclass(frozen=True)
class Doc:
    title: str


class _Audit(cloudpickle.Pickler):
    """Notes the type of every object pickled by way of a reducer (all but plain builtins)."""

    def __init__(self, file, seen: list[type]) -> None:
        super().__init__(file)
        self.seen = seen

    def reducer_override(self, obj):
        self.seen.append(type(obj))
        return super().reducer_override(obj)


class WirePool:
    """A pool that ships each job through a pickle and runs it on a thread."""

    def __init__(self, delivery: str = "live", failures: list[BaseException] | None = None):
        self.delivery = delivery
        self.failures = failures or []
        self.pickled: list[type] = []
        self.jobs: list[object] = []

    async def run(self, job, on_event):
        if self.failures:
            raise self.failures.pop(0)
        buffer = io.BytesIO()
        _Audit(buffer, self.pickled).dump(job)
        shipped = cloudpickle.loads(buffer.getvalue())
        self.jobs.append(shipped)
        emitted: list[bytes] = []
        result = await asyncio.to_thread(shipped, emitted.append)
        if self.delivery == "scrambled":  # some twice, some out of order, one never
            for data in [*reversed(emitted[1:]), *emitted[1:]]:
                on_event(data)
        elif self.delivery == "live":
            for data in emitted:
                on_event(data)
        return result


def counting(n: int, ctx: WorkflowContext[int]) -> None:
    for step in range(5):
        ctx.report_progress(step, 5, f"step {step}")
    ctx.add_event({"done": n})
    ctx.send_message(n + 1)


@executor
async def sink(n: int, ctx: WorkflowContext) -> None:
    ctx.yield_output(n)


@executor
async def keep_doc(doc: Doc, ctx: WorkflowContext) -> None:
    ctx.yield_output(doc)


def counted(pool, retry=None):
    counter = executor(id="counter", pool=pool, retry=retry)(counting)
    return WorkflowBuilder(start=counter).add_edge(counter, sink).build()


@pytest.mark.parametrize("delivery", ["live", "scrambled", "with-the-result-only"])
async def test_events_arriving_early_late_twice_or_out_of_order_are_published_once_in_order(
    delivery,
):
    result = await counted(WirePool(delivery)).run(1)
    progress = [e.message for e in result.events if isinstance(e, ProgressEvent)]
    assert progress == [f"step {n}" for n in range(5)]
    assert result.outputs == [2]


async def test_no_user_value_is_pickled_on_the_way_to_a_worker():
    def title_it(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
        ctx.send_message(Doc(ctx.state["prefix"].title + doc.title))

    pool = WirePool()
    titled = executor(id="title", pool=pool)(title_it)
    workflow = WorkflowBuilder(start=titled).add_edge(titled, keep_doc).build()
    result = await workflow.run(Doc("report"), state={"prefix": Doc("annual ")})

    assert result.outputs == [Doc("annual report")]
    assert Doc not in pool.pickled  # the class travels by name; no instance of it does
    [job] = pool.jobs
    assert json.loads(job.message)["v"] == {"title": "report"}  # the serializer's JSON
    assert json.loads(job.view)["prefix"]["v"] == {"title": "annual "}


async def test_a_pool_that_loses_its_worker_fails_the_attempt_and_the_retry_policy_decides():
    lost = WorkerLostError("counter", "the worker running it died")
    quickly = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(initial=0.01))
    retried = counted(WirePool(failures=[lost]), retry=quickly)
    result = await retried.run(1)
    [failed] = [e for e in result.events if isinstance(e, ExecutorFailed)]
    assert failed.error is lost
    assert failed.retrying
    assert result.outputs == [2]

    unreachable = PoolError("counter", "cannot reach tcp://nowhere:8786")
    with pytest.raises(ExecutorFailedError) as caught:
        await counted(WirePool(failures=[unreachable])).run(1)
    assert caught.value.__cause__ is unreachable


async def test_two_sets_of_a_reducer_key_read_back_as_the_barrier_will_merge_them():
    def add_twice(n: int, ctx: WorkflowContext) -> None:
        ctx.state.set("total", n)
        ctx.state.set("total", n)
        ctx.yield_output(ctx.state["total"])

    adder = executor(id="adder", pool=WirePool())(add_twice)
    workflow = (
        WorkflowBuilder(start=adder).add_state("total", default=10, reducer=operator.add).build()
    )
    result = await workflow.run(5)
    assert result.outputs == [20]
    assert result.state == {"total": 20}


async def test_handoffs_and_scheduled_messages_of_a_remote_handler_replay_as_local_ones():
    clock = FakeClock(start=0)

    def plan(n: int, ctx: WorkflowContext[str]) -> None:
        ctx.schedule_message("reminder", after=dt.timedelta(hours=1))
        ctx.handoff("inbox", "handed", reason="busy")
        ctx.send_message("now")

    async def note(text: str, ctx: WorkflowContext) -> None:
        handoff = ctx.handoff_context
        ctx.yield_output((text, clock.now(), handoff.reason if handoff else None))

    planner = executor(id="plan", pool=WirePool())(plan)
    inbox = executor(id="inbox")(note)
    workflow = (
        WorkflowBuilder(start=planner, clock=clock)
        .add_edge(planner, inbox)
        .add_handoff(planner, [inbox])
        .build()
    )
    result = await clock.run(workflow.run(1))
    assert result.outputs == [("handed", 0, "busy"), ("now", 0, None), ("reminder", 3600.0, None)]
