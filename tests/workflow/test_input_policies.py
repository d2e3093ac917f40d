"""Input policies of sessions, in one process: what each does with a message sent mid-turn.

The session is ``session_app.py``'s chat: a turn holds at a file gate in its
first superstep, so a test sends while it is known to be running, then
opens the gate. The races between processes are in
``test_input_policy_races.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from pathlib import Path

import pytest
from session_app import Listen, session

from apps.asking import asking_session
from gates import file_appears, reached
from treadle import (
    Actor,
    HandoffRefused,
    InputPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle._graph._input_policy import policy_of_kind
from treadle._workflow import _driving as driving
from treadle._workflow._pausing import stored_result
from treadle.errors import RequestError, RunBusyError, SessionBusyError
from treadle.stores import SqliteStore
from treadle.workers import Client


@pytest.fixture
async def store(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    yield store
    await store.close()


async def resting_session(policy: str, store, gate) -> object:
    """A session that took "m0" and rests, waiting for input; its turns hold at ``gate``."""
    workflow = session(policy)
    result = await workflow.run("m0", run_id="s1", state={"gate": str(gate)}, store=store)
    assert (result.status, result.outputs) == (RunStatus.AWAITING_INPUT, ["done m0"])
    return workflow


async def turn_running(workflow, store, gate, message: str) -> asyncio.Task:
    """Send ``message`` to the resting session, its turn held at ``gate``: the task driving it."""
    driving = asyncio.create_task(workflow.send_message("s1", message, store=store))
    await file_appears(reached(gate))
    return driving


def test_a_policy_is_one_frozen_value_read_back_from_its_name():
    assert InputPolicy.parse("enqueue") is not InputPolicy.ENQUEUE  # equal, not the same
    assert InputPolicy.parse("enqueue") == InputPolicy.ENQUEUE
    assert InputPolicy.parse(str(InputPolicy.debounce(2.5))) == InputPolicy("debounce", 2.5)
    assert InputPolicy.debounce(dt.timedelta(milliseconds=500)).window == 0.5
    assert not InputPolicy.REJECT.watches_turns
    with pytest.raises(ValueError, match="one of reject, enqueue, merge"):
        InputPolicy.parse("queue")
    with pytest.raises(ValueError, match="debounce needs a window"):
        InputPolicy.parse("debounce")
    with pytest.raises(ValueError, match="positive"):
        InputPolicy.debounce(0)
    with pytest.raises(ValueError, match="at most 300 s"):
        InputPolicy.debounce(dt.timedelta(days=365))
    with pytest.raises(ValueError, match="got nan"):  # a name that is no number: ValueError too
        InputPolicy.parse("debounce:nan")
    assert InputPolicy.debounce(300).window == 300
    # A message kept in an inbox before windows were bounded is still read, at the bound.
    assert policy_of_kind("message:debounce:1e+308") == InputPolicy.debounce(300)
    with pytest.raises(ValueError, match="only debounce takes a window"):
        InputPolicy("merge", 2.0)


async def test_reject_refuses_a_message_while_a_turn_runs_and_nothing_is_delivered(store, tmp_path):
    gate = tmp_path / "gate"
    workflow = await resting_session("reject", store, gate)
    driving = await turn_running(workflow, store, gate, "m1")
    with pytest.raises(SessionBusyError, match="in a turn") as refused:
        await workflow.send_message("s1", "m2", store=store)
    assert isinstance(refused.value, RunBusyError)  # callers catching RunBusyError still do
    gate.touch()
    result = await driving
    assert result.outputs == ["done m0", "done m1"]
    assert result.state["turns"] == ["m0", "m1"]
    sent = [e.data for e in await store.read_events("s1") if e.kind == "message_sent"]
    assert [(d["message"], d["policy"]) for d in sent] == [("m1", "reject")]


@executor(id="approve")
async def approve(text: str, ctx: WorkflowContext) -> None:
    ok = await ctx.request({"text": text}, bool)
    ctx.yield_output(ok)


async def test_a_message_to_a_run_waiting_for_an_answer_names_the_request_and_respond(store):
    # It waits for an answer, not for input: the refusal says which request and what
    # gives it, not only "awaiting_input" (the status a message would seem to fit).
    approval = WorkflowBuilder(approve, name="approval").build()
    asked = await approval.run("a", store=store)
    (request,) = asked.pending_requests
    with pytest.raises(SessionBusyError, match="nothing was delivered") as refused:
        await approval.send_message(asked.run_id, "x", store=store)
    assert f"input: it waits for an answer to {request.request_id}, which respond gives" in str(
        refused.value
    )
    assert [e for e in await store.read_events(asked.run_id) if e.kind == "message_sent"] == []


async def test_enqueue_keeps_messages_and_takes_one_per_turn_in_arrival_order(store, tmp_path):
    gate = tmp_path / "gate"
    workflow = await resting_session("enqueue", store, gate)
    driving = await turn_running(workflow, store, gate, "m1")
    for message in ("m2", "m3"):
        told = await workflow.send_message("s1", message, store=store)
        assert told.status is RunStatus.RUNNING  # queued: the driving process takes it
    gate.touch()
    result = await driving
    assert result.status is RunStatus.AWAITING_INPUT
    assert result.outputs == ["done m0", "done m1", "done m2", "done m3"]
    assert result.state["turns"] == ["m0", "m1", "m2", "m3"]
    assert await store.inbox("s1") == []


async def test_merge_delivers_a_message_into_the_running_turns_next_superstep(store, tmp_path):
    gate = tmp_path / "gate"
    workflow = await resting_session("merge", store, gate)
    driving = await turn_running(workflow, store, gate, "m1")
    await workflow.send_message("s1", "note", target="work", store=store)
    gate.touch()
    result = await driving
    # The note reached "work" in the superstep after the one the gate held: the turn read it.
    assert result.outputs == ["done m0", "done m1 with note"]
    assert result.state["turns"] == ["m0", "m1"]


async def test_interrupt_drops_the_turns_pending_work_and_starts_a_turn_on_the_message(
    store, tmp_path
):
    gate = tmp_path / "gate"
    workflow = await resting_session("interrupt", store, gate)
    driving = await turn_running(workflow, store, gate, "m1")
    await workflow.send_message("s1", "m2", store=store)
    gate.touch()
    result = await driving
    assert result.outputs == ["done m0", "done m2"]  # m1's second step never ran
    assert result.state["steps"] == ["m0:1", "m0:2", "m1:1", "m2:1", "m2:2"]
    assert result.state["turns"] == ["m0", "m1", "m2"]  # what m1's turn committed stays


async def test_rollback_branches_from_where_the_turn_began_and_keeps_the_abandoned_turn(
    store, tmp_path
):
    gate = tmp_path / "gate"
    workflow = await resting_session("rollback", store, gate)
    rest = (await store.get_run("s1")).checkpoint_id
    driving = await turn_running(workflow, store, gate, "m1")
    await workflow.send_message("s1", "m2", store=store)
    gate.touch()
    result = await driving
    assert result.outputs == ["done m0", "done m2"]
    assert result.state["turns"] == ["m0", "m2"]  # as if m1 had never come
    checkpoints = await store.list_checkpoints("s1")
    abandoned = [c for c in checkpoints if c.parent_checkpoint_id == rest]
    assert len(abandoned) == 2  # m1's turn and the branch both grew from the rest


async def test_a_rollback_applied_by_another_driver_while_its_own_let_go_is_not_applied_again(
    store, tmp_path, monkeypatch
):
    # The driver that meets m2 gives the lease up as its loop stops, before it takes the
    # run back to branch. Held there, the next sender finds the run free and drives it:
    # it meets m2 too, branches with it, then with m3, and rests. The first driver must
    # then leave the run be: branching with m2 again would undo m3, the last message.
    gate = tmp_path / "gate"
    workflow = await resting_session("rollback", store, gate)
    stopped, go_on = asyncio.Event(), asyncio.Event()
    real_next_launch = driving.next_launch

    async def first_held(workflow, loop, launch):
        if not stopped.is_set():
            stopped.set()
            await go_on.wait()
        return await real_next_launch(workflow, loop, launch)

    monkeypatch.setattr(driving, "next_launch", first_held)
    first = await turn_running(workflow, store, gate, "m1")
    await workflow.send_message("s1", "m2", store=store)
    gate.touch()
    await stopped.wait()
    assert (await store.get_run("s1")).owner is None  # let go: the run is free to take
    other = await workflow.send_message("s1", "m3", store=store)
    assert other.outputs == ["done m0", "done m3"]
    go_on.set()
    await first
    rested = await stored_result(workflow, store, "s1")
    assert rested.status is RunStatus.AWAITING_INPUT
    assert rested.outputs == ["done m0", "done m3"]
    assert rested.state["turns"] == ["m0", "m3"]
    assert await store.inbox("s1") == []
    sent = [e.data["message"] for e in await store.read_events("s1") if e.kind == "message_sent"]
    assert sent == ["m1", "m2", "m3"]


async def test_debounce_waits_for_quiet_then_takes_the_burst_as_one_list(store, tmp_path):
    workflow = session("debounce")
    await workflow.run("m0", run_id="s1", store=store)
    first = asyncio.create_task(workflow.send_message("s1", "a", store=store))
    await asyncio.sleep(0.2)  # a burst: each message well inside the window of the one before
    for message in ("b", "c"):
        await workflow.send_message("s1", message, store=store)
    result = await first
    assert result.outputs == ["done m0", "done a+b+c"]
    assert result.state["turns"] == ["m0", "a+b+c"]


async def test_a_caller_may_choose_the_policy_of_a_message_unless_the_workflow_rejects(
    store, tmp_path
):
    gate = tmp_path / "gate"
    workflow = await resting_session("reject", store, gate)
    with pytest.raises(ValueError, match="rejects session input while a turn runs"):
        await workflow.send_message("s1", "m1", store=store, policy=InputPolicy.ENQUEUE)
    with pytest.raises(TypeError, match="must be an InputPolicy"):
        await workflow.send_message("s1", "m1", store=store, policy="enqueue")
    other = SqliteStore(tmp_path / "other.sqlite")
    try:
        enqueuing = await resting_session("enqueue", other, gate)
        driving = await turn_running(enqueuing, other, gate, "m1")
        with pytest.raises(SessionBusyError):
            await enqueuing.send_message("s1", "m2", store=other, policy=InputPolicy.REJECT)
        gate.touch()
        assert (await driving).outputs == ["done m0", "done m1"]
    finally:
        await other.close()


async def test_a_message_to_an_ended_session_is_refused_as_before(store):
    workflow = session("enqueue")
    result = await workflow.run("m0", run_id="s1", store=store)
    await workflow.cancel("s1", store=store)
    del result
    with pytest.raises(RequestError, match="ended"):
        await workflow.send_message("s1", "m1", store=store)


@pytest.mark.parametrize("policy", ["enqueue", "merge", "interrupt", "rollback", "debounce:1"])
async def test_a_message_for_no_executor_of_the_workflow_is_refused_and_the_turn_goes_on(
    store, tmp_path, policy
):
    # A sender's typo in the target ("wrok") was put in the inbox unchecked and failed the
    # whole session at the next boundary ("failed outside its handlers: KeyError: 'wrok'"),
    # for every user of it. It is refused to its sender, naming it, as under reject.
    gate = tmp_path / "gate"
    workflow = await resting_session(policy.partition(":")[0], store, gate)
    driving = await turn_running(workflow, store, gate, "m1")
    for typo in ("wrok", "work/x"):  # "work" runs no sub-workflow
        with pytest.raises(RequestError, match=rf"'{typo}'.*no executor of workflow"):
            await workflow.send_message(
                "s1", "note", target=typo, store=store, policy=InputPolicy.parse(policy)
            )
    gate.touch()
    result = await driving
    assert result.status is RunStatus.AWAITING_INPUT
    assert result.outputs == ["done m0", "done m1"]
    sent = [e.data["message"] for e in await store.read_events("s1") if e.kind == "message_sent"]
    assert sent == ["m1"]


@pytest.mark.parametrize("policy", ["merge", "interrupt", "enqueue"])
async def test_a_misdirected_message_from_a_sender_without_the_code_is_refused_on_the_record(
    store, tmp_path, policy
):
    # A Client (or any caller of the store's deliver) has not the workflow's code, so it
    # cannot check a message's target: "wrok" went into the inbox, and taken into the
    # running turn it failed the whole session ("KeyError: 'wrok'"). Its owner now refuses
    # it on the record, naming the target, and the turn goes on; the messages after it too.
    gate = tmp_path / "gate"
    workflow = await resting_session(policy, store, gate)
    driving = await turn_running(workflow, store, gate, "m1")
    kind = f"message:{policy}"
    for target, message in (("wrok", "typo"), ("work/x", "no sub-workflow"), (None, "m2")):
        item = (kind, target, workflow.serializer.dumps(message))
        await store.deliver("s1", [item], version=workflow.version, actor=Actor.python())
    gate.touch()
    result = await driving
    if result.status is not RunStatus.AWAITING_INPUT:  # enqueue: m2 starts the next turn
        result = await workflow.resume("s1", store=store)
    assert result.status is RunStatus.AWAITING_INPUT
    # m1's turn ends, or m2 interrupts it; either way m2 is taken, the run goes on.
    assert result.outputs[0] == "done m0"
    assert result.outputs[-1] == "done m2"
    refused = [e for e in await store.read_audit("s1") if e.action == "inbox_refused"]
    assert [e.detail["target"] for e in refused] == ["wrok", "work/x"]
    assert all("no executor of workflow" in e.detail["reason"] for e in refused)
    assert {(e.actor["kind"], e.door) for e in refused} == {("service", "worker")}
    assert await store.inbox("s1") == []


async def test_a_rollbacks_branch_gives_its_invocations_keys_no_abandoned_turn_had(store, tmp_path):
    # m1's turn is rolled back by m2, which the branch delivers where m1 was delivered
    # (the same supersteps, the same places): a service deduplicating by the key must
    # not take m2's calls for m1's, whose turn is abandoned, in the run or in the
    # sub-workflow it runs. And the branch's keys are its own for good: a later turn,
    # read back from the store by another workflow object, has them too.
    gate = tmp_path / "gate"
    keys: dict[str, str] = {}

    def build():
        @executor(id="keyed")
        async def keyed(message: str | Listen, ctx: WorkflowContext) -> None:
            if isinstance(message, Listen):
                ctx.send_message(await ctx.wait_for_input(), target="keyed")
                return
            keys[message] = ctx.idempotency_key
            ctx.send_message(message, target="inner")

        @executor(id="echo")
        async def echo(message: str, ctx: WorkflowContext) -> None:
            keys[f"inner {message}"] = ctx.idempotency_key
            ctx.yield_output(message)

        @executor(id="done")
        async def done(message: str, ctx: WorkflowContext) -> None:
            if message == "m1":  # m1's turn holds here, its sub-workflow run
                Path(f"{gate}.reached").touch()  # noqa: ASYNC240 - a marker file, once
                while not gate.exists():  # noqa: ASYNC110 - the test opens it
                    await asyncio.sleep(0.01)
            ctx.yield_output(f"done {message}")
            ctx.send_message(Listen(), target="keyed")

        inner = WorkflowBuilder(echo, name="echo").build()
        return (
            WorkflowBuilder(keyed, name="keyed", input_policy=InputPolicy.ROLLBACK)
            .add_workflow(inner, id="inner")
            .add_edge(keyed, keyed)
            .add_edge(keyed, "inner")
            .add_edge("inner", done)
            .add_edge(done, keyed)
            .build()
        )

    workflow = build()
    assert (await workflow.run("m0", run_id="s1", store=store)).status is RunStatus.AWAITING_INPUT
    driving = asyncio.create_task(workflow.send_message("s1", "m1", store=store))
    await file_appears(reached(gate))
    await workflow.send_message("s1", "m2", store=store)
    gate.touch()
    assert (await driving).outputs == ["done m0", "done m2"]
    assert keys["m2"] != keys["m1"]
    assert keys["inner m2"] != keys["inner m1"]
    place, branch = keys["m2"].rsplit("~", 1)
    assert place == keys["m1"]  # the same invocation's place, on a branch of its own
    inner_place, inner_branch = keys["inner m2"].rsplit("~", 1)
    assert (inner_place, inner_branch) == (keys["inner m1"], branch)
    later = await build().send_message("s1", "m3", store=store)
    assert later.outputs == ["done m0", "done m2", "done m3"]
    assert keys["m3"].endswith(f"~{branch}")
    assert keys["inner m3"].endswith(f"~{branch}")
    assert "~" not in keys["m0"] + keys["m1"] + keys["inner m1"]


async def resting_on_m1(workflow, store):
    """``workflow``'s session s1 with m0's turn approved and m1's resting on its request."""
    started = await workflow.run("m0", run_id="s1", store=store)
    await workflow.respond("s1", {started.pending_requests[0].request_id: True}, store=store)
    (m1_request,) = (await workflow.send_message("s1", "m1", store=store)).pending_requests
    return m1_request


