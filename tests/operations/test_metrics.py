"""Metrics of runs on a real SQLite store, scraped through the real Prometheus exporter.

What a process counts (supersteps, invocations, commits, run ends) equals
what its runs did; the store's gauges, read at the scrape, equal what the
store says (``treadle runs``, ``treadle requests``, ``due_runs``); every
name of the catalogue comes out of the exporter as ``docs/observing.md``
says; and ``import treadle`` loads no OpenTelemetry.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter

import metrics_app
import pytest
from prometheus_client.parser import text_string_to_metric_families

from treadle import RunOptions
from treadle._engine._metrics import CATALOGUE, StoreGauges
from treadle._operations._prometheus import PrometheusMetrics
from treadle._operations._requests import pending_requests
from treadle._workflow._versions import Hosted
from treadle.errors import WorkflowRunError
from treadle.stores import SqliteStore

WORKFLOWS = [
    metrics_app.looping,
    metrics_app.approval,
    metrics_app.failing,
    metrics_app.sleeping,
]
HOSTED = Hosted(WORKFLOWS)


def samples(text: bytes) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape, by name and labels."""
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            found[sample.name, frozenset(sample.labels.items())] = sample.value
    return found


def total(found: dict, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and wanted <= ls)


@pytest.fixture
async def store(tmp_path):
    opened = SqliteStore(tmp_path / "runs.sqlite")
    yield opened
    await opened.close()


async def test_counted_and_read_metrics_agree_with_the_runs_and_the_store(store):
    exposed = PrometheusMetrics(store, HOSTED)
    options = RunOptions(metrics=exposed.metrics)
    supersteps = 0
    for to in (1, 3, 5):
        result = await metrics_app.looping.run(metrics_app.Loop(to), store=store, options=options)
        supersteps += result.superstep
    asked = {}
    for topic in ("a", "b", "c"):
        result = await metrics_app.approval.run(topic, store=store, options=options)
        asked[result.run_id] = result.pending_requests[0].request_id
    first = next(iter(asked))
    await metrics_app.approval.respond(first, {asked[first]: True}, store=store, options=options)
    with pytest.raises(WorkflowRunError):
        await metrics_app.failing.run("no", store=store, options=options)
    await metrics_app.sleeping.run(0.001, store=store, options=options)
    await asyncio.sleep(0.01)  # the nap falls due; nothing wakes it

    found = samples(await exposed.scrape())

    assert total(found, "treadle_supersteps_total", workflow="looping") == supersteps
    assert total(found, "treadle_invocations_total", workflow="looping") == supersteps
    assert total(found, "treadle_invocations_total", workflow="failing", outcome="failed") == 1
    assert total(found, "treadle_invocations_total", workflow="approval", outcome="suspended") == 3
    assert total(found, "treadle_runs_ended_total", workflow="looping", status="completed") == 3
    assert total(found, "treadle_runs_ended_total", workflow="approval", status="completed") == 1
    assert total(found, "treadle_runs_ended_total", status="failed") == 1
    commits = total(found, "treadle_commit_duration_seconds_count")
    assert commits > 0
    assert total(found, "treadle_checkpoint_size_bytes_count") >= commits
    assert total(found, "treadle_checkpoint_size_bytes_sum") > 0

    stored = Counter((r.workflow, r.status) for r in await store.list_runs())
    for (workflow, status), count in stored.items():
        assert total(found, "treadle_runs", workflow=workflow, status=status) == count
    assert total(found, "treadle_runs") == sum(stored.values())
    open_now = await pending_requests(store, workflows=HOSTED)
    assert len(open_now) == 2
    assert total(found, "treadle_requests_open", workflow="approval") == 2
    assert total(found, "treadle_requests_oldest_age_seconds") > 0
    assert total(found, "treadle_timers_due") == len(await store.due_runs(time.time())) == 1

    # Answered meanwhile: the next scrape reads the store again, the gauge follows.
    for request in open_now:
        await metrics_app.approval.respond(
            request["run_id"], {request["request_id"]: False}, store=store, options=options
        )
    found = samples(await exposed.scrape())
    assert total(found, "treadle_requests_open") == 0
    assert total(found, "treadle_requests_oldest_age_seconds") == 0
    assert total(found, "treadle_runs", workflow="approval", status="awaiting_input") == 0
    assert total(found, "treadle_runs", workflow="approval", status="completed") == 3
    exposed.close()


async def test_every_catalogued_name_comes_out_of_the_exporter_as_documented(store):
    exposed = PrometheusMetrics(store)
    metrics = exposed.metrics
    metrics.superstep("w", 0.1)
    metrics.invocation("w", "e", "completed", 0.1)
    metrics.commit("w", (100, 200), 0.01)
    metrics.run_ended("w", "completed")
    metrics.leases(2, 1)
    metrics.webhook_delivery("delivered")
    metrics.agent_tokens("test-model", 10, 20)
    metrics.limit_wait("api", 0.2)
    metrics.set_store_gauges(StoreGauges({("w", "completed"): 1}, {"w": 1}, 5.0, 0))
    kinds = {"counter": "counter", "histogram": "histogram", "gauge": "gauge"}
    families = {
        f.name: f for f in text_string_to_metric_families((await exposed.scrape()).decode())
    }
    for spec in CATALOGUE:
        # The parser names a counter's family without its _total.
        family = families.get(spec.prometheus.removesuffix("_total"))
        assert family is not None, spec.prometheus
        assert family.type == kinds[spec.kind], spec.prometheus
        labels = {k for s in family.samples for k in s.labels if k != "le"}
        assert labels == set(spec.attributes), spec.prometheus
    exposed.close()


def test_import_treadle_loads_no_opentelemetry_nor_prometheus():
    code = (
        "import sys, treadle\n"
        "print(sorted(m for m in sys.modules"
        " if m.startswith(('opentelemetry', 'prometheus_client'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
