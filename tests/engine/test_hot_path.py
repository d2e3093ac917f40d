"""The hot path's shapes and shortcuts keep the semantics of the slow path.

Handlers that never wait run inline, with no task of their own; one that
waits is run to the end by the task that started it. These tests pin what
a handler can observe of that (its task, its context variables, its
timeouts, failures) and the named values the engine passes around.
"""

import asyncio
import contextvars
import dataclasses
import sys
import time
import uuid

import pytest

from treadle import Case, Default, WorkflowBuilder, WorkflowContext, executor
from treadle._engine import _events as ev
from treadle._engine._result import RunStatus
from treadle._engine._routing import Router
from treadle._graph._edges import DirectEdge, FanInEdge, FanOutEdge, SwitchEdge
from treadle._values._ids import new_checkpoint_id, new_run_id
from treadle.errors import ExecutorFailedError

REQUEST = contextvars.ContextVar("REQUEST", default="unset")


def fan_out(branches, *, sink=None, start_message_type=str):
    """src -> branches (-> sink as a fan-in, if given)."""

    @executor(id="src", accepts=start_message_type)
    async def src(msg, ctx: WorkflowContext) -> None:
        ctx.send_message(msg)

    builder = WorkflowBuilder(start=src).add_fan_out(src, branches)
    if sink is not None:
        builder.add_fan_in(branches, sink)
    return builder.build()


# -- events built without keyword handling ----------------------------------------------
@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (
            ev.superstep_started("r", 3, ("a", "b")),
            ev.SuperstepStarted(run_id="r", superstep=3, executor_ids=("a", "b")),
        ),
        (ev.superstep_completed("r", 3), ev.SuperstepCompleted(run_id="r", superstep=3)),
        (
            ev.executor_invoked("r", 3, "a", 2, 4),
            ev.ExecutorInvoked(run_id="r", superstep=3, executor_id="a", position=2, attempt=4),
        ),
        (
            ev.executor_completed("r", 3, "a", 2),
            ev.ExecutorCompleted(run_id="r", superstep=3, executor_id="a", position=2),
        ),
        (ev.run_started("r", 0), ev.RunStarted(run_id="r", superstep=0)),
        (
            ev.checkpoint_saved("r", 3, "c-1"),
            ev.CheckpointSaved(run_id="r", superstep=3, checkpoint_id="c-1"),
        ),
        (
            ev.status_changed("r", 5, RunStatus.FAILED, KeyError("k")),
            ev.StatusChanged(run_id="r", superstep=5, status=RunStatus.FAILED, error=None),
        ),
        (
            ev.output_produced("r", 3, "a", {"v": 1}),
            ev.OutputEvent(run_id="r", superstep=3, executor_id="a", value={"v": 1}),
        ),
    ],
)
def test_each_fast_event_builder_sets_every_field_as_the_constructor_does(built, expected):
    assert type(built) is type(expected)
    got = {f.name: getattr(built, f.name) for f in dataclasses.fields(built)}
    want = {f.name: getattr(expected, f.name) for f in dataclasses.fields(expected)}
    if "error" in got:  # exceptions compare by identity: compare what they say
        assert repr(got.pop("error")) == repr(KeyError("k"))
        want.pop("error")
    assert got == want


# -- routes are named classes ---------------------------------------------------------------
def test_static_routes_are_one_shared_tuple_and_the_others_follow_each_message():
    edges = [
        DirectEdge("a", "b"),
        FanOutEdge("a", ("c", "d")),
        FanInEdge(("a", "x"), "j"),
        DirectEdge("s", "b", condition=lambda m: m > 0),
        SwitchEdge("w", ((lambda m: m == 1, "b"),), "c"),
    ]
    router = Router(edges, lambda target, cls: True)
    first = router.route("a", 1)
    assert first == (("b", -1), ("c", -1), ("d", -1), ("j", 0))
    assert router.route("a", 2) is first  # compiled once, handed out as is
    assert router.route("s", 1) == [("b", -1)]
    assert router.route("s", 0) == []
    assert router.route("w", 1) == [("b", -1)]
    assert router.route("w", 2) == [("c", -1)]


# -- handlers that never wait run inline --------------------------------------------------
async def test_handlers_that_never_wait_run_in_the_callers_task():
    seen: list[asyncio.Task | None] = []

    def branch(name):
        @executor(id=name)
        async def handle(msg: str, ctx: WorkflowContext) -> None:
            seen.append(asyncio.current_task())
            ctx.yield_output(name)

        return handle

    workflow = fan_out([branch(f"b{i}") for i in range(5)])
    result = await workflow.run("go")
    assert result.outputs == [f"b{i}" for i in range(5)]
    if sys.version_info >= (3, 12):  # the standard library's eager tasks, done as they started
        assert asyncio.current_task() not in seen
        assert all(task is not None and task.done() for task in seen)
    else:  # started by hand in the caller's task: no task at all
        assert set(seen) == {asyncio.current_task()}


async def test_a_handler_keeps_its_task_across_its_waits_and_asyncio_timeout_works():
    tasks: dict[str, list[asyncio.Task | None]] = {}

    def branch(name, *, hang: bool):
        @executor(id=name)
        async def handle(msg: str, ctx: WorkflowContext) -> None:
            mine = tasks.setdefault(name, [asyncio.current_task()])
            await asyncio.sleep(0)
            mine.append(asyncio.current_task())
            try:
                async with asyncio.timeout(0.01 if hang else 5):
                    if hang:
                        await asyncio.Event().wait()
                    await asyncio.sleep(0)
            except TimeoutError:
                ctx.yield_output(f"{name} timed out")
                return
            mine.append(asyncio.current_task())
            ctx.yield_output(f"{name} done")

        return handle

    branches = [branch("quick", hang=False), branch("hung", hang=True), branch("last", hang=False)]
    workflow = fan_out(branches)
    result = await asyncio.wait_for(workflow.run("go"), 5)
    assert result.outputs == ["quick done", "hung timed out", "last done"]
    for name, seen in tasks.items():
        assert len(set(seen)) == 1, f"{name} changed tasks across its waits"


