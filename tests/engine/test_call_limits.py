"""Call limits in one process: slots across a superstep's invocations and across runs.

A limit changes when an invocation runs, never what its superstep
commits: the property below runs generated fan-outs with and without
limits and compares everything they commit.
"""

import asyncio
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treadle import CallLimit, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError, LeaseLostError, WorkflowValidationError
from treadle.stores import MemoryStore, SqliteStore


class Gauge:
    """How many calls run at once, and the most there ever were."""

    def __init__(self, seconds: float = 0.002) -> None:
        self.seconds = seconds
        self.now = 0
        self.most = 0
        self.calls = 0

    async def call(self) -> None:
        self.now += 1
        self.calls += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(self.seconds)
        self.now -= 1


def fan_out_workflow(gauge: Gauge, width: int, limits=(), names=("api",), name="fan"):
    @executor(id="start")
    async def start(n: int, ctx: WorkflowContext) -> None:
        ctx.send_message(n)

    def worker(i: int):
        @executor(id=f"w{i}", limits=list(names) if limits else [])
        async def work(n: int, ctx: WorkflowContext) -> None:
            await gauge.call()
            ctx.send_message(n * 10 + i)

        return work

    @executor(id="join")
    async def join(values: list, ctx: WorkflowContext) -> None:
        ctx.yield_output(sorted(values))

    workers = [worker(i) for i in range(width)]
    builder = WorkflowBuilder(start, name=name, limits=list(limits))
    builder.add_fan_out(start, workers).add_fan_in(workers, join)
    return builder.build()


async def test_a_superstep_runs_no_more_calls_at_once_than_its_limit():
    gauge = Gauge()
    workflow = fan_out_workflow(gauge, 8, [CallLimit("api", concurrency=2)])
    result = await workflow.run(1)
    assert result.outputs == [[10 + i for i in range(8)]]
    assert gauge.calls == 8
    assert gauge.most == 2


async def test_runs_of_one_process_share_a_limit():
    gauge = Gauge()
    workflow = fan_out_workflow(gauge, 4, [CallLimit("api", concurrency=3)])
    results = await asyncio.gather(*(workflow.run(n) for n in range(20)))
    assert all(r.status.value == "completed" for r in results)
    assert gauge.calls == 80
    assert gauge.most == 3


async def test_a_runtime_shares_its_limit_across_workflows_and_its_terms_win():
    gauge = Gauge()
    first = fan_out_workflow(gauge, 4, ["api"], name="first")
    second = fan_out_workflow(gauge, 4, [CallLimit("api", concurrency=50)], name="second")
    runtime = Runtime(MemoryStore(), [first, second], limits=[CallLimit("api", concurrency=2)])
    async with runtime:
        results = await asyncio.gather(
            *(runtime.start(w, n) for n in range(6) for w in ("first", "second"))
        )
    assert all(r.status.value == "completed" for r in results)
    assert gauge.most == 2


def test_an_unknown_limit_name_is_a_build_error_naming_the_executor_and_the_limit():
    @executor(id="caller", limits=["opneai"])
    async def caller(n: int, ctx: WorkflowContext) -> None: ...

    with pytest.raises(WorkflowValidationError) as raised:
        WorkflowBuilder(caller, limits=[CallLimit("openai", concurrency=1)]).build()
    assert "executor 'caller' names limit 'opneai'" in str(raised.value)


def test_a_runtime_refuses_a_workflow_whose_hosted_limit_it_does_not_declare():
    @executor(id="caller", limits=["openai"])
    async def caller(n: int, ctx: WorkflowContext) -> None: ...

    workflow = WorkflowBuilder(caller, name="asks", limits=["openai"]).build()
    with pytest.raises(WorkflowValidationError) as raised:
        Runtime(MemoryStore(), [workflow])
    assert "executor 'caller' names limit 'openai'" in str(raised.value)
    assert "'asks'" in str(raised.value)


def test_limit_values_are_checked_where_they_enter():
    assert CallLimit("a", rate="500/min").window.per == 60
    assert CallLimit("a", rate="3/5s").window.calls == 3
    assert CallLimit("a", rate="3/5s").window.per == 5
    with pytest.raises(ValueError, match="caps nothing"):
        CallLimit("a")
    with pytest.raises(ValueError, match="'500 a minute' is not calls per time"):
        CallLimit("a", rate="500 a minute")
    assert CallLimit("a", rate="10/mins").window.per == 60  # a word's plural
    assert CallLimit("a", rate="10/hours").window.per == 3600
    for no_unit in ("10/ms", "10/hs", "10/ds"):  # 10/ms was read as ten a minute
        with pytest.raises(ValueError, match=f"'{no_unit}' is not calls per time"):
            CallLimit("a", rate=no_unit)
    with pytest.raises(ValueError, match="'200k/ms' is not tokens per time"):
        CallLimit("a", tokens="200k/ms", estimate=1)
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        CallLimit("a", concurrency=0)
    with pytest.raises(TypeError, match="must be a list of limit names"):
        executor(limits="openai")(lambda n, ctx: None)