async def test_an_answer_to_a_rolled_back_turns_request_is_never_taken_for_the_branchs(store):
    # m1's turn rests on a request about m1; m2 rolls it back and its branch asks about
    # m2 at the same place. An approver who answers what they were shown, m1's request,
    # must be refused: before, the branch's request had m1's id and took the answer.
    workflow = asking_session(InputPolicy.ROLLBACK)
    m1_request = await resting_on_m1(workflow, store)
    on_m2 = await workflow.send_message("s1", "m2", store=store)
    (m2_request,) = on_m2.pending_requests
    assert (m1_request.payload, m2_request.payload) == ({"text": "m1"}, {"text": "m2"})
    assert m2_request.request_id != m1_request.request_id
    with pytest.raises(RequestError, match="no request"):
        await workflow.respond("s1", {m1_request.request_id: True}, store=store)
    ended = await workflow.respond("s1", {m2_request.request_id: False}, store=store)
    assert ended.outputs == ["m0 approved", "m2 refused"]


async def test_a_rollbacks_branch_asks_its_handoff_approvals_and_schedules_under_ids_of_its_own(
    store,
):
    # The approval of a handoff and the handle of a scheduled message are made at the
    # same place as the abandoned turn's too. Before, the branch asked for m2's handoff
    # under m1's id: an approver answering m1's question approved m2's handoff, and once
    # m1's had been answered the branch's could never be (the store keeps the first answer).
    scheduled: dict[str, str] = {}

    @executor(id="front")
    async def front(message: str | Listen | HandoffRefused, ctx: WorkflowContext) -> None:
        if isinstance(message, Listen):
            ctx.send_message(await ctx.wait_for_input(), target="front")
        elif isinstance(message, HandoffRefused):
            ctx.send_message(Listen(), target="front")
        else:
            scheduled[message] = ctx.schedule_message(Listen(), after=3600, target="front").key
            ctx.handoff("back", message, reason=f"about {message}")

    @executor(id="back")
    async def back(message: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"back handled {message}")
        ctx.send_message(Listen(), target="front")

    workflow = (
        WorkflowBuilder(front, name="handing", input_policy=InputPolicy.ROLLBACK)
        .add_edge(front, front)
        .add_edge(back, front)
        .add_handoff(front, [back], require_approval=True)
        .build()
    )
    started = await workflow.run("m0", run_id="s1", store=store)
    await workflow.respond("s1", {started.pending_requests[0].request_id: True}, store=store)
    (m1_approval,) = (await workflow.send_message("s1", "m1", store=store)).pending_requests
    (m2_approval,) = (await workflow.send_message("s1", "m2", store=store)).pending_requests
    assert m2_approval.payload["payload"] == "m2"
    assert m2_approval.request_id != m1_approval.request_id
    assert scheduled["m2"] != scheduled["m1"]
    with pytest.raises(RequestError, match="no request"):
        await workflow.respond("s1", {m1_approval.request_id: True}, store=store)
    handled = await workflow.respond("s1", {m2_approval.request_id: True}, store=store)
    assert handled.outputs == ["back handled m0", "back handled m2"]


