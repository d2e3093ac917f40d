"""How long calls wait for call limits, by limit, through the real Prometheus exporter."""

from __future__ import annotations

import asyncio
from time import perf_counter

from prometheus_client.parser import text_string_to_metric_families

from treadle import CallLimit, RunOptions, WorkflowBuilder, WorkflowContext, executor
from treadle._operations._prometheus import PrometheusMetrics
from treadle.stores import SqliteStore


async def test_each_limited_call_records_how_long_it_waited_for_its_slot(tmp_path):
    release, holding = asyncio.Event(), asyncio.Event()

    @executor(id="call", limits=["openai"])
    async def call(n: int, ctx: WorkflowContext) -> None:
        holding.set()
        await release.wait()
        ctx.yield_output(n)

    workflow = WorkflowBuilder(call, name="asks", limits=[CallLimit("openai", concurrency=1)])
    asks = workflow.build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    exposed = PrometheusMetrics(store)
    options = RunOptions(metrics=exposed.metrics)
    try:
        runs = [asyncio.ensure_future(asks.run(0, store=store, run_id="r0", options=options))]
        await asyncio.wait_for(holding.wait(), 60)
        for n in (1, 2):
            runs.append(
                asyncio.ensure_future(asks.run(n, store=store, run_id=f"r{n}", options=options))
            )
        deadline = asyncio.get_running_loop().time() + 60
        while len(await store.line_waits(["r1", "r2"])) < 2:
            assert asyncio.get_running_loop().time() < deadline, "the calls never queued"
            await asyncio.sleep(0.01)
        queued = perf_counter()
        release.set()  # r0 returns; r1 and r2 take the slot in turn
        released = perf_counter()
        await asyncio.gather(*runs)
        text = (await exposed.scrape()).decode()
    finally:
        exposed.close()
        await store.close()
    [family] = [
        f for f in text_string_to_metric_families(text) if f.name == "treadle_limit_wait_seconds"
    ]
    points = {s.name.rsplit("_", 1)[-1]: s.value for s in family.samples if "le" not in s.labels}
    assert {s.labels["limit"] for s in family.samples} == {"openai"}
    assert points["count"] == 3  # one a call, the first one's slot free at once
    # The two that queued waited at least from when they were seen in line to the release.
    assert points["sum"] >= 2 * (released - queued)
