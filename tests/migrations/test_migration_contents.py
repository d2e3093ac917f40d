"""Migration functions over a parked run's checkpoint, and the check of what they return.

Version 1 of an intake workflow parks each run on a question (``approve``
asks for a ``Decision``) with a reminder scheduled for ``remind``. Version
2 renames ``approve`` to ``review``, replaces ``remind`` with ``nudge``
(which takes a ``Nudge``, not a ``Remind``) and reads a new state key. The
migration's result is written as a new run and driven by version 2's code
to its end: renamed, converted and extended, the run goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._checkpoints._checkpointer import Checkpointer
from treadle._checkpoints._delta import PieceCache
from treadle._checkpoints._graph_description import encode_description
from treadle._migrations._steps import (
    CheckpointContents,
    Migration,
    apply_migrations,
    contents_of,
    migration,
    migration_path,
)
from treadle._workflow._runs import load_restored
from treadle.errors import MigrationError, RequestTimeoutError, TreadleError
from treadle.stores import MemoryStore
from treadle.testing import FakeClock

HOUR = 3600.0


@dataclass(frozen=True)
class Decision:
    approved: bool


@dataclass(frozen=True)
class Remind:
    doc: str


@dataclass(frozen=True)
class Nudge:
    doc: str
    level: int


class NotStorable:
    """A class no serializer of these workflows knows."""


def version_1(store, clock):
    @executor(id="write")
    async def write(text: str, ctx: WorkflowContext[str | Remind]) -> None:
        ctx.schedule_message(Remind(text), after=2 * HOUR, target="remind")
        ctx.send_message(text, target="approve")

    @executor(id="approve")
    async def approve(draft: str, ctx: WorkflowContext) -> None:
        decision = await ctx.request({"draft": draft}, Decision, timeout=4 * HOUR)
        ctx.yield_output(f"v1 {draft}: {decision.approved}")

    @executor(id="remind")
    async def remind(reminder: Remind, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"remember {reminder.doc}")

    return (
        WorkflowBuilder(write, name="intake", store=store, clock=clock)
        .add_edge(write, approve)
        .add_edge(write, remind)
        .register_type(Decision)
        .build()
    )


def version_2(store, clock):
    @executor(id="write")
    async def write(text: str, ctx: WorkflowContext[str | Nudge]) -> None:
        ctx.schedule_message(Nudge(text, 0), after=2 * HOUR, target="nudge")
        ctx.send_message(text, target="review")

    @executor(id="review")
    async def review(draft: str, ctx: WorkflowContext) -> None:
        try:
            decision = await ctx.request({"draft": draft}, Decision, timeout=4 * HOUR)
        except RequestTimeoutError:
            ctx.yield_output(f"v2 {draft}: nobody answered")
            return
        priority = ctx.state.get("priority")
        ctx.yield_output(f"v2 {draft}: {decision.approved}, priority {priority}")

    @executor(id="nudge")
    async def nudge(reminder: Nudge, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"nudge {reminder.doc} at level {reminder.level}")

    return (
        WorkflowBuilder(write, name="intake", store=store, clock=clock)
        .add_edge(write, review)
        .add_edge(write, nudge)
        .add_state("priority", default="unset")
        .register_type(Decision)
        .build()
    )


@migration("intake", from_version=1, to_version=2)
def to_version_2(run: CheckpointContents) -> CheckpointContents:
    nudges = [Nudge(reminder.doc, 1) for reminder in run.pending.get("remind", ())]
    run = run.rename_executor("approve", "review").rename_executor("remind", "nudge")
    return run.with_pending("nudge", nudges).with_state(priority="high")


async def parked(text: str = "d1", run_id: str = "r1"):
    """A store holding one run of version 1 resting on its question, and the run decoded."""
    clock, store = FakeClock(start=0.0), MemoryStore()
    v1 = version_1(store, clock)
    rested = await v1.run(text, run_id=run_id)
    assert rested.status is RunStatus.AWAITING_INPUT
    return clock, store, await load_restored(v1, store, run_id, None)


async def written_as_new_run(store, workflow, migrated, run_id: str) -> None:
    """The migrated checkpoint as the first checkpoint of a new run (as ``fork_run`` does)."""
    barrier = migrated.barrier._replace(run_id=run_id)
    checkpointer = Checkpointer(store, workflow.codec, workflow.fingerprint)
    graph = encode_description(workflow.description)
    await checkpointer.create(workflow.name, graph, barrier, migrated.snapshots)


async def test_a_migrated_run_goes_on_with_the_new_graph_to_its_end():
    clock, store, restored = await parked()
    v2 = version_2(store, clock)
    migrated = apply_migrations(restored, [to_version_2], v2)

    before, after = migrated.before, migrated.after
    assert before.pending == {"approve": ("d1",), "remind": (Remind("d1"),)}
    [(question, _)] = [(w, w.key) for w in before.waits["approve"]]
    assert (question.kind, question.payload, question.message) == ("request", {"draft": "d1"}, "d1")
    assert question.due_at == 4 * HOUR
    [scheduled] = before.waits["remind"]
    assert (scheduled.kind, scheduled.due_at, scheduled.message) == (
        "scheduled",
        2 * HOUR,
        Remind("d1"),
    )
    assert after.pending == {"nudge": (Nudge("d1", 1),), "review": ("d1",)}
    assert after.renamed == {"approve": "review", "remind": "nudge"}
    assert (after.version, after.state["priority"]) == (2, "high")
    assert set(after.executors) == {"nudge", "review", "write"}
    assert restored.waits.suspended[0].executor_id == "approve"  # the checkpoint read is untouched

    await written_as_new_run(store, v2, migrated, "r1-v2")
    [asked] = (await load_restored(v2, store, "r1-v2", None)).waits.pending_requests()
    # The question keeps its id (an answer sent before the move still fits), asked by review.
    assert (asked.request_id, asked.executor_id) == (question.key, "review")

    answered = await v2.respond("r1-v2", {question.key: Decision(approved=True)})
    assert answered.outputs == ["v2 d1: True, priority high"]  # the new key, seen by the handler
    assert (answered.status, answered.wake_at) == (RunStatus.WAITING, 2 * HOUR)
    await clock.advance_to(2 * HOUR)
    done = await v2.resume("r1-v2")
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["v2 d1: True, priority high", "nudge d1 at level 1"]


async def test_a_migrated_question_nobody_answers_times_out_in_the_new_handler():
    clock, store, restored = await parked()
    v2 = version_2(store, clock)
    await written_as_new_run(store, v2, apply_migrations(restored, [to_version_2], v2), "r1-v2")
    await clock.advance_to(4 * HOUR)
    done = await v2.resume("r1-v2")
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == ["v2 d1: nobody answered", "nudge d1 at level 1"]


async def test_a_renamed_sub_workflow_goes_on_inside_its_parent():
    @executor(id="draft")
    async def draft(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(text + "+draft")

    @executor(id="sign")
    async def sign(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"{text}: {await ctx.request(text, bool)}")

    legal = WorkflowBuilder(draft, name="legal").add_edge(draft, sign).build()

    @executor(id="intake")
    async def intake(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(text)

    def parent(store, inner_id):
        return (
            WorkflowBuilder(intake, name="parent", store=store)
            .add_workflow(legal, id=inner_id)
            .add_edge(intake, inner_id)
            .build()
        )

    store = MemoryStore()
    v1, v2 = parent(store, "legal"), parent(store, "counsel")
    [old] = (await v1.run("deed", run_id="p1")).pending_requests
    assert old.executor_id == "legal/sign"
    restored = await load_restored(v1, store, "p1", None)
    [waiting] = contents_of(restored, "parent", 1).waits["legal"]
    assert waiting.kind == "workflow"
    assert [r.request_id for r in waiting.payload] == [old.request_id]

    moved = apply_migrations(
        restored,
        [migration("parent", 1, 2)(lambda run: run.rename_executor("legal", "counsel"))],
        v2,
    )
    await written_as_new_run(store, v2, moved, "p1-v2")
    [asked] = (await load_restored(v2, store, "p1-v2", None)).waits.pending_requests()
    assert (asked.request_id, asked.executor_id) == (old.request_id, "counsel/sign")
    done = await v2.respond("p1-v2", {old.request_id: True})
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, ["deed+draft: True"])


async def test_every_problem_of_the_result_is_named_at_once():
    clock, store, restored = await parked()
    v2 = version_2(store, clock)

    @migration("intake", 1, 2)
    def careless(run: CheckpointContents) -> CheckpointContents:
        # Renames, but keeps the Remind (nudge takes a Nudge) and stores what cannot be stored.
        run = run.rename_executor("approve", "review").rename_executor("remind", "nudge")
        return run.with_state(lock=threading.Lock(), odd=NotStorable())

    with pytest.raises(MigrationError) as refused:
        apply_migrations(restored, [careless], v2)
    error = refused.value
    assert error.run_id == "r1"
    assert isinstance(error, TreadleError)
    [payload, lock, odd, unstorable] = error.reasons
    assert "a Remind on its way to 'nudge' (from 'write') has no handler there" in payload
    assert "it takes: Nudge" in payload
    assert "with_pending('nudge', [...])" in payload
    assert lock.startswith("state key 'lock' holds a lock that version 2 of 'intake' cannot store")
    assert odd.startswith("state key 'odd' holds a NotStorable that version 2")
    assert unstorable.startswith(  # version 2 names no Remind: it cannot even store one
        "a message on its way to 'nudge' holds a Remind that version 2 of 'intake' cannot store"
    )
    assert "register_type(Remind)" in unstorable
    assert str(error).startswith("run 'r1' cannot be migrated (4 problems):\n  - a Remind")

    with pytest.raises(MigrationError) as unmoved:  # nothing renamed: approve and remind are gone
        apply_migrations(restored, [migration("intake", 1, 2)(lambda run: run)], v2)
    [approve, remind, unstorable] = unmoved.value.reasons
    assert approve.startswith("executor 'approve' is not in version 2 of 'intake', but the")
    assert "its suspended invocation (a request wait 'req-" in approve
    assert "its iteration count" in approve
    assert "rename_executor('approve', ...)" in approve
    assert "drop_executor('approve')" in approve
    assert remind.startswith("executor 'remind' is not in version 2")
    assert "a message scheduled for it (due at 7200.0)" in remind
    assert "a message on its way to 'remind' holds a Remind" in unstorable


async def test_a_function_that_raises_or_returns_something_else_is_named_with_it():
    clock, store, restored = await parked()
    v2 = version_2(store, clock)

    @migration("intake", 1, 2)
    def broken(run: CheckpointContents) -> CheckpointContents:
        return run.rename_executor("approver", "review")  # a typo

    with pytest.raises(MigrationError) as raised:
        apply_migrations(restored, [broken], v2)
    [reason] = raised.value.reasons
    assert reason.startswith(
        "migration test_a_function_that_raises_or_returns_something_else_is_named_with_it."
        "<locals>.broken (version 1 -> 2) raised ValueError: run 'r1' has no executor 'approver'"
    )
    assert "(it knows: 'approve', 'remind', 'write')" in reason
    assert isinstance(raised.value.__cause__, ValueError)

    @migration("intake", 1, 2)
    def forgetful(run: CheckpointContents) -> CheckpointContents:
        run.rename_executor("approve", "review")  # the new value is dropped

    with pytest.raises(MigrationError, match=r"returned a NoneType, not CheckpointContents"):
        apply_migrations(restored, [forgetful], v2)

    @migration("intake", 1, 2)
    def time_traveller(run: CheckpointContents) -> CheckpointContents:
        return dataclasses.replace(run, superstep=99)

    with pytest.raises(MigrationError, match=r"changed superstep \(2 -> 99\), which a migration"):
        apply_migrations(restored, [time_traveller], v2)


async def test_a_chain_of_migrations_runs_in_order_each_seeing_its_version():
    clock, store, restored = await parked()
    seen = []

    @migration("intake", 1, 2)
    def first(run: CheckpointContents) -> CheckpointContents:
        seen.append(("first", run.version))
        return run.rename_executor("approve", "check").rename_executor("remind", "nudge")

    @migration("intake", 2, 3)
    def second(run: CheckpointContents) -> CheckpointContents:
        seen.append(("second", run.version, dict(run.renamed)))
        nudges = [Nudge(r.doc, 2) for r in run.pending["nudge"]]
        return run.rename_executor("check", "review").with_pending("nudge", nudges)

    path = migration_path([second, first], "intake", 1, 3)
    assert path == (first, second)
    moved = apply_migrations(restored, path, version_2(store, clock))
    assert seen == [("first", 1), ("second", 2, {"approve": "check", "remind": "nudge"})]
    assert moved.after.version == 3
    assert moved.after.renamed == {"approve": "review", "remind": "nudge"}
    assert moved.before.version == 1


def test_the_path_prefers_a_direct_step_and_names_what_is_missing():
    def same(run):
        return run

    one_two, two_three = migration("w", 1, 2)(same), migration("w", 2, 3)(same)
    one_three, three_five = migration("w", 1, 3)(same), migration("w", 3, 5)(same)
    other = migration("elsewhere", 1, 3)(same)
    assert migration_path([one_two, two_three, other], "w", 1, 3) == (one_two, two_three)
    assert migration_path([one_two, two_three, one_three], "w", 1, 3) == (one_three,)
    assert migration_path([one_two, two_three, three_five], "w", 1, 5) == (
        one_two,
        two_three,
        three_five,
    )
    assert migration_path([one_two], "w", 2, 2) == ()

    with pytest.raises(MigrationError) as missing:
        migration_path([one_two, three_five, other], "w", 1, 5)
    [reason] = missing.value.reasons
    assert missing.value.run_id is None
    assert "no chain of migrations of 'w' leads from version 1 to 5" in reason
    assert "from 1 they reach 1, 2, and 5 is reached from 3, 5" in reason
    assert "Registered: 1->2 (test_the_path" in reason

    twin = migration("w", 1, 2)(lambda run: run)
    with pytest.raises(MigrationError, match=r"two migrations of 'w' move version 1 to 2: .*same"):
        migration_path([one_two, twin], "w", 1, 2)
    with pytest.raises(MigrationError, match="goes back from version 3 to 1"):
        migration_path([one_two], "w", 3, 1)


@pytest.mark.parametrize(
    ("args", "error", "named"),
    [
        (("w", 2, 2), ValueError, "from_version=2, to_version=2"),
        (("w", 3, 1), ValueError, "from_version=3, to_version=1"),
        (("w", 0, 1), ValueError, "an int from 1, got 0"),
        (("w", 1, "2"), TypeError, "an int from 1, got '2'"),
        (("w", True, 2), TypeError, "an int from 1, got True"),
        (("", 1, 2), ValueError, "an empty str"),
        ((None, 1, 2), TypeError, "got None"),
    ],
)
def test_a_migration_is_refused_where_it_is_declared(args, error, named):
    with pytest.raises(error, match=named):
        migration(*args)
    with pytest.raises(error, match=named):
        Migration(*args, lambda run: run)


def test_a_migration_is_called_as_its_function_and_named_after_it():
    assert to_version_2.name == "to_version_2"
    assert (to_version_2.workflow, to_version_2.from_version, to_version_2.to_version) == (
        "intake",
        1,
        2,
    )
    with pytest.raises(TypeError, match="must be callable"):
        Migration("w", 1, 2, "not a function")


async def test_dropping_an_executor_that_holds_a_wait_takes_force():
    clock, store, restored = await parked()
    run = contents_of(restored, "intake", 1)

    without_reminder = run.drop_executor("remind")  # only a scheduled message: no force needed
    assert without_reminder.pending == {"approve": ("d1",)}
    assert "remind" not in without_reminder.waits
    assert without_reminder.dropped == ("remind",)

    with pytest.raises(ValueError, match="force=True") as refused:
        run.drop_executor("approve")
    assert "holds a suspended invocation (request 'req-" in str(refused.value)
    assert "rename_executor('approve', ...)" in str(refused.value)

    gone = run.rename_executor("approve", "review").drop_executor("review", force=True)
    assert (gone.dropped, gone.renamed) == (("approve",), {})  # named as in version 1
    assert "review" not in gone.pending
    assert gone.waits == {"remind": run.waits["remind"]}
    assert "approve" not in gone.iterations

    v2 = version_2(store, clock)
    moved = apply_migrations(
        restored,
        [
            migration("intake", 1, 2)(
                lambda r: r.drop_executor("approve", force=True).drop_executor("remind")
            )
        ],
        v2,
    )
    assert moved.barrier.waits.pending_requests() == []
    assert moved.after.dropped == ("approve", "remind")


async def test_the_methods_refuse_what_the_run_does_not_hold_naming_what_it_does():
    _, _, restored = await parked()
    run = contents_of(restored, "intake", 1)
    with pytest.raises(
        ValueError, match=r"no executor 'nope' \(it knows: 'approve', 'remind', 'write'\)"
    ):
        run.drop_executor("nope")
    with pytest.raises(ValueError, match="already refers to 'write'"):
        run.rename_executor("approve", "write")
    with pytest.raises(ValueError, match=r"1 message\(s\) are on their way to 'remind'.*got 2"):
        run.with_pending("remind", [Nudge("a", 1), Nudge("b", 1)])
    with pytest.raises(ValueError, match="no messages are on their way to 'write'"):
        run.with_pending("write", [])
    with pytest.raises(TypeError, match="sequence of payloads"):
        run.with_pending("remind", "x")

    graph = contents_of(restored, "intake", 1, executors=["write", "approve", "remind", "audit"])
    assert graph.rename_executor("audit", "log").renamed == {"audit": "log"}  # in the graph: fine
    assert run.with_state({"a": 1}, b=2).without_state("a", "never").state == {"b": 2}
    with pytest.raises(TypeError, match="state keys are str"):
        run.with_state({1: "x"})
    assert run.with_snapshot("write", {"n": 1}).snapshots == {"write": {"n": 1}}


@functools.cache
def parked_once():
    """One parked run, decoded, shared by the property's examples (nothing mutates it)."""
    _, _, restored = asyncio.run(parked())
    return restored