async def test_a_message_left_while_a_turn_rests_on_a_request_waits_for_it_and_nothing_spins(
    store,
):
    # A client holding no code delivers m2 while m1's turn rests on its request: the
    # message waits for the session's next rest on input. Before, whoever took the run up
    # (a resume, a worker) saw it in the inbox, could not take it, rested, and took the
    # run up again for it, for ever: a worker spun at full CPU and ignored SIGTERM.
    workflow = asking_session(InputPolicy.ROLLBACK)
    m1_request = await resting_on_m1(workflow, store)
    await Client(store).send_message("s1", "m2")
    resumed = await asyncio.wait_for(workflow.resume("s1", store=store), timeout=30)
    assert [r.request_id for r in resumed.pending_requests] == [m1_request.request_id]
    assert [item.kind for item in await store.inbox("s1")] == ["message"]
    # Given back not ready: no timer service takes the run up again for what it left.
    with sqlite3.connect(store.path) as db:
        (ready_at,) = db.execute("SELECT ready_at FROM treadle_runs WHERE run_id = 's1'").fetchone()
    assert ready_at is None
    answered = await workflow.respond("s1", {m1_request.request_id: False}, store=store)
    assert answered.outputs == ["m0 approved", "m1 refused"]
    (m2_request,) = answered.pending_requests  # m2's turn, started at the rest m1's left
    assert m2_request.payload == {"text": "m2"}
    assert await store.inbox("s1") == []  # the answer, taken from behind m2, marked too


