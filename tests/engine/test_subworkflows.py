"""Sub-workflows: a built workflow used as one executor of another.

What a user sees: the sub-workflow's outputs travel the parent's edges (or
become the parent's outputs), its requests, timers, progress and events
surface through the parent with a path, its barriers are checkpoints of the
parent run, and types, limits, failures and pictures behave as for any
executor.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import operator
from dataclasses import dataclass

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import (
    ExecutorFailedError,
    GraphChangedError,
    IterationLimitExceeded,
    RequestError,
    RequestExpiredError,
    RequestTimeoutError,
    SubWorkflowError,
    WorkflowRunError,
    WorkflowValidationError,
)
from treadle.events import ExecutorSuspended, ProgressEvent, RequestEvent, StatusChanged
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock


@dataclass(frozen=True)
class Doc:
    text: str


@dataclass(frozen=True)
class Verdict:
    text: str
    approved: bool


@executor(id="draft")
async def draft(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
    ctx.report_progress(1, 2, "drafted")
    ctx.state.set("notes", [f"drafted {doc.text}"])
    ctx.send_message(Doc(doc.text + "+draft"))


@executor(id="approve")
async def approve(doc: Doc, ctx: WorkflowContext[object]) -> None:
    approved = await ctx.request(doc.text, bool)
    ctx.yield_output(Verdict(doc.text, approved))


def legal():
    return (
        WorkflowBuilder(draft, name="legal")
        .add_edge(draft, approve)
        .add_state("notes", default=[], reducer=operator.add)
        .build()
    )


@executor(id="intake")
async def intake(text: str, ctx: WorkflowContext[Doc]) -> None:
    ctx.state.set("notes", "parent's own")
    ctx.send_message(Doc(text))


@executor(id="publish")
async def publish(verdict: Verdict, ctx: WorkflowContext[object]) -> None:
    ctx.yield_output(f"{verdict.text}: {'published' if verdict.approved else 'held'}")


def parent(inner=None, **options):
    return (
        WorkflowBuilder(intake, name="parent", **options)
        .add_workflow(inner or legal(), id="review", outputs=Verdict)
        .add_edge(intake, "review")
        .add_edge("review", publish)
        .build()
    )


async def test_a_request_inside_surfaces_with_its_path_and_is_answered_through_the_parent():
    store = MemoryStore()
    workflow = parent(store=store)
    asked = await workflow.run("memo")
    assert asked.status is RunStatus.AWAITING_INPUT
    [request] = asked.pending_requests
    assert (request.executor_id, request.payload) == ("review/approve", "memo+draft")
    requests = [e for e in asked.events if isinstance(e, RequestEvent)]
    assert [(e.executor_id, e.request_id) for e in requests] == [
        ("review/approve", request.request_id)
    ]
    progress = [e for e in asked.events if isinstance(e, ProgressEvent)]
    assert [(e.executor_id, e.message) for e in progress] == [("review/draft", "drafted")]
    # The sub-workflow's own status changes are not the parent's.
    statuses = [e.status for e in asked.events if isinstance(e, StatusChanged)]
    assert statuses == [RunStatus.RUNNING, RunStatus.AWAITING_INPUT]
    assert asked.state == {"notes": "parent's own"}  # its state is its own

    done = await workflow.respond(asked.run_id, {request.request_id: True})
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["memo+draft: published"]


async def test_its_barriers_are_checkpoints_of_the_parent_run():
    store = MemoryStore()
    workflow = parent(store=store)
    asked = await workflow.run("memo")
    history = await workflow.history(asked.run_id)
    # intake's barrier, then the sub-workflow's two barriers inside superstep 2, then its end.
    assert [(c.superstep, c.status) for c in history.checkpoints] == [
        (0, "running"),
        (1, "running"),
        (1, "running"),
        (1, "running"),
        (2, "awaiting_input"),
    ]
    chain = [c.parent_checkpoint_id for c in history.checkpoints[1:]]
    assert chain == [c.checkpoint_id for c in history.checkpoints[:-1]]


async def test_with_no_edge_leaving_it_its_outputs_are_the_parents():
    store = MemoryStore()
    workflow = (
        WorkflowBuilder(intake, name="tail", store=store)
        .add_workflow(legal(), id="review", outputs=Verdict)
        .add_edge(intake, "review")
        .build()
    )
    asked = await workflow.run("memo")
    [request] = asked.pending_requests
    done = await workflow.respond(asked.run_id, {request.request_id: False})
    assert done.outputs == [Verdict("memo+draft", approved=False)]


async def test_a_workflow_object_stands_for_its_executor_anywhere_in_the_builder():
    inner = legal()
    workflow = (
        WorkflowBuilder(intake, name="by-object", store=MemoryStore())
        .add_edge(intake, inner)
        .add_edge(inner, publish)
        .build()
    )
    assert workflow.executor_ids == ("intake", "legal", "publish")  # its id is its name
    asked = await workflow.run("memo")
    assert asked.pending_requests[0].executor_id == "legal/approve"


def test_its_types_are_checked_at_build_time_like_any_executors():
    @executor(id="wants_int")
    async def wants_int(n: int, ctx: WorkflowContext[object]) -> None: ...

    with pytest.raises(WorkflowValidationError) as refused:
        (
            WorkflowBuilder(intake, name="mistyped")
            .add_workflow(legal(), id="review", outputs=Verdict)
            .add_edge(intake, "review")
            .add_edge("review", wants_int)
            .build()
        )
    assert "'review'" in str(refused.value)
    assert "'wants_int'" in str(refused.value)

    @executor(id="sends_int")
    async def sends_int(text: str, ctx: WorkflowContext[int]) -> None: ...

    with pytest.raises(WorkflowValidationError) as refused:
        (
            WorkflowBuilder(sends_int, name="mistyped-in")
            .add_workflow(legal(), id="review")
            .add_edge(sends_int, "review")
            .build()
        )
    assert "'review'" in str(refused.value)


async def test_two_requests_inside_are_both_pending_and_answered_one_at_a_time():
    @executor(id="split")
    async def split(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
        ctx.send_message(Doc(doc.text))

    @executor(id="legal_ok")
    async def legal_ok(doc: Doc, ctx: WorkflowContext[object]) -> None:
        ctx.yield_output(Verdict("legal", await ctx.request("legal?", bool)))

    @executor(id="money_ok")
    async def money_ok(doc: Doc, ctx: WorkflowContext[object]) -> None:
        ctx.yield_output(Verdict("money", await ctx.request("money?", bool)))

    inner = (
        WorkflowBuilder(split, name="approvals").add_fan_out(split, [legal_ok, money_ok]).build()
    )
    store = MemoryStore()
    workflow = (
        WorkflowBuilder(intake, name="both", store=store)
        .add_workflow(inner, id="review", outputs=Verdict)
        .add_edge(intake, "review")
        .build()
    )
    asked = await workflow.run("memo")
    by_path = {r.executor_id: r.request_id for r in asked.pending_requests}
    assert set(by_path) == {"review/legal_ok", "review/money_ok"}
    half = await workflow.respond(asked.run_id, {by_path["review/money_ok"]: True})
    assert half.status is RunStatus.AWAITING_INPUT
    assert [r.executor_id for r in half.pending_requests] == ["review/legal_ok"]
    assert half.outputs == []
    done = await workflow.respond(asked.run_id, {by_path["review/legal_ok"]: False})
    assert done.status is RunStatus.COMPLETED
    # In commit order: money's answer came first.
    assert done.outputs == [Verdict("money", approved=True), Verdict("legal", approved=False)]


async def test_both_answers_in_one_respond_call():
    @executor(id="ask_twice")
    async def ask_twice(doc: Doc, ctx: WorkflowContext[object]) -> None:
        first = await ctx.request("first?", str)
        second = await ctx.request("second?", str)
        ctx.yield_output(f"{first}/{second}")

    @executor(id="ask_once")
    async def ask_once(doc: Doc, ctx: WorkflowContext[object]) -> None:
        ctx.yield_output(await ctx.request("once?", str))

    inner = WorkflowBuilder(ask_twice, name="asks").build()
    other = WorkflowBuilder(ask_once, name="other").build()
    store = MemoryStore()
    workflow = (
        WorkflowBuilder(intake, name="two-subs", store=store)
        .add_workflow(inner, id="a")
        .add_workflow(other, id="b")
        .add_fan_out(intake, ["a", "b"])
        .build()
    )
    asked = await workflow.run("memo")
    ids = {r.executor_id: r.request_id for r in asked.pending_requests}
    assert set(ids) == {"a/ask_twice", "b/ask_once"}
    step = await workflow.respond(asked.run_id, {ids["a/ask_twice"]: "x", ids["b/ask_once"]: "y"})
    assert step.outputs == ["y"]
    [second] = step.pending_requests
    assert (second.executor_id, second.payload) == ("a/ask_twice", "second?")
    done = await workflow.respond(asked.run_id, {second.request_id: "z"})
    assert sorted(done.outputs) == ["x/z", "y"]


async def test_a_timer_inside_makes_the_parent_wait_and_wakes_it():
    clock = FakeClock(start=1_000_000.0)

    @executor(id="nap")
    async def nap(doc: Doc, ctx: WorkflowContext[object]) -> None:
        await ctx.sleep(dt.timedelta(hours=2))
        ctx.yield_output(Verdict(doc.text, approved=True))

    inner = WorkflowBuilder(nap, name="sleepy").build()
    store = MemoryStore()
    workflow = parent(inner, store=store, clock=clock)
    waiting = await workflow.run("memo")
    assert waiting.status is RunStatus.WAITING
    assert waiting.wake_at == clock.now() + 7200
    assert any(
        isinstance(e, ExecutorSuspended) and e.executor_id == "review" and e.wait == "workflow"
        for e in waiting.events
    )
    early = await workflow.resume(waiting.run_id)
    assert early.status is RunStatus.WAITING  # not yet due: nothing ran
    await clock.advance(7200)
    done = await workflow.resume(waiting.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["memo: published"]


async def test_without_a_store_a_timer_inside_is_slept_through():
    clock = FakeClock(start=1_000_000.0)

    @executor(id="nap")
    async def nap(doc: Doc, ctx: WorkflowContext[object]) -> None:
        await ctx.sleep(dt.timedelta(minutes=5))
        ctx.yield_output(Verdict(doc.text, approved=True))

    workflow = parent(WorkflowBuilder(nap, name="sleepy").build(), clock=clock)
    running = asyncio.ensure_future(workflow.run("memo"))
    while clock.next_deadline is None:  # noqa: ASYNC110 - the fake clock has no event to wait on
        await asyncio.sleep(0)
    assert clock.next_deadline == 1_000_000.0 + 300
    await clock.advance(300)
    done = await running
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["memo: published"]
    assert clock.now() == 1_000_000.0 + 300


async def test_sub_workflows_nest_and_paths_grow():
    store = MemoryStore()
    middle = (
        WorkflowBuilder(draft, name="middle")
        .add_workflow(WorkflowBuilder(approve, name="inner").build(), id="legal", outputs=Verdict)
        .add_edge(draft, "legal")
        .add_state("notes", default=[], reducer=operator.add)
        .build()
    )
    workflow = parent(middle, store=store)
    asked = await workflow.run("memo")
    [request] = asked.pending_requests
    assert request.executor_id == "review/legal/approve"
    # Reloaded from the store in a fresh workflow object, the nesting holds.
    again = parent(middle, store=store)
    done = await again.respond(asked.run_id, {request.request_id: True})
    assert done.outputs == ["memo+draft: published"]


async def test_a_failure_inside_fails_the_parent_and_names_both():
    @executor(id="boom")
    async def boom(doc: Doc, ctx: WorkflowContext[object]) -> None:
        raise ValueError("no ink")

    workflow = parent(WorkflowBuilder(boom, name="broken").build())
    with pytest.raises(ExecutorFailedError) as failed:
        await workflow.run("memo")
    assert failed.value.executor_id == "review"
    assert "boom" in str(failed.value)
    assert "no ink" in str(failed.value)


async def test_limits_hold_inside():
    @executor(id="loop")
    async def loop(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
        ctx.send_message(doc)

    inner = WorkflowBuilder(loop, name="looping").add_edge(loop, loop).build()
    workflow = parent(inner, max_supersteps=20)
    with pytest.raises(WorkflowRunError) as failed:
        await workflow.run("memo")
    assert isinstance(failed.value.__cause__, IterationLimitExceeded)


async def test_a_stalled_sub_workflow_is_a_clear_failure():
    @executor(id="one")
    async def one(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
        ctx.send_message(doc)

    @executor(id="never")
    async def never(doc: Doc, ctx: WorkflowContext[Doc]) -> None: ...

    @executor(id="joined")
    async def joined(docs: list[Doc], ctx: WorkflowContext[object]) -> None: ...

    inner = (
        WorkflowBuilder(one, name="stalls")
        .add_executor(never)
        .add_edge(one, never)
        .add_fan_in([one, never], joined)
        .build()
    )
    workflow = parent(inner)
    with pytest.raises(ExecutorFailedError) as failed:
        await workflow.run("memo")
    assert isinstance(failed.value.__cause__, SubWorkflowError)
    assert "stalled" in str(failed.value.__cause__)


async def test_an_undeclared_output_is_refused_at_run_time():
    @executor(id="wrong")
    async def wrong(doc: Doc, ctx: WorkflowContext[object]) -> None:
        ctx.yield_output("not a verdict")

    workflow = parent(WorkflowBuilder(wrong, name="wrong").build())
    with pytest.raises(ExecutorFailedError) as failed:
        await workflow.run("memo")
    assert isinstance(failed.value.__cause__, SubWorkflowError)
    assert "outputs=Verdict" in str(failed.value.__cause__)


async def test_a_changed_sub_workflow_is_a_changed_graph():
    store = MemoryStore()
    asked = await parent(store=store).run("memo")

    @executor(id="approve")
    async def approve_v2(doc: Doc, ctx: WorkflowContext[object]) -> None:
        ctx.yield_output(Verdict(doc.text, approved=True))

    @executor(id="extra")
    async def extra(doc: Doc, ctx: WorkflowContext[object]) -> None: ...

    changed = (
        WorkflowBuilder(draft, name="legal")
        .add_edge(draft, approve_v2)
        .add_edge(draft, extra)
        .add_state("notes", default=[], reducer=operator.add)
        .build()
    )
    with pytest.raises(GraphChangedError) as refused:
        await parent(changed, store=store).resume(asked.run_id)
    assert "executor 'review': its sub-workflow changed" in str(refused.value)
    assert "'extra'" in str(refused.value)


def test_pictures_draw_it_as_a_cluster():
    workflow = parent()
    mermaid = workflow.to_mermaid(marks={"review": "waiting"})
    assert 'subgraph n1 ["review"]' in mermaid
    assert 'n1_n0(["draft"])' in mermaid
    assert "n0 --> n1" in mermaid
    assert "n1_n0 --> n1_n1" in mermaid
    dot = workflow.to_dot()
    assert "subgraph cluster_n1 {" in dot
    assert "n0 -> n1_n0 [lhead=cluster_n1];" in dot
    assert "compound=true;" in dot


@executor(id="ask_by")
async def ask_by(doc: Doc, ctx: WorkflowContext[object]) -> None:
    try:
        approved = await ctx.request(doc.text, bool, timeout=dt.timedelta(hours=24))
    except RequestTimeoutError:
        approved = False  # nobody answered in a day: hold it
    ctx.yield_output(Verdict(doc.text, approved))


@pytest.mark.parametrize("answered_after", [23, None])
async def test_a_deadline_inside_is_decided_once_through_the_parents_store(answered_after):
    clock = FakeClock(start=1_000_000.0)
    store = MemoryStore()
    workflow = parent(WorkflowBuilder(ask_by, name="timed").build(), store=store, clock=clock)
    asked = await workflow.run("memo")
    [request] = asked.pending_requests
    assert request.executor_id == "review/ask_by"
    assert asked.wake_at == 1_000_000.0 + 24 * 3600  # the parent wakes at the deadline inside
    if answered_after is not None:
        await clock.advance(answered_after * 3600)
        done = await workflow.respond(asked.run_id, {request.request_id: True})
        assert done.outputs == ["memo: published"]
        return
    await clock.advance(24 * 3600)
    done = await workflow.resume(asked.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["memo: held"]
    with pytest.raises(RequestExpiredError):  # the store kept the timeout as its answer
        await workflow.respond(asked.run_id, {request.request_id: True})


async def test_a_pause_asked_inside_stops_at_the_sub_workflows_next_barrier(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    ran: list[str] = []
    holder: dict[str, object] = {}

    @executor(id="first")
    async def first(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
        ran.append("first")
        await holder["workflow"].pause("p1")  # another caller, as this superstep runs
        ctx.send_message(doc)

    @executor(id="second")
    async def second(doc: Doc, ctx: WorkflowContext[object]) -> None:
        ran.append("second")
        ctx.yield_output(Verdict(doc.text, approved=True))

    inner = WorkflowBuilder(first, name="two-steps").add_edge(first, second).build()
    workflow = parent(inner, store=store)
    holder["workflow"] = workflow
    try:
        paused = await workflow.run("memo", run_id="p1")
        assert paused.status is RunStatus.PAUSED
        assert ran == ["first"]  # stopped at the sub-workflow's first barrier
        holder["workflow"] = _NoPause()
        done = await workflow.unpause("p1")
        assert done.status is RunStatus.COMPLETED
        assert done.outputs == ["memo: published"]
        assert ran == ["first", "second"]  # what committed before the pause never ran again
    finally:
        await store.close()


class _NoPause:
    async def pause(self, run_id: str) -> None:
        raise AssertionError(run_id)


@executor(id="listen")
async def listen(doc: Doc, ctx: WorkflowContext[object]) -> None:
    said = await ctx.wait_for_input()
    ctx.yield_output(Verdict(f"{doc.text}: {said}", approved=True))


@pytest.mark.parametrize("target", ["review/listen", None])
async def test_a_session_inside_takes_messages_sent_to_the_parent_by_path(target):
    store = MemoryStore()
    workflow = parent(WorkflowBuilder(listen, name="chat").build(), store=store)
    waiting = await workflow.run("memo")
    assert waiting.status is RunStatus.AWAITING_INPUT
    with pytest.raises(RequestError, match="not waiting for input"):
        await workflow.send_message(waiting.run_id, "hello", target="review/other")
    done = await workflow.send_message(waiting.run_id, "hello", target=target)
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["memo: hello: published"]
