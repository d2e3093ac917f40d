"""How long calls wait for call limits, by limit, through the real Prometheus exporter."""

from __future__ import annotations

from time import perf_counter

from prometheus_client.parser import text_string_to_metric_families

from apps.held_line import HeldLine
from treadle import RunOptions
from treadle._operations._prometheus import PrometheusMetrics
from treadle.stores import SqliteStore


async def test_each_limited_call_records_how_long_it_waited_for_its_slot(tmp_path):
    line = HeldLine()
    store = SqliteStore(tmp_path / "runs.sqlite")
    exposed = PrometheusMetrics(store)
    options = RunOptions(metrics=exposed.metrics)
    try:
        await line.queue(store, {"r0": 0, "r1": 1, "r2": 2}, options)
        queued = perf_counter()
        released = perf_counter()
        await line.finish()  # r0 returns; r1 and r2 take the slot in turn
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
