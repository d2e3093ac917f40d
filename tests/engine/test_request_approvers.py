"""Who may answer a request: ``ctx.request(..., approvers=, four_eyes=)`` and its defaults.

The rules travel with the request: in the run's checkpoint (a resumed run,
another process, still has them) and in the ``request`` event of its log (a
door without the workflow's code checks them from there).
"""

from dataclasses import dataclass

import pytest

from treadle import Actor, Executor, Role, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle import handler as handles
from treadle._engine._answers import request_rules
from treadle._values._actors import answer_refusal
from treadle.errors import ActionRefusedError, ExecutorFailedError, RequestError
from treadle.stores import SqliteStore

MARIA = Actor("user", "maria", "python", Role.APPROVER)
FINN = Actor("user", "finn", "python", Role.APPROVER, frozenset({"finance"}))


@dataclass(frozen=True)
class Decision:
    approve: bool


def expense_workflow(store, **rules):
    @executor
    async def review(amount: int, ctx: WorkflowContext) -> None:
        decision = await ctx.request({"amount": amount}, Decision, **rules)
        ctx.yield_output(decision.approve)

    return review


def build(store, start, **options):
    return WorkflowBuilder(start=start, store=store, **options).register_type(Decision).build()


async def test_a_requests_approvers_and_four_eyes_are_kept_in_its_checkpoint_and_log(tmp_path):
    path = tmp_path / "runs.db"
    rules = {"approvers": ["maria", "group:finance", "role:admin"], "four_eyes": True}
    wf = build(SqliteStore(path), expense_workflow(None, **rules))
    asked = await wf.run(1200, run_id="r1")
    (pending,) = asked.pending_requests
    assert pending.approvers == ("maria", "group:finance", "role:admin")
    assert pending.four_eyes is True

    # Another process: a fresh store and workflow read them back from the checkpoint.
    store = SqliteStore(path)
    again = build(store, expense_workflow(None, **rules))
    resumed = await again.resume("r1")
    assert resumed.status is RunStatus.AWAITING_INPUT
    (kept,) = resumed.pending_requests
    assert (kept.approvers, kept.four_eyes) == (pending.approvers, True)

    # The run's log says the same, for a door that cannot load the code.
    events = await store.read_events("r1")
    (logged,) = [e for e in events if e.kind == "request"]
    assert logged.data["approvers"] == ["maria", "group:finance", "role:admin"]
    assert logged.data["four_eyes"] is True

    # Four eyes: the Python user who started it may not answer; maria, named, may.
    with pytest.raises(ActionRefusedError, match="need four eyes"):
        await again.respond("r1", {kept.request_id: {"approve": True}})
    bob = Actor("user", "bob", "python", Role.OPERATOR)
    with pytest.raises(ActionRefusedError, match="only maria, group:finance, role:admin may"):
        await again.respond("r1", {kept.request_id: {"approve": True}}, actor=bob.through("api"))
    done = await again.respond("r1", {kept.request_id: {"approve": True}}, actor=MARIA)
    assert done.outputs == [True]


async def test_the_door_check_from_a_pending_request_refuses_whom_it_should(tmp_path):
    wf = build(
        SqliteStore(tmp_path / "runs.db"),
        expense_workflow(None, approvers=["maria", "group:finance"], four_eyes=True),
    )
    asked = await wf.run(1200, run_id="r1")
    restored = await wf.resume("r1")
    assert restored.pending_requests == asked.pending_requests
    # request_rules reads what the checkpoint holds for the door.
    store = wf.store
    record = await store.load_checkpoint("r1")
    waits = wf.codec.decode(record, run_id="r1").waits
    approvers, four_eyes = request_rules(waits.find_request(asked.pending_requests[0].request_id))
    assert (approvers, four_eyes) == (("maria", "group:finance"), True)

    maria = Actor("user", "maria", "page", Role.APPROVER)
    bob = Actor("user", "bob", "page", Role.VIEWER)
    finn = Actor("user", "finn", "page", Role.APPROVER, frozenset({"finance"}))
    assert answer_refusal(maria, approvers, starter="ann", four_eyes=four_eyes) is None
    assert answer_refusal(finn, approvers, starter="ann", four_eyes=four_eyes) is None
    refusal = answer_refusal(bob, approvers, starter="ann", four_eyes=four_eyes)
    assert refusal == "bob may not answer this request: only maria, group:finance may"
    refusal = answer_refusal(maria, approvers, starter="maria", four_eyes=four_eyes)
    assert refusal is not None
    assert "four eyes" in refusal


async def test_a_workflows_four_eyes_is_the_default_a_request_may_override(tmp_path):
    store = SqliteStore(tmp_path / "runs.db")
    wf = build(store, expense_workflow(None), four_eyes=True)
    (pending,) = (await wf.run(5, run_id="r1")).pending_requests
    assert (pending.approvers, pending.four_eyes) == ((), True)

    own = build(store, expense_workflow(None, four_eyes=False), four_eyes=True)
    (pending,) = (await own.run(5, run_id="r2")).pending_requests
    assert pending.four_eyes is False

    plain = build(store, expense_workflow(None))
    (pending,) = (await plain.run(5, run_id="r3")).pending_requests
    assert (pending.approvers, pending.four_eyes) == ((), False)