@settings(max_examples=40, deadline=None)
@given(
    name=st.text(alphabet="abcz@/-_.", min_size=1, max_size=8),
    which=st.sampled_from(["approve", "remind", "write"]),
)
def test_renaming_there_and_back_encodes_the_same_checkpoint(name, which):
    restored = parked_once()
    run = contents_of(restored, "intake", 1)
    if name in run.executors:
        return
    there = run.rename_executor(which, name)
    assert name in there.executors
    assert which not in there.executors
    back = there.rename_executor(name, which)
    assert back.renamed == {}
    workflow = version_1(MemoryStore(), FakeClock(start=0.0))
    migrate = migration("intake", 1, 2)

    def encoded(contents):
        moved = apply_migrations(restored, [migrate(lambda _: contents)], workflow)
        barrier = moved.barrier
        return workflow.codec.encode(barrier, workflow.fingerprint, moved.snapshots, PieceCache())

    assert encoded(back) == encoded(run)
    assert which in names_in(run)
    assert which not in names_in(there)  # not even as the sender of a message
    assert name in names_in(there)


def names_in(contents: CheckpointContents) -> set[str]:
    """Every executor id the engine's half of the contents names, senders included."""
    parts = contents._parts  # what the engine will read
    envelopes = [e for inbox in parts.pending.values() for e in inbox]
    envelopes += [s.envelope for s in parts.suspended]
    envelopes += [m.envelope for m in parts.scheduled]
    names = {e.source for e in envelopes}
    names.update(s.executor_id for s in parts.suspended)
    names.update(m.target for m in parts.scheduled)
    names.update(parts.pending, parts.iterations, parts.snapshots)
    return names
