"""A session's rollback branch moved to a new version: its keys keep their branch.

A rollback branch marks the ids of the waits it makes (``~N``, see
``docs/semantics.md``); a migration that renames the executor holding one
recomputes the wait's key for the new id, and must keep the mark, or the
handler re-executed under its new id no longer finds its own wait in its
journal.
"""

from __future__ import annotations

from dataclasses import dataclass

from treadle import InputPolicy, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import MemoryStore
from treadle.versions import CheckpointContents, migrate, migration


@dataclass(frozen=True)
class Listen:
    """What a turn hands back to the session: wait for the next message."""


def chat(version: int, executor_id: str):
    @executor(id=executor_id)
    async def ask(message: str | Listen, ctx: WorkflowContext) -> None:
        if isinstance(message, Listen):
            ctx.send_message(await ctx.wait_for_input(), target=executor_id)
            return
        ok = await ctx.request({"text": message}, bool)
        ctx.yield_output(f"v{version} {message} {'approved' if ok else 'refused'}")
        ctx.send_message(Listen(), target=executor_id)

    builder = WorkflowBuilder(ask, name="chat", version=version, input_policy=InputPolicy.ROLLBACK)
    return builder.add_edge(ask, ask).build()


@migration("chat", from_version=1, to_version=2)
def asking_becomes_ask(run: CheckpointContents) -> CheckpointContents:
    return run.rename_executor("asking", "ask")


async def test_a_rollback_branch_resting_on_a_request_moves_and_takes_its_answer():
    store = MemoryStore()
    v1, v2 = chat(1, "asking"), chat(2, "ask")
    started = await v1.run("m0", run_id="s1", store=store)
    await v1.respond("s1", {started.pending_requests[0].request_id: True}, store=store)
    await v1.send_message("s1", "m1", store=store)
    branched = await v1.send_message("s1", "m2", store=store)  # rolls m1's turn back
    (request,) = branched.pending_requests
    assert "~" in request.request_id  # asked on the branch
    report = await migrate(
        store, v2, [asking_becomes_ask], from_version=1, previous=v1, dry_run=False
    )
    assert [m.outcome for m in report.runs] == ["moved"]
    answered = await v2.respond("s1", {request.request_id: True}, store=store)
    assert answered.status is RunStatus.AWAITING_INPUT
    assert answered.outputs == ["v1 m0 approved", "v2 m2 approved"]