async def test_an_answer_given_after_a_queued_message_ends_the_turn_and_the_message_starts_the_next(
    store,
):
    # Under enqueue, m2 waits for the session's next rest; m1's turn rests on a request,
    # and the answer comes after m2 in the inbox. The store marks a prefix of the inbox
    # applied, and the answer was held behind m2: the turn could never end, m2 never be
    # taken, and whoever took the run up again for them rested at once, for ever.
    workflow = asking_session(InputPolicy.ENQUEUE)
    m1_request = await resting_on_m1(workflow, store)
    queued = await workflow.send_message("s1", "m2", store=store)
    assert [r.request_id for r in queued.pending_requests] == [m1_request.request_id]
    answering = workflow.respond("s1", {m1_request.request_id: True}, store=store)
    answered = await asyncio.wait_for(answering, timeout=30)
    assert answered.outputs == ["m0 approved", "m1 approved"]
    (m2_request,) = answered.pending_requests
    assert m2_request.payload == {"text": "m2"}
    assert await store.inbox("s1") == []  # the answer taken ahead is marked applied too
    ended = await workflow.respond("s1", {m2_request.request_id: False}, store=store)
    assert ended.outputs == ["m0 approved", "m1 approved", "m2 refused"]
    refused = [e for e in await store.read_events("s1") if e.kind == "inbox_refused"]
    assert refused == []


