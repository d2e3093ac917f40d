"""Start policies through ``Workflow.run`` and ``Runtime``: what a start is told, when runs go.

One process, every store backend. Starters racing as separate processes
are ``test_start_races.py``'s; what each store decides is
``tests/stores/test_store_starts.py``'s.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from treadle import (
    Actor,
    Role,
    RunStatus,
    Runtime,
    StartPolicy,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle._operations._bulk import BulkAction, run_bulk
from treadle._values._filter import parse_filter
from treadle.errors import RequestError, StartRefusedError
from treadle.stores import MemoryStore
from treadle.testing import FakeClock


@executor(id="ask")
async def ask(customer: str, ctx: WorkflowContext) -> None:
    """Rests on a request, so its run holds its slot until answered."""
    ctx.yield_output(await ctx.request(f"approve {customer}?", str))


@executor(id="echo")
async def echo(text: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(text)


def asking(policy: StartPolicy, name: str = "asking"):
    return WorkflowBuilder(start=ask, name=name, start_policy=policy).build()


def by_prefix(text: str) -> str:
    return text.split("-", maxsplit=1)[0]


async def answer(workflow, store, result):
    (request,) = result.pending_requests
    return await workflow.respond(result.run_id, {request.request_id: "ok"}, store=store)


async def test_a_second_start_with_one_deduplication_id_is_told_the_first_run(store):
    workflow = WorkflowBuilder(start=echo, name="echo").build()
    alice = Actor("python", "alice", "python", Role.OPERATOR)
    first = await workflow.run("a", store=store, deduplication_id="click-1", actor=alice)
    again = await workflow.run("b", store=store, deduplication_id="click-1")
    other = await workflow.run("c", store=store, deduplication_id="click-2")
    assert (first.status, first.outputs, first.deduplicated) == (RunStatus.COMPLETED, ["a"], False)
    assert (again.run_id, again.status, again.outputs) == (first.run_id, RunStatus.COMPLETED, ["a"])
    assert again.deduplicated
    assert other.run_id != first.run_id
    assert len(await store.list_runs(workflow="echo")) == 2
    row = await store.get_run(first.run_id)
    assert json.loads(row.started_by)["name"] == "alice"  # who started it, kept with the run


async def test_a_singleton_runs_one_run_per_key_and_starts_the_next_when_it_ends(store):
    workflow = asking(StartPolicy(key=by_prefix, singleton=True))
    first = await workflow.run("acme-1", store=store)
    second = await workflow.run("acme-2", store=store)
    other = await workflow.run("globex-1", store=store)
    assert first.status == RunStatus.AWAITING_INPUT  # it holds acme until it ends
    assert (second.status, second.outputs) == (RunStatus.QUEUED, [])
    assert other.status == RunStatus.AWAITING_INPUT
    assert (await store.get_run(second.run_id)).status == "queued"
    with pytest.raises(RequestError, match="queued by its start policy and has not started"):
        await workflow.pause(second.run_id, store=store)
    async with Runtime(store, [workflow], poll_interval=3600) as runtime:
        assert await runtime.wake_due() == []  # acme is still held
        assert (await answer(workflow, store, first)).status == RunStatus.COMPLETED
        (started,) = await runtime.wake_due()
    assert (started.run_id, started.status) == (second.run_id, RunStatus.AWAITING_INPUT)
    assert started.pending_requests[0].payload == "approve acme-2?"


async def test_a_singleton_that_refuses_names_the_run_holding_its_key(store):
    workflow = asking(StartPolicy(key=by_prefix, singleton=True, when_busy="refuse"))
    first = await workflow.run("acme-1", store=store)
    with pytest.raises(StartRefusedError, match=first.run_id) as refused:
        await workflow.run("acme-2", store=store, run_id="refused")
    assert (refused.value.key, refused.value.holding) == ("acme", (first.run_id,))
    assert "when_busy" in str(refused.value)
    assert [row.run_id for row in await store.list_runs()] == [first.run_id]


async def test_a_workflows_queue_runs_at_most_its_concurrency(store):
    workflow = asking(StartPolicy(concurrency=2))
    results = [await workflow.run(f"c{i}", store=store) for i in range(4)]
    assert [r.status for r in results] == [RunStatus.AWAITING_INPUT] * 2 + [RunStatus.QUEUED] * 2
    async with Runtime(store, [workflow], poll_interval=3600) as runtime:
        await answer(workflow, store, results[0])
        (started,) = await runtime.wake_due()
        assert started.run_id == results[2].run_id  # first come, first started
        assert (await store.get_run(results[3].run_id)).status == "queued"


async def test_debounce_starts_one_run_with_the_last_input_once_starts_stop():
    store, clock = MemoryStore(), FakeClock()
    policy = StartPolicy(key=by_prefix, debounce=dt.timedelta(seconds=5))
    workflow = WorkflowBuilder(start=echo, name="debounced", start_policy=policy).build()
    ids = set()
    for text in ["acme-one", "acme-two", "acme-three"]:
        result = await workflow.run(text, store=store, clock=clock)
        assert result.status == RunStatus.QUEUED
        ids.add(result.run_id)
        await clock.advance(2)  # less than the window: it begins again
    assert len(ids) == 1
    runtime = Runtime(store, [workflow], clock=clock)
    assert await runtime.wake_due() == []  # 2 s since the last start
    await clock.advance(3)
    (started,) = await runtime.wake_due()
    assert (started.run_id, started.status, started.outputs) == (
        ids.pop(),
        RunStatus.COMPLETED,
        ["acme-three"],
    )
    assert await runtime.wake_due() == []


async def test_each_debounced_start_is_recorded_with_its_actor_and_the_input_it_gave(store):
    # Bob's start gives the waiting run his input, and the run runs with it: the record
    # said only that alice created it with hers, as if the run ran what alice asked.
    clock = FakeClock()
    policy = StartPolicy(key=by_prefix, debounce=5)
    workflow = WorkflowBuilder(start=echo, name="debounced", start_policy=policy).build()
    alice = Actor("python", "alice", "python", Role.OPERATOR)
    bob = Actor("python", "bob", "python", Role.OPERATOR)
    first = await workflow.run("acme-alice", store=store, clock=clock, actor=alice)
    joined = await workflow.run("acme-bob", store=store, clock=clock, actor=bob)
    assert joined.run_id == first.run_id
    await clock.advance(6)
    (ran,) = await Runtime(store, [workflow], clock=clock).wake_due()
    assert ran.outputs == ["acme-bob"]
    recorded = [
        (entry.action, entry.actor["name"], entry.detail.get("input"))
        for entry in await store.read_audit(first.run_id)
    ]
    assert recorded == [
        ("run_created", "alice", "acme-alice"),
        ("start_debounced", "bob", "acme-bob"),
    ]
    kinds = [event.kind for event in await store.read_events(first.run_id)]
    assert kinds.count("start_debounced") == 1  # in the run's log too, as every action is


async def test_a_queued_run_is_not_resumed_and_nothing_is_recorded(store):
    # A queued run has not started: resuming it took its lease and recorded run_resumed,
    # then failed saying it was "checkpointed by a different graph"; a bulk resume said
    # it acted on it. It starts when its turn comes, and neither may say otherwise.
    workflow = asking(StartPolicy(singleton=True))
    first = await workflow.run("a", store=store)
    queued = await workflow.run("b", store=store)
    assert queued.status == RunStatus.QUEUED
    olga = Actor("user", "olga", "api", Role.OPERATOR)
    with pytest.raises(RequestError, match="queued by its start policy and has not started"):
        await workflow.resume(queued.run_id, store=store, actor=olga)
    report = await run_bulk(
        store, BulkAction("resume", parse_filter('status == "queued"')), actor=olga
    )
    assert (report.matched, report.acted) == (1, [])
    ((skipped, why),) = report.skipped
    assert skipped == queued.run_id
    assert "queued by its start policy" in why
    assert [e.action for e in await store.read_audit(queued.run_id)] == ["run_created"]
    assert (await store.get_run(queued.run_id)).status == "queued"
    await answer(workflow, store, first)  # its turn comes: the service starts it
    async with Runtime(store, [workflow], poll_interval=3600) as runtime:
        (started,) = await runtime.wake_due()
    assert (started.run_id, started.status) == (queued.run_id, RunStatus.AWAITING_INPUT)


async def test_a_start_may_give_its_own_policy_or_none(store):
    workflow = asking(StartPolicy(concurrency=1))
    first = await workflow.run("a", store=store)
    free = await workflow.run("b", store=store, start_policy=StartPolicy())
    held = await workflow.run("c", store=store)
    assert [first.status, free.status, held.status] == [
        RunStatus.AWAITING_INPUT,
        RunStatus.AWAITING_INPUT,
        RunStatus.QUEUED,
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1, got 0"),
        ({"singleton": "yes"}, "singleton must be True or False"),
        ({"when_busy": "drop", "singleton": True}, "when_busy must be 'queue' or 'refuse'"),
        ({"debounce": -1}, "debounce must be a positive number of seconds, got -1"),
        ({"when_busy": "refuse"}, "when_busy='refuse' needs singleton=True or a concurrency"),
        ({"key": by_prefix}, "key is used by singleton and debounce"),
        ({"key": "input.customer", "singleton": True}, "key must be a function of the input"),
        (
            {"singleton": True, "when_busy": "refuse", "debounce": 1},
            "when_busy='refuse' cannot go with debounce",
        ),
    ],
)
def test_a_bad_policy_is_refused_naming_what_is_wrong(arguments, message):
    with pytest.raises(ValueError, match="StartPolicy: ") as refused:
        StartPolicy(**arguments)
    assert message in str(refused.value)


async def test_a_start_that_cannot_be_decided_is_refused_before_anything_runs():
    workflow = asking(StartPolicy(key=by_prefix, singleton=True))
    with pytest.raises(ValueError, match="which a store decides: give it a store"):
        await workflow.run("acme-1")
    with pytest.raises(ValueError, match="state= cannot go with a start policy"):
        await workflow.run("acme-1", store=MemoryStore(), state={"x": 1})
    with pytest.raises(ValueError, match=r"could not compute the key of input 7: AttributeError"):
        await workflow.run(7, store=MemoryStore())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has a start policy"):
        workflow.stream("acme-1", store=MemoryStore())
    with pytest.raises(TypeError, match="start_policy must be a StartPolicy"):
        WorkflowBuilder(start=ask, start_policy={"singleton": True})  # type: ignore[arg-type]
