"""A run's named outcome: set by a handler, committed with its superstep, kept by every store.

``ctx.set_outcome("rejected", "1,200 EUR over budget")`` is the business
answer a run ends with, beside its status: the barrier commits it like
state (a failed or suspended invocation sets nothing), the checkpoint keeps
it (resume, fork and time travel see it), the store writes it on the run's
row (``RunRecord.outcome``, ``list_runs(outcome=)``) and the run's log
carries it on the ``status_changed`` entry.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError, OutcomeConflictError
from treadle.stores import SqliteStore


@dataclass(frozen=True)
class Claim:
    who: str
    euros: int


def expenses():
    @executor(id="check")
    async def check(claim: Claim, ctx: WorkflowContext[Claim]) -> None:
        ctx.send_message(claim)

    @executor(id="decide")
    async def decide(claim: Claim, ctx: WorkflowContext) -> None:
        approved = await ctx.request({"who": claim.who, "euros": claim.euros}, bool)
        if approved:
            ctx.set_outcome("approved")
        else:
            ctx.set_outcome("rejected", f"{claim.euros} EUR for {claim.who} refused")
        ctx.yield_output(approved)

    return (
        WorkflowBuilder(check, name="expenses").register_type(Claim).add_edge(check, decide).build()
    )


async def test_an_outcome_set_by_a_handler_is_the_runs_on_every_store(make_store):
    store = make_store()
    workflow = expenses()
    asked = await workflow.run(Claim("ann", 1200), store=store, run_id="exp-1")
    assert asked.outcome is None  # nothing decided yet
    assert (await store.get_run("exp-1")).outcome is None
    (question,) = asked.pending_requests
    done = await workflow.respond("exp-1", {question.request_id: False}, store=store)
    assert done.status is RunStatus.COMPLETED
    assert (done.outcome, done.outcome_summary) == ("rejected", "1200 EUR for ann refused")
    row = await store.get_run("exp-1")
    assert (row.outcome, row.outcome_summary) == ("rejected", "1200 EUR for ann refused")

    other = await workflow.run(Claim("bob", 30), store=store, run_id="exp-2")
    (question,) = other.pending_requests
    await workflow.respond("exp-2", {question.request_id: True}, store=store)
    await workflow.run(Claim("cid", 10), store=store, run_id="exp-3")  # still asking
    assert [r.run_id for r in await store.list_runs(outcome="rejected")] == ["exp-1"]
    assert [r.run_id for r in await store.list_runs(outcome="approved")] == ["exp-2"]
    assert await store.list_runs(outcome="approved", status="awaiting_input") == []
    assert len(await store.list_runs()) == 3


async def test_the_runs_log_carries_the_outcome_on_its_status_change(make_store):
    store = make_store()
    workflow = expenses()
    asked = await workflow.run(Claim("ann", 1200), store=store, run_id="exp-1")
    (question,) = asked.pending_requests
    await workflow.respond("exp-1", {question.request_id: False}, store=store)
    changes = [e for e in await store.read_events("exp-1") if e.kind == "status_changed"]
    last = changes[-1].to_json()["data"]
    assert last["status"] == "completed"
    assert last["outcome"] == "rejected"
    assert last["outcome_summary"] == "1200 EUR for ann refused"
    assert "outcome" not in changes[0].to_json()["data"]  # awaiting_input: none yet


async def test_resume_fork_and_time_travel_see_the_outcome_of_their_checkpoint(tmp_path):
    @executor(id="first")
    async def first(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_outcome("drafted", "a first draft")
        ctx.send_message(text)

    @executor(id="second")
    async def second(text: str, ctx: WorkflowContext) -> None:
        answer = await ctx.request({"text": text}, str)
        if answer == "publish":
            ctx.set_outcome("published")
        ctx.yield_output(answer)

    workflow = WorkflowBuilder(first, name="drafts").add_edge(first, second).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await workflow.run("tides", store=store, run_id="d-1")
        assert asked.outcome == "drafted"  # set in superstep 1, kept while it waits
        before = (await store.list_checkpoints("d-1"))[0].checkpoint_id  # before superstep 1
        resumed = await workflow.resume("d-1", store=store)
        assert (resumed.outcome, resumed.outcome_summary) == ("drafted", "a first draft")
        (question,) = resumed.pending_requests
        done = await workflow.respond("d-1", {question.request_id: "publish"}, store=store)
        assert (done.outcome, done.outcome_summary) == ("published", None)  # the latest wins
        assert (await store.get_run("d-1")).outcome == "published"
        latest = (await store.get_run("d-1")).checkpoint_id
        fork = await workflow.fork("d-1", latest, new_run_id="d-2", store=store)
        assert (await store.get_run(fork)).outcome == "published"
        early = await workflow.fork("d-1", before, new_run_id="d-3", store=store)
        assert (await store.get_run(early)).outcome is None
        again = await workflow.resume("d-3", store=store)
        assert again.outcome == "drafted"
        # Time travel: the run goes on from before its outcome, and its row says so.
        back = await workflow.resume("d-1", checkpoint_id=before, store=store)
        assert back.outcome == "drafted"
        assert (await store.get_run("d-1")).outcome == "drafted"
    finally:
        await store.close()


async def test_a_failed_invocation_sets_no_outcome(tmp_path):
    @executor(id="flaky")
    async def flaky(text: str, ctx: WorkflowContext) -> None:
        ctx.set_outcome("approved")
        raise RuntimeError(text)

    workflow = WorkflowBuilder(flaky, name="flaky").build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ExecutorFailedError) as failed:
            await workflow.run("boom", store=store, run_id="f-1")
        assert failed.value.result.outcome is None
        assert (await store.get_run("f-1")).outcome is None
    finally:
        await store.close()


async def test_a_suspended_invocation_sets_no_outcome_until_it_completes():
    @executor(id="ask")
    async def ask(text: str, ctx: WorkflowContext) -> None:
        ctx.set_outcome("asked")  # discarded while it waits, set when it re-executes
        answer = await ctx.request({"text": text}, str)
        ctx.yield_output(answer)

    workflow = WorkflowBuilder(ask, name="ask").build()
    from treadle.stores import MemoryStore  # noqa: PLC0415

    store = MemoryStore()
    asked = await workflow.run("x", store=store, run_id="s-1")
    assert asked.outcome is None
    (question,) = asked.pending_requests
    done = await workflow.respond("s-1", {question.request_id: "ok"}, store=store)
    assert done.outcome == "asked"


def _two_deciders(first_outcome: str, second_outcome: str):
    @executor(id="split")
    async def split(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(text)

    @executor(id="legal")
    async def legal(text: str, ctx: WorkflowContext) -> None:
        ctx.set_outcome(first_outcome)

    @executor(id="finance")
    async def finance(text: str, ctx: WorkflowContext) -> None:
        ctx.set_outcome(second_outcome)

    return WorkflowBuilder(split, name="both").add_fan_out(split, [legal, finance]).build()


async def test_two_executors_setting_different_outcomes_in_one_superstep_conflict():
    with pytest.raises(OutcomeConflictError) as conflict:
        await _two_deciders("approved", "rejected").run("x")
    message = str(conflict.value)
    assert "'legal'" in message
    assert "'finance'" in message
    assert "'approved'" in message
    assert "'rejected'" in message
    assert conflict.value.executor_ids == ("legal", "finance")
    assert conflict.value.result.outcome is None  # nothing of that superstep committed


async def test_two_executors_agreeing_on_an_outcome_do_not_conflict():
    done = await _two_deciders("approved", "approved").run("x")
    assert done.outcome == "approved"


@pytest.mark.parametrize(
    ("name", "summary", "fault"),
    [
        ("", None, "outcome name"),
        ("two words", None, "outcome name"),
        ("x" * 65, None, "outcome name"),
        ("approved", "first line\nsecond line", "one line"),
        ("approved", "y" * 201, "200 characters"),
        (42, None, "a str"),
        ("approved", 7, "a str"),
    ],
)
async def test_a_bad_outcome_fails_the_invocation_naming_the_executor(name, summary, fault):
    @executor(id="judge")
    async def judge(text: str, ctx: WorkflowContext) -> None:
        ctx.set_outcome(name, summary)

    workflow = WorkflowBuilder(judge, name="judge").build()
    with pytest.raises(ExecutorFailedError) as failed:
        await workflow.run("x")
    cause = failed.value.__cause__
    assert isinstance(cause, ValueError | TypeError)
    assert "executor 'judge'" in str(cause)
    assert fault in str(cause)