async def test_a_rollback_of_a_first_turn_that_never_rested_on_input_is_refused_on_the_record(
    store,
):
    # The run's own input started the turn resting on its request: there is no rest on
    # input to go back to. Before, the message stayed in the inbox and every owner of the
    # run stopped on it: the request could not be answered, nor the run resumed.
    workflow = asking_session(InputPolicy.ROLLBACK)
    (first,) = (await workflow.run("x0", run_id="s1", store=store)).pending_requests
    sent = await workflow.send_message("s1", "x1", store=store)
    assert [r.request_id for r in sent.pending_requests] == [first.request_id]
    assert await store.inbox("s1") == []
    (refused,) = [e for e in await store.read_events("s1") if e.kind == "inbox_refused"]
    assert "never rested on input" in refused.data["reason"]
    answered = await workflow.respond("s1", {first.request_id: True}, store=store)
    assert (answered.status, answered.outputs) == (RunStatus.AWAITING_INPUT, ["x0 approved"])
    (next_request,) = (await workflow.send_message("s1", "x2", store=store)).pending_requests
    assert next_request.payload == {"text": "x2"}  # a turn on x2, from the rest x0's left


async def test_an_answer_taken_from_behind_a_message_is_marked_applied_when_the_run_ends(store):
    # The turn the answer ends is the session's last: the queued m1 is refused as the run
    # ends. The answer, applied from behind m1, was left unmarked for ever (the store marks
    # a prefix of the inbox applied): an ended run's inbox was never empty, and on SQLite
    # the run stayed ready for a timer service to take up.
    workflow = asking_session(InputPolicy.ENQUEUE)
    (stop_request,) = (await workflow.run("stop", run_id="s1", store=store)).pending_requests
    await workflow.send_message("s1", "m1", store=store)  # waits for a rest that never comes
    ended = await workflow.respond("s1", {stop_request.request_id: True}, store=store)
    assert (ended.status, ended.outputs) == (RunStatus.COMPLETED, ["stop approved"])
    assert await store.inbox("s1") == []
    (refused,) = [e for e in await store.read_events("s1") if e.kind == "inbox_refused"]
    assert refused.data["reason"] == "the run completed before taking it"
    with sqlite3.connect(store.path) as db:
        (ready_at,) = db.execute("SELECT ready_at FROM treadle_runs WHERE run_id = 's1'").fetchone()
    assert ready_at is None