# -- a limit never changes what a superstep commits ------------------------------------
@dataclass(frozen=True)
class Shape:
    width: int
    rounds: int
    concurrency: int | None
    rate: int | None
    keyed: bool


@st.composite
def shapes(draw):
    concurrency = draw(st.one_of(st.none(), st.integers(1, 4)))
    rate = (
        draw(st.integers(2, 40))
        if concurrency is None
        else draw(st.one_of(st.none(), st.integers(2, 40)))
    )
    return Shape(
        draw(st.integers(1, 6)), draw(st.integers(1, 3)), concurrency, rate, draw(st.booleans())
    )


def looped_workflow(shape: Shape, limited: bool):
    @executor(id="start")
    async def start(n: int, ctx: WorkflowContext) -> None:
        ctx.send_message(n)

    def worker(i: int):
        @executor(id=f"w{i}", limits=["api"] if limited else [])
        async def work(n: int, ctx: WorkflowContext) -> None:
            await asyncio.sleep(random.random() / 1000)
            ctx.state.update("calls", lambda v: v + 1)
            ctx.state.set(f"w{i}", n)
            ctx.yield_output((ctx.executor_id, n))
            ctx.send_message(n * 7 + i)

        return work

    @executor(id="join")
    async def join(values: list, ctx: WorkflowContext) -> None:
        ctx.yield_output(("join", values))
        if len(ctx.state.get("rounds")) < shape.rounds:
            ctx.state.update("rounds", lambda v: [*v, sum(values) % 101])
            ctx.send_message(sum(values) % 101)

    workers = [worker(i) for i in range(shape.width)]
    rate = f"{shape.rate}/s" if shape.rate else None
    key = (lambda call: f"t{call.message % 2}") if shape.keyed else None
    limits = (
        [CallLimit("api", concurrency=shape.concurrency, rate=rate, key=key)] if limited else []
    )
    builder = WorkflowBuilder(start, name="looped", limits=limits)
    builder.add_state("calls", default=0).add_state("rounds", default=[])
    builder.add_fan_out(start, workers).add_fan_in(workers, join).add_edge(join, start)
    return builder.build()


def committed(result):
    events = [
        (type(e).__name__, getattr(e, "executor_id", None), getattr(e, "superstep", None))
        for e in result.events
        if type(e).__name__ not in ("ExecutorInvoked", "ExecutorCompleted")
    ]
    return result.status, result.outputs, dict(result.state), events


def limited_equals_unlimited(max_examples: int):
    """The property at a budget of examples (hypothesis fixes the budget as it decorates)."""

    @settings(
        max_examples=max_examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(shapes(), st.integers(0, 100))
    def check(shape, seed):
        async def scenario():
            unlimited = await looped_workflow(shape, limited=False).run(seed)
            limited = await looped_workflow(shape, limited=True).run(seed)
            assert committed(limited) == committed(unlimited)
            assert limited.state["calls"] == shape.width * (shape.rounds + 1)

        asyncio.run(scenario())

    return check


# A rate of 2 a second over 24 calls waits 12 s of wall clock: 8 shapes in the default
# suite, 15 under `make soak`.
test_a_limited_run_commits_what_an_unlimited_run_commits = limited_equals_unlimited(8)
test_a_limited_run_commits_what_an_unlimited_run_commits_at_full_budget = pytest.mark.soak(
    limited_equals_unlimited(15)
)


async def test_stored_runs_count_their_slots_in_the_store(tmp_path):
    gauge = Gauge(seconds=0.1)
    workflow = fan_out_workflow(gauge, 4, [CallLimit("api", concurrency=3)])
    store = SqliteStore(tmp_path / "runs.db")
    try:
        results = await asyncio.gather(*(workflow.run(n, store=store) for n in range(12)))
    finally:
        await store.close()
    assert all(r.status.value == "completed" for r in results)
    assert gauge.calls == 48
    assert gauge.most == 3


async def test_a_run_whose_lease_is_lost_as_its_call_enters_the_line_is_left_to_its_next_owner(
    tmp_path, monkeypatch
):
    # Its call's entry in the limit's line is refused (the lease ran out or was taken
    # over): the process writes nothing more for the run, not even that the call
    # failed, so whoever owns it next goes on with it; its caller is told why.
    @executor(id="call", limits=["api"])
    async def call(n: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(n)

    workflow = WorkflowBuilder(call, limits=[CallLimit("api", concurrency=1)]).build()
    store = SqliteStore(tmp_path / "runs.db")

    async def refused(terms, entry, lease, gate):
        raise LeaseLostError(lease.run_id, lease.epoch)

    monkeypatch.setattr(store, "take_slot", refused)
    try:
        with pytest.raises(ExecutorFailedError) as raised:
            await workflow.run(1, store=store, run_id="r1")
        row = await store.get_run("r1")
        kinds = [e.kind for e in await store.read_events("r1")]
    finally:
        await store.close()
    assert isinstance(raised.value.__cause__, LeaseLostError)
    assert (row.status, row.error) == ("running", None)
    assert "executor_failed" not in kinds
    assert kinds.count("status_changed") == 1  # its start's, nothing after
