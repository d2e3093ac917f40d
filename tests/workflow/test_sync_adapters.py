"""Every async method a script calls on a workflow's stored runs has a ``_sync`` twin.

Each twin is a thin adapter over the async method (``_workflow/_sync.py``
runs it on a loop thread of its own); each test drives one from plain
synchronous code on a real SQLite file, as a script would, and checks what
the async method promises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from treadle import Workflow


@executor
async def ask(topic: str, ctx: WorkflowContext) -> None:
    ctx.state.set("topic", topic)
    approved = await ctx.request({"topic": topic}, bool)
    ctx.yield_output(f"{topic}: {'approved' if approved else 'refused'}")


@executor
async def chat(first: str, ctx: WorkflowContext) -> None:
    said = [first]
    while said[-1] != "bye":
        said.append(str(await ctx.wait_for_input()))
    ctx.yield_output(said)


def asking(tmp_path: Path) -> Workflow:
    store = SqliteStore(str(tmp_path / "runs.sqlite"))
    return WorkflowBuilder(start=ask, name="asking", store=store).build()


def waiting(workflow: Workflow, run_id: str = "r1") -> str:
    rested = workflow.run_sync("otters", run_id=run_id)
    assert rested.status is RunStatus.AWAITING_INPUT
    (request,) = rested.pending_requests
    return request.request_id


def test_respond_sync_answers_and_continues_the_run(tmp_path):
    workflow = asking(tmp_path)
    request_id = waiting(workflow)
    done = workflow.respond_sync("r1", {request_id: True})
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["otters: approved"]


def test_send_message_sync_delivers_the_next_message_of_a_session(tmp_path):
    store = SqliteStore(str(tmp_path / "runs.sqlite"))
    workflow = WorkflowBuilder(start=chat, name="chat", store=store).build()
    assert workflow.run_sync("hi", run_id="c1").status is RunStatus.AWAITING_INPUT
    assert workflow.send_message_sync("c1", "how are you").status is RunStatus.AWAITING_INPUT
    done = workflow.send_message_sync("c1", "bye")
    assert done.outputs == [["hi", "how are you", "bye"]]


def test_cancel_sync_cancels_a_resting_run(tmp_path):
    workflow = asking(tmp_path)
    waiting(workflow)
    workflow.cancel_sync("r1")
    assert workflow.history_sync("r1").run.status == RunStatus.CANCELLED.value


def test_fork_sync_branches_a_run_that_can_be_answered(tmp_path):
    workflow = asking(tmp_path)
    request_id = waiting(workflow)
    first = workflow.history_sync("r1").checkpoints[0]
    forked = workflow.fork_sync("r1", first.checkpoint_id, {"topic": "seals"}, new_run_id="f1")
    assert forked == "f1"
    resumed = workflow.resume_sync("f1")
    assert resumed.status is RunStatus.AWAITING_INPUT
    assert workflow.history_sync("f1").run.parent_run_id == "r1"
    assert workflow.respond_sync("r1", {request_id: False}).outputs == ["otters: refused"]


def test_pause_sync_and_unpause_sync(tmp_path):
    workflow = asking(tmp_path)
    request_id = waiting(workflow)
    assert workflow.pause_sync("r1") == "paused"
    assert workflow.history_sync("r1").run.status == RunStatus.PAUSED.value
    unpaused = workflow.unpause_sync("r1")
    assert unpaused.status is RunStatus.AWAITING_INPUT
    assert workflow.respond_sync("r1", {request_id: True}).status is RunStatus.COMPLETED


def test_history_sync_lists_the_checkpoints(tmp_path):
    workflow = asking(tmp_path)
    waiting(workflow)
    history = workflow.history_sync("r1")
    assert history.run.run_id == "r1"
    assert [c.superstep for c in history.checkpoints] == sorted(
        c.superstep for c in history.checkpoints
    )
    assert len(history.checkpoints) >= 1
    assert history.forks == []


def test_prune_sync_keeps_the_newest_checkpoints(tmp_path):
    workflow = asking(tmp_path)
    request_id = waiting(workflow)
    workflow.respond_sync("r1", {request_id: True})
    before = len(workflow.history_sync("r1").checkpoints)
    assert before > 1
    assert workflow.prune_sync("r1", 1) == before - 1
    assert len(workflow.history_sync("r1").checkpoints) == 1


@pytest.mark.parametrize("adapter", ["run_sync", "stream_sync"])
def test_a_caller_that_stops_waiting_stops_the_run(adapter):
    # Ctrl-C in run_sync, or a for loop left early over stream_sync without closing
    # it: the run went on, unseen, on the adapter's thread, its handlers still called.
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("interrupted_app.py")), adapter],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["how"] in ("interrupted", "left")
    assert seen["at_stop"] > 0
    assert seen["later"] == seen["at_stop"]
