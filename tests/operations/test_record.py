"""The record of actions (issue 29): each action once in the run's log, with its actor, and
in the store's hash-chained audit log, written with its effect; deleting keeps the entries."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pytest
from record_app import record

from treadle import Actor, Role, WorkflowBuilder, WorkflowContext, executor
from treadle._stores._audit import chain_problems
from treadle._workflow import _actions as door
from treadle._workflow._rights import actor_or_default
from treadle.errors import ActionRefusedError, RequestTimeoutError, RunCancelledError

if TYPE_CHECKING:
    from treadle.stores import Store

ACTED = {
    "run_created",
    "request_answered",
    "message_sent",
    "run_paused",
    "run_unpaused",
    "run_resumed",
    "run_cancelled",
    "run_forked",
    "run_pruned",
    "run_deleted",
    "run_migrated",
    "request_timed_out",
}

MARIA = Actor("user", "maria", "page", Role.APPROVER, frozenset({"finance"}))
OPS = Actor("token", "ops", "api", Role.OPERATOR)


async def acted(store: Store, run_id: str) -> list[tuple[str, str, str]]:
    """The run's log's actions as (kind, actor label, door), in order.

    (The engine logs a ``run_started`` of its own, without an actor, each
    time a process starts stepping the run; the action is ``run_created``.)
    """
    return [
        (e.kind, e.data["actor"]["label"], e.data["actor"]["door"])
        for e in await store.read_events(run_id)
        if e.kind in ACTED and "actor" in e.data
    ]


async def test_every_python_action_is_in_the_runs_log_once_with_its_actor_and_in_the_audit_log(
    store: Store,
) -> None:
    first = await record.run("t", run_id="r1", store=store)
    (asked,) = first.pending_requests
    await record.respond("r1", {asked.request_id: True}, store=store, actor=MARIA)
    assert await record.pause("r1", store=store, actor=OPS) == "paused"
    await record.unpause("r1", store=store, actor=OPS)
    await record.send_message("r1", "hello", store=store, actor=OPS)
    history = await record.history("r1", store=store)
    fork = await record.fork("r1", history.checkpoints[0].checkpoint_id, store=store, actor=OPS)
    await record.prune("r1", 1, store=store)
    python = actor_or_default(None).label

    assert await acted(store, "r1") == [
        ("run_created", python, "python"),
        ("request_answered", "maria", "page"),
        ("run_paused", "token:ops", "api"),
        ("run_unpaused", "token:ops", "api"),
        ("message_sent", "token:ops", "api"),
        ("run_pruned", python, "python"),
    ]
    answered = next(e for e in await store.read_events("r1") if e.kind == "request_answered")
    assert answered.data["answer"] is True
    assert answered.data["request_id"] == asked.request_id
    assert await acted(store, fork) == [("run_forked", "token:ops", "api")]

    await record.cancel(fork, store=store, actor=OPS)
    await door.delete(store, fork, actor=Actor.cli())
    audit = await store.read_audit()
    assert chain_problems(audit) == []
    assert [(e.run_id, e.action) for e in audit] == [
        ("r1", "run_created"),
        ("r1", "request_answered"),
        ("r1", "run_paused"),
        ("r1", "run_unpaused"),
        ("r1", "message_sent"),
        (fork, "run_forked"),
        ("r1", "run_pruned"),
        (fork, "run_cancelled"),
        (fork, "run_deleted"),
    ]
    # The deleted run's entries stay, read by its id.
    kept = [e.action for e in await store.read_audit(fork)]
    assert kept == ["run_forked", "run_cancelled", "run_deleted"]
    assert audit[1].actor["groups"] == ["finance"]
    assert json.loads(json.dumps(audit[1].detail)) == {
        "request_id": asked.request_id,
        "answer": True,
    }


async def test_an_actor_without_the_right_is_refused_and_nothing_is_recorded(
    store: Store,
) -> None:
    first = await record.run("t", run_id="r2", store=store)
    (asked,) = first.pending_requests
    viewer = Actor("user", "bob", "page", Role.VIEWER)
    before = await store.read_audit()
    with pytest.raises(ActionRefusedError, match="bob is a viewer"):
        await record.respond("r2", {asked.request_id: True}, store=store, actor=viewer)
    with pytest.raises(ActionRefusedError, match="cancel needs the operator role"):
        await record.cancel("r2", store=store, actor=MARIA)
    with pytest.raises(ActionRefusedError, match="delete needs the admin role"):
        await door.delete(store, "r2", actor=OPS)
    assert await store.read_audit() == before
    assert (await store.get_run("r2")).status == "awaiting_input"


async def test_a_resume_that_does_nothing_or_is_refused_is_not_recorded(store: Store) -> None:
    # A completed run's resume has nothing to do, a cancelled one's is refused: neither is
    # an action on the run, so neither is on its record (both were, as "resumed the run").
    first = await record.run("t", run_id="r3", store=store)
    (asked,) = first.pending_requests
    await record.respond("r3", {asked.request_id: True}, store=store, actor=MARIA)
    await record.send_message("r3", "bye", store=store, actor=OPS)
    await record.run("t", run_id="r4", store=store)
    await record.cancel("r4", store=store, actor=OPS)
    before = await store.read_audit()
    done = await record.resume("r3", store=store, actor=OPS)
    assert done.status.value == "completed"
    with pytest.raises(RunCancelledError):
        await record.resume("r4", store=store, actor=OPS)
    assert await store.read_audit() == before
    assert "run_resumed" not in [kind for kind, _, _ in await acted(store, "r4")]


@executor
async def hurried(topic: str, ctx: WorkflowContext) -> None:
    try:
        await ctx.request({"topic": topic}, bool, timeout=0.05)
    except RequestTimeoutError:
        ctx.yield_output("late")


async def test_a_timeout_is_logged_once_as_the_timers(store: Store) -> None:
    workflow = WorkflowBuilder(start=hurried, name="hurried").build()
    await workflow.run("t", run_id="late", store=store)
    await asyncio.sleep(0.1)
    result = await workflow.resume("late", store=store)
    assert result.outputs == ["late"]
    timed_out = [e for e in await store.read_events("late") if e.kind == "request_timed_out"]
    assert [e.data["actor"]["label"] for e in timed_out] == ["service:timer"]
    assert [e.action for e in await store.read_audit("late")][-1] == "request_timed_out"


def _tampered(entries: list[Any], how: str) -> list[Any]:
    if how == "edited":
        changed = dataclasses.replace(entries[1], detail={"request_id": "x", "answer": False})
        return [entries[0], changed, *entries[2:]]
    if how == "reordered":
        return [entries[0], entries[2], entries[1], *entries[3:]]
    return [entries[0], *entries[2:]]  # removed


@pytest.mark.parametrize("how", ["edited", "reordered", "removed"])
async def test_the_chain_names_an_edited_reordered_or_removed_entry(store: Store, how: str) -> None:
    first = await record.run("t", run_id="r3", store=store)
    (asked,) = first.pending_requests
    await record.respond("r3", {asked.request_id: True}, store=store, actor=MARIA)
    await record.pause("r3", store=store, actor=OPS)
    entries = await store.read_audit()
    assert chain_problems(entries) == []
    problems = chain_problems(_tampered(entries, how))
    assert problems, how


@executor
async def guarded(topic: str, ctx: WorkflowContext) -> None:
    approved = await ctx.request(
        {"topic": topic}, bool, approvers=["group:finance"], four_eyes=True
    )
    ctx.yield_output(approved)


async def test_a_requests_approvers_and_four_eyes_are_checked_at_the_door(store: Store) -> None:
    workflow = WorkflowBuilder(start=guarded, name="guarded").build()
    starter = Actor("user", "maria", "page", Role.OPERATOR, frozenset({"finance"}))
    first = await workflow.run("t", run_id="g", store=store, actor=starter)
    (asked,) = first.pending_requests
    bob = Actor("user", "bob", "page", Role.APPROVER)
    with pytest.raises(ActionRefusedError, match="only group:finance may"):
        await workflow.respond("g", {asked.request_id: True}, store=store, actor=bob)
    with pytest.raises(ActionRefusedError, match="four eyes"):
        await workflow.respond("g", {asked.request_id: True}, store=store, actor=MARIA)
    ann = Actor("user", "ann", "page", Role.APPROVER, frozenset({"finance"}))
    result = await workflow.respond("g", {asked.request_id: True}, store=store, actor=ann)
    assert result.outputs == [True]
    assert [e.actor["label"] for e in await store.read_audit("g")] == ["maria", "ann"]
