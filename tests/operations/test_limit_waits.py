"""What a run's calls wait for, as ``treadle show`` and the API read it from the store."""

from __future__ import annotations

import asyncio

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor
from treadle._operations._limit_waits import wait_line
from treadle._operations._run_view import show_run
from treadle.stores import SqliteStore


async def test_a_waiting_call_shows_its_limit_its_place_and_when_a_slot_is_next_expected(tmp_path):
    release = asyncio.Event()

    @executor(id="call", limits=["api"])
    async def call(tenant: str, ctx: WorkflowContext) -> None:
        await release.wait()
        ctx.yield_output(tenant)

    limit = CallLimit("api", concurrency=1, key=lambda c: c.message)
    workflow = WorkflowBuilder(call, name="asks", limits=[limit]).build()
    store = SqliteStore(tmp_path / "runs.db")
    try:
        first = asyncio.ensure_future(workflow.run("a", store=store, run_id="first"))
        second = asyncio.ensure_future(workflow.run("b", store=store, run_id="second"))
        third = asyncio.ensure_future(workflow.run("c", store=store, run_id="third"))
        deadline = asyncio.get_running_loop().time() + 60
        while len(await store.line_waits(["second", "third"])) < 2:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        view = await show_run(store, "third", None)
        [wait] = view.waiting_for
        assert (wait["limit"], wait["key"], wait["position"]) == ("api", "c", 1)
        assert wait["call"].startswith("third/")
        assert wait_line(wait) == (
            "waiting for limit 'api' (key 'c'): 1 call ahead; next slot when a call releases one"
        )
        assert (await show_run(store, "first", None)).waiting_for == []  # it holds the slot
        release.set()
        results = await asyncio.gather(first, second, third)
        assert [r.outputs for r in results] == [["a"], ["b"], ["c"]]
        assert (await show_run(store, "third", None)).waiting_for == []
    finally:
        await store.close()
