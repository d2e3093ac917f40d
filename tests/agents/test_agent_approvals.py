"""Tools that need approval: a durable request answered approve, edit or refuse."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
from pydantic_ai import Agent
from refund_app import build
from scripted import Call, counted, scripted

from cli.treadle_cli import Cli
from treadle import RunStatus, WorkflowBuilder
from treadle.agents import AgentExecutor, ToolApproval, ToolDecision
from treadle.declarative import loads
from treadle.errors import DefinitionError, InvalidResponseError
from treadle.stores import MemoryStore, SqliteStore

HERE = Path(__file__).parent


async def ask(tmp_path: Path, run_id: str = "refund-1"):
    side = tmp_path / "side.sqlite"
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = build(str(side))
    asked = await workflow.run("Refund order A1, please.", store=store, run_id=run_id)
    return workflow, store, side, asked


async def test_a_tool_needing_approval_asks_first_and_runs_once_approved(tmp_path):
    workflow, store, side, asked = await ask(tmp_path)
    try:
        assert asked.status is RunStatus.AWAITING_INPUT
        (request,) = asked.pending_requests
        assert request.payload == ToolApproval(
            "billing", "refund", {"order": "A1", "cents": 5000}, "refund-1"
        )
        assert counted(side) == {}  # asked before anything ran
        done = await workflow.respond(
            "refund-1", {request.request_id: ToolDecision.approve()}, store=store
        )
    finally:
        await store.close()
    assert done.outputs == ["Done: refunded 5000 on A1 (refund #1)"]
    assert counted(side) == {"refund": 1}


async def test_a_tool_approval_names_who_may_decide_it_in_its_request_and_log(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = build(str(tmp_path / "side.sqlite"), approvers=["group:finance"], four_eyes=True)
    try:
        asked = await workflow.run("Refund order A1, please.", store=store, run_id="refund-1")
        (request,) = asked.pending_requests
        assert (request.approvers, request.four_eyes) == (("group:finance",), True)
        (logged,) = [e for e in await store.read_events("refund-1") if e.kind == "request"]
        assert (logged.data["approvers"], logged.data["four_eyes"]) == (["group:finance"], True)
    finally:
        await store.close()
    with pytest.raises(ValueError, match="approver 'role:cfo': 'cfo' is not a role"):
        build(str(tmp_path / "side.sqlite"), approvers=["role:cfo"])


async def test_an_edited_call_runs_with_the_new_arguments_and_the_history_shows_them(tmp_path):
    workflow, store, _side, asked = await ask(tmp_path)
    try:
        (request,) = asked.pending_requests
        answer = {"action": "edit", "args": {"order": "A1", "cents": 2000}}  # JSON, as typed
        done = await workflow.respond("refund-1", {request.request_id: answer}, store=store)
    finally:
        await store.close()
    assert done.outputs == ["Done: refunded 2000 on A1 (refund #1)"]
    call = done.state["conversation"][1]["parts"][0]
    assert (call["tool_name"], call["args"]) == ("refund", {"order": "A1", "cents": 2000})


async def test_a_refused_call_never_runs_and_the_model_reads_the_reason(tmp_path):
    workflow, store, side, asked = await ask(tmp_path)
    try:
        (request,) = asked.pending_requests
        refusal = ToolDecision.refuse("over the limit")
        done = await workflow.respond("refund-1", {request.request_id: refusal}, store=store)
    finally:
        await store.close()
    # A failed tool result, as the model reads one.
    assert done.outputs == ['Done: {"error":"The call of refund was refused: over the limit"}']
    assert counted(side) == {}


async def test_an_answer_that_is_no_decision_is_refused_and_the_run_still_waits(tmp_path):
    workflow, store, side, asked = await ask(tmp_path)
    try:
        (request,) = asked.pending_requests
        for bad in ({"action": "maybe"}, {"action": "edit"}, {"action": "approve", "reason": "x"}):
            with pytest.raises(InvalidResponseError):
                await workflow.respond("refund-1", {request.request_id: bad}, store=store)
        again = await workflow.resume("refund-1", store=store)
        assert again.status is RunStatus.AWAITING_INPUT
    finally:
        await store.close()
    assert counted(side) == {}


def test_tool_decisions_refuse_contradictions_where_they_are_made():
    assert ToolDecision.edit({"a": 1}) == ToolDecision("edit", args={"a": 1})
    with pytest.raises(ValueError, match="exactly when"):
        ToolDecision("approve", args={"a": 1})
    with pytest.raises(ValueError, match="only a refusal"):
        ToolDecision("edit", args={}, reason="why")
    assert dataclasses.asdict(ToolDecision.refuse()) == {
        "action": "refuse",
        "args": None,
        "reason": None,
    }


@pytest.mark.integration
def test_a_refund_asked_in_one_process_is_answered_by_treadle_respond_in_another(tmp_path):
    side = tmp_path / "side.sqlite"
    cli = Cli(tmp_path, PYTHONPATH=str(HERE), REFUND_SIDE=str(side))

    def treadle(*args: str) -> subprocess.CompletedProcess[str]:
        """The command in a process of its own, forked with the command line imported."""
        with cli.fork(*args) as command:
            return subprocess.CompletedProcess(args, *command.finish(50))

    started = treadle(
        "run",
        "refund_app:desk",
        "--input",
        '"Refund order A1, please."',
        "--run-id",
        "r1",
        "--json",
    )
    assert started.returncode == 3, started.stderr  # the process exits with the run awaiting input
    (request,) = json.loads(started.stdout)["pending_requests"]
    assert request["payload"] == {
        "agent": "billing",
        "tool": "refund",
        "args": {"order": "A1", "cents": 5000},
        "call_id": "refund-1",
    }
    assert counted(side) == {}

    answered = treadle("respond", "r1", request["request_id"], '{"action": "approve"}', "--json")
    assert answered.returncode == 0, answered.stderr
    done = json.loads(answered.stdout)
    assert done["status"] == "completed"
    assert done["outputs"] == ["Done: refunded 5000 on A1 (refund #1)"]
    assert counted(side) == {"refund": 1}

    again = treadle("respond", "r1", request["request_id"], '{"action": "approve"}')
    assert again.returncode != 0  # answered once: a second answer changes nothing
    assert counted(side) == {"refund": 1}


async def test_two_calls_needing_approval_in_one_response_are_asked_one_after_the_other():
    model = scripted(
        [
            Call("refund", {"order": "A1", "cents": 100}, id="first"),
            Call("refund", {"order": "B2", "cents": 200}, id="second"),
        ],
        "Both done.",
    )
    refunded: list[str] = []
    agent = Agent(model, name="billing")

    @agent.tool_plain
    def refund(order: str, cents: int) -> str:
        refunded.append(order)
        return "ok"

    workflow = WorkflowBuilder(AgentExecutor(agent, approve_tools=["refund"])).build()
    store = MemoryStore()
    asked = await workflow.run("Refund both.", store=store, run_id="two")
    (first,) = asked.pending_requests
    assert first.payload.call_id == "first"
    asked = await workflow.respond("two", {first.request_id: ToolDecision.approve()}, store=store)
    (second,) = asked.pending_requests
    assert second.payload.call_id == "second"
    assert refunded == []  # nothing runs before every call of the response is decided
    done = await workflow.respond("two", {second.request_id: ToolDecision.approve()}, store=store)
    assert done.outputs == ["Both done."]
    assert sorted(refunded) == ["A1", "B2"]


@pytest.fixture
def refund_cli(tmp_path: Path):
    """``treadle`` on a refund run ``r1`` waiting for approval: (treadle, request_id).

    Each command runs in the test's process (``Cli``): what these tests check
    is what the command says, which needs no process of its own.
    """
    treadle = Cli(tmp_path, PYTHONPATH=str(HERE), REFUND_SIDE=str(tmp_path / "side.sqlite"))
    started = treadle(
        "run", "refund_app:desk", "--input", '"Refund A1."', "--run-id", "r1", "--json"
    )
    assert started.returncode == 3, started.stderr
    (request,) = json.loads(started.stdout)["pending_requests"]
    return treadle, request["request_id"]


def test_an_empty_decision_is_refused_naming_action_and_nothing_is_approved(refund_cli, tmp_path):
    treadle, request_id = refund_cli
    empty = treadle("respond", "r1", request_id, "{}")
    assert empty.returncode == 2, (empty.stdout, empty.stderr)
    assert "action" in empty.stderr
    assert counted(tmp_path / "side.sqlite") == {}  # no refund paid out by default
    chosen = treadle("respond", "r1", request_id, '{"action": "refuse"}', "--json")
    assert chosen.returncode == 0, chosen.stderr  # the empty answer was not kept
    assert counted(tmp_path / "side.sqlite") == {}


def test_an_edit_that_does_not_fit_the_tool_is_refused_naming_the_field(refund_cli, tmp_path):
    treadle, request_id = refund_cli
    bad = '{"action": "edit", "args": {"order": "A1", "cents": "lots"}}'
    refused = treadle("respond", "r1", request_id, bad)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert "cents" in refused.stderr
    unknown = '{"action": "edit", "args": {"order": "A1", "cent": 10}}'
    refused = treadle("respond", "r1", request_id, unknown)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert "cent" in refused.stderr
    assert "did you mean 'cents'" in refused.stderr
    fixed = '{"action": "edit", "args": {"order": "A1", "cents": 2000}}'
    done = treadle("respond", "r1", request_id, fixed, "--json")
    assert done.returncode == 0, done.stderr  # the refused edits were not kept
    assert json.loads(done.stdout)["outputs"] == ["Done: refunded 2000 on A1 (refund #1)"]
    assert counted(tmp_path / "side.sqlite") == {"refund": 1}


def test_already_answered_shows_the_answer_as_plain_json(refund_cli):
    treadle, request_id = refund_cli
    first = treadle("respond", "r1", request_id, '{"action": "refuse", "reason": "no"}')
    assert first.returncode == 0, first.stderr
    again = treadle("respond", "r1", request_id, '{"action": "approve"}')
    assert again.returncode == 2, (again.stdout, again.stderr)
    assert "already answered" in again.stderr
    assert '{"action":"refuse","args":null,"reason":"no"}' in again.stderr.replace("\n", "")
    assert "__t" not in again.stderr


def test_approve_tools_naming_a_tool_the_agent_lacks_is_refused_before_anything_runs():
    # A misspelt name asked approval for nothing: the real tool then ran unapproved.
    from pydantic_ai.models.test import TestModel  # noqa: PLC0415 - offline, by design

    agent = Agent(TestModel(), name="billing")
    ran = []

    @agent.tool_plain
    def refund(order: str, cents: int) -> str:
        ran.append((order, cents))
        return "refunded"

    with pytest.raises(
        ValueError, match=r"agent 'billing' has no tool 'refnud'.*its tools: refund"
    ):
        AgentExecutor(agent, approve_tools=["refnud"])
    AgentExecutor(agent, approve_tools=["refund", "handoff_to_desk"])  # a handoff's: the workflow's
    definition = (
        "name: desk\nstart: billing\nnodes:\n  billing: {agent: b, approve_tools: [refnud]}\n"
    )
    with pytest.raises(DefinitionError, match=r"has no tool 'refnud' to ask approval for"):
        loads(definition, agents={"b": agent})
    assert ran == []