async def test_each_handler_starts_in_a_context_of_its_own():
    seen = []

    def branch(name):
        @executor(id=name)
        async def handle(msg: str, ctx: WorkflowContext) -> None:
            seen.append((name, REQUEST.get()))
            REQUEST.set(name)  # must not leak to the next sibling, nor to the caller
            if name == "b1":
                await asyncio.sleep(0)
                seen.append((name, REQUEST.get()))

        return handle

    workflow = fan_out([branch(f"b{i}") for i in range(4)])
    token = REQUEST.set("caller")
    try:
        await workflow.run("go")
        assert REQUEST.get() == "caller"
    finally:
        REQUEST.reset(token)
    assert sorted(seen) == sorted(
        [("b0", "caller"), ("b1", "caller"), ("b1", "b1"), ("b2", "caller"), ("b3", "caller")]
    )


async def test_waiting_and_returning_handlers_commit_in_stamp_order():
    @executor(id="sink")
    async def sink(msg: list[str], ctx: WorkflowContext) -> None:
        ctx.yield_output(msg)

    def branch(name, waits):
        @executor(id=name)
        async def handle(msg: str, ctx: WorkflowContext[str]) -> None:
            for _ in range(waits):
                await asyncio.sleep(0)
            ctx.send_message(name)

        return handle

    branches = [branch(f"b{i}", waits) for i, waits in enumerate([3, 0, 2, 0, 1, 0])]
    result = await fan_out(branches, sink=sink).run("go")
    assert result.outputs == [[f"b{i}" for i in range(6)]]


@pytest.mark.parametrize(
    ("waits", "reported"),
    [
        # b0 waits, b2 fails inline meanwhile, b0 fails on waking (before the
        # cancellation reaches it): the lower rank is reported, as with a task each.
        ({"b0": True, "b2": False}, "b0"),
        # b0 waits for good, b2 fails inline: b0 is cancelled, b2 reported.
        ({"b0": "forever", "b2": False}, "b2"),
        # b0 fails inline: nothing after it starts.
        ({"b0": False, "b2": True}, "b0"),
        # Both fail inline: b0 first, and nothing after it starts.
        ({"b0": False, "b2": False}, "b0"),
    ],
)
async def test_a_failure_cancels_the_rest_and_is_reported_whether_it_waited_or_not(waits, reported):
    started = []

    def branch(name, *, fail: bool):
        @executor(id=name)
        async def handle(msg: str, ctx: WorkflowContext) -> None:
            started.append(name)
            if waits.get(name) == "forever":
                await asyncio.Event().wait()
            elif waits.get(name):
                await asyncio.sleep(0)
            if fail:
                raise ValueError(name)

        return handle

    branches = [branch("b0", fail=True), branch("b1", fail=False), branch("b2", fail=True)]
    with pytest.raises(ExecutorFailedError) as caught:
        await fan_out(branches).run("go")
    assert caught.value.executor_id == reported
    assert caught.value.result.status is RunStatus.FAILED
    if not waits["b0"]:
        assert started == ["b0"]


async def test_a_switch_with_a_default_routes_each_message_by_its_own_value():
    outputs = []

    def leaf(name):
        @executor(id=name)
        async def handle(msg: int, ctx: WorkflowContext) -> None:
            outputs.append((name, msg))

        return handle

    @executor(id="start")
    async def start(msg: int, ctx: WorkflowContext[int]) -> None:
        for n in range(msg):
            ctx.send_message(n)

    small, big = leaf("small"), leaf("big")
    workflow = (
        WorkflowBuilder(start=start)
        .add_switch(start, [Case(lambda n: n < 2, small), Default(big)])
        .build()
    )
    await workflow.run(4)
    assert sorted(outputs) == [("big", 2), ("big", 3), ("small", 0), ("small", 1)]


def test_fresh_ids_are_uuid7s_in_hex_unique_and_ordered_by_when_they_were_made():
    for make in (new_run_id, new_checkpoint_id):
        before = time.time_ns() // 1_000_000
        ids = [make() for _ in range(2_000)]
        after = time.time_ns() // 1_000_000
        assert len(set(ids)) == len(ids)
        for made in ids:
            parsed = uuid.UUID(hex=made)
            assert (parsed.version, parsed.variant, parsed.hex) == (7, uuid.RFC_4122, made)
            assert before <= int(made[:12], 16) <= after  # the time it was made, in ms
        time.sleep(0.002)
        # Made in a later millisecond, it sorts after every earlier one: it goes
        # in at the end of a store's indexes rather than anywhere in them.
        assert make() > max(ids)


async def test_runs_opened_without_options_use_their_own_workflows_defaults():
    @executor(id="again")
    async def again(msg: int, ctx: WorkflowContext[int]) -> None:
        if msg < 5:
            ctx.send_message(msg + 1)

    def build(max_supersteps):
        return (
            WorkflowBuilder(start=again, max_supersteps=max_supersteps)
            .add_edge(again, again)
            .build()
        )

    roomy, tight = build(100), build(3)
    assert (await roomy.run(0)).status is RunStatus.COMPLETED
    with pytest.raises(Exception, match="max_supersteps=3"):
        await tight.run(0)
    assert (await roomy.run(0)).status is RunStatus.COMPLETED
