"""``GET /api/runs`` lists what each run's calls wait for, read for the whole page at once."""

from __future__ import annotations

import asyncio

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor


async def test_the_run_list_carries_each_runs_waiting_for_from_one_store_read(api):
    release, holding = asyncio.Event(), asyncio.Event()

    @executor(id="call", limits=["openai"])
    async def call(tenant: str, ctx: WorkflowContext) -> None:
        holding.set()
        await release.wait()
        ctx.yield_output(tenant)

    workflow = WorkflowBuilder(call, name="asks", limits=[CallLimit("openai", concurrency=1)])
    asks, store = workflow.build(), api.store
    runs = [asyncio.ensure_future(asks.run("a", store=store, run_id="first"))]
    await asyncio.wait_for(holding.wait(), 60)
    for run_id in ("second", "third"):  # one after another: the line keeps their order
        runs.append(asyncio.ensure_future(asks.run(run_id, store=store, run_id=run_id)))
        deadline = asyncio.get_running_loop().time() + 60
        while not await store.line_waits([run_id]):
            assert asyncio.get_running_loop().time() < deadline, f"{run_id} never waited"
            await asyncio.sleep(0.01)

    reads: list[list[str]] = []
    line_waits = store.line_waits

    async def counted(run_ids):
        reads.append(sorted(run_ids))
        return await line_waits(run_ids)

    store.line_waits = counted
    try:
        page = await api.get("/api/runs")
    finally:
        del store.line_waits
    assert page.status_code == 200, page.text
    assert reads == [["first", "second", "third"]]  # one read for the page
    rows = {r["run_id"]: r for r in page.json()["runs"]}
    assert rows["first"]["waiting_for"] == []
    assert [w["position"] for w in rows["second"]["waiting_for"]] == [0]
    [wait] = rows["third"]["waiting_for"]
    assert (wait["limit"], wait["key"], wait["position"]) == ("openai", "", 1)
    assert wait["waiting_since"].endswith("+00:00")
    detail = (await api.get("/api/runs/third")).json()
    assert detail["waiting_for"] == rows["third"]["waiting_for"]  # the list says what show says

    release.set()
    await asyncio.gather(*runs)
    ended = (await api.get("/api/runs")).json()["runs"]
    assert [r["waiting_for"] for r in ended] == [[], [], []]