async def test_an_executors_approvers_are_the_default_of_its_requests(tmp_path):
    class Review(Executor):
        approvers = ("group:finance",)
        four_eyes = True

        @handles
        async def review(self, amount: int, ctx: WorkflowContext) -> None:
            decision = await ctx.request({"amount": amount}, Decision)
            named = await ctx.request({"again": amount}, Decision, approvers=["cfo"])
            ctx.yield_output((decision.approve, named.approve))

    wf = build(SqliteStore(tmp_path / "runs.db"), Review())
    (first,) = (await wf.run(5, run_id="r1")).pending_requests
    assert (first.approvers, first.four_eyes) == (("group:finance",), True)
    answer = {first.request_id: {"approve": True}}
    (second,) = (await wf.respond("r1", answer, actor=FINN)).pending_requests
    assert (second.approvers, second.four_eyes) == (("cfo",), True)


@pytest.mark.parametrize(
    ("approvers", "problem"),
    [
        (["role:boss"], "approver 'role:boss': 'boss' is not a role"),
        ([""], "an approver must be a user name"),
        ("maria", "approvers takes a list of names, not one string: 'maria'"),
    ],
)
async def test_approvers_that_name_no_one_fail_the_asking_step(tmp_path, approvers, problem):
    wf = build(SqliteStore(tmp_path / "runs.db"), expense_workflow(None, approvers=approvers))
    with pytest.raises(ExecutorFailedError) as caught:
        await wf.run(5, run_id="r1")
    assert problem in str(caught.value)
    assert "review" in str(caught.value)


async def test_a_fork_keeps_four_eyes_its_parents_starter_may_not_answer_it(tmp_path):
    # Forking a run under four eyes made its starter able to approve their own request:
    # the fork counted as started by the forker alone.
    ann = Actor("user", "ann", "api", Role.OPERATOR)
    admin = Actor("user", "root", "api", Role.ADMIN)
    store = SqliteStore(tmp_path / "runs.db")
    wf = build(store, expense_workflow(None, four_eyes=True))
    asked = await wf.run(99_999, run_id="mine", actor=ann)
    (pending,) = asked.pending_requests
    answer = {pending.request_id: {"approve": True}}
    with pytest.raises(ActionRefusedError, match="need four eyes"):
        await wf.respond("mine", answer, actor=ann)

    head = (await store.list_checkpoints("mine"))[-1].checkpoint_id
    forked = await wf.fork("mine", head, new_run_id="mine-fork", actor=admin)
    with pytest.raises(ActionRefusedError, match="ann started this run, and its requests need"):
        await wf.respond(forked, answer, actor=ann)
    with pytest.raises(ActionRefusedError, match="need four eyes"):  # nor the forker
        await wf.respond(forked, answer, actor=admin)
    done = await wf.respond(forked, answer, actor=MARIA)
    assert done.outputs == [True]

    # ann forking her own run gains nothing either.
    again = await wf.fork("mine", head, new_run_id="mine-fork-2", actor=ann)
    with pytest.raises(ActionRefusedError, match="need four eyes"):
        await wf.respond(again, answer, actor=ann)


async def test_a_resume_from_before_a_decision_is_refused_not_said_to_ask_again(tmp_path):
    # It said the run awaited input again, with the request to answer, while the run stayed
    # as it was and the request could not be answered (its first answer is its only one).
    @executor
    async def twice(amount: int, ctx: WorkflowContext) -> None:
        first = await ctx.request({"amount": amount}, Decision)
        second = await ctx.request({"amount": amount, "again": True}, Decision)
        ctx.yield_output(first.approve and second.approve)

    store = SqliteStore(tmp_path / "runs.db")
    wf = build(store, twice)
    asked = await wf.run(10, run_id="decided")
    (first,) = asked.pending_requests
    await wf.respond("decided", {first.request_id: {"approve": True}}, actor=MARIA)
    older = (await store.list_checkpoints("decided"))[-2]  # where the first request waited
    for ended in (False, True):
        before = await store.get_run("decided")
        audited = [e.action for e in await store.read_audit("decided")]
        with pytest.raises(RequestError, match="would run nothing: the run rests there") as no:
            await wf.resume("decided", older.checkpoint_id)
        assert f"treadle fork decided --checkpoint {older.checkpoint_id}" in str(no.value)
        after = await store.get_run("decided")
        assert (after.status, after.checkpoint_id) == (before.status, before.checkpoint_id)
        assert [e.action for e in await store.read_audit("decided")] == audited  # nothing recorded
        if not ended:
            assert before.status == "awaiting_input"
            (second,) = (await wf.resume("decided")).pending_requests
            await wf.respond("decided", {second.request_id: {"approve": True}}, actor=MARIA)
    assert (await store.get_run("decided")).status == "completed"
    # A fork from there goes on as a new run whose request is answered anew.
    forked = await wf.fork("decided", older.checkpoint_id, new_run_id="again")
    (anew,) = (await wf.resume(forked)).pending_requests
    assert anew.request_id == first.request_id
