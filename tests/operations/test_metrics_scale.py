"""A scrape of a big store: the gauges are counted by the database, not by listing every run.

Every scrape of ``treadle serve``'s ``/metrics`` and of each worker's
``--metrics-port`` reads the store's gauges. Counting runs by workflow and
status by listing them all made a scrape load every run row into the
process: with 200,000 runs a scrape took 3 to 5 s, held 250 MB, and held
the event loop (the server's requests, a worker's heartbeats) for 1.5 s,
so a million runs outlasted Prometheus' scrape timeout and stopped every
other caller of the process meanwhile. The rows a scrape reads into the
process must not grow with the runs that ended: here, 50,000 runs on SQLite
and PostgreSQL (bulk-loaded rows, no workflow runs), and the memory the
scrape allocates is measured (``tracemalloc``: every thread's), not its time.
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from collections import Counter

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from postgres import drop_schemas, fresh_schema, postgres_dsn
from search_support import BASE, SampleRun, populate_postgres, populate_sqlite
from treadle._operations._prometheus import PrometheusMetrics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

COUNT = 50_000
STATUSES = ("completed", "failed", "cancelled", "waiting", "running")
WORKFLOWS = ("orders", "refunds", "invoices")
MOST_BYTES = 2 * 1024 * 1024
"""What a scrape may allocate at its peak: a few rows and the text it renders, not 50,000 rows."""


def _runs() -> list[SampleRun]:
    return [
        SampleRun(
            run_id=f"run-{number:06d}",
            status=STATUSES[number % len(STATUSES)],
            outcome=None,
            workflow=WORKFLOWS[number % 7 % len(WORKFLOWS)],
            created_at=BASE + number,
            fields={},
        )
        for number in range(COUNT)
    ]


_DUE = "UPDATE treadle_runs SET wake_at = ? WHERE status = 'waiting'"
"""Every waiting run's timer long due: a fifth of the store, none woken."""


@pytest.fixture(params=["sqlite", "postgres"])
async def big(request, tmp_path):
    """A store of ``COUNT`` runs, and the runs."""
    from treadle.stores import PostgresStore, SqliteStore  # noqa: PLC0415

    runs = _runs()
    if request.param == "sqlite":
        path = str(tmp_path / "big.sqlite")
        store = SqliteStore(path)
        await store.list_runs(limit=1)  # opens the file: the schema is made
        populate_sqlite(path, runs)
        with sqlite3.connect(path) as db:
            db.execute(_DUE, (BASE,))
        yield store, runs
        await store.close()
        return
    dsn, schema = postgres_dsn(), fresh_schema()
    store = PostgresStore(dsn, schema=schema)
    await store.list_runs(limit=1)
    await populate_postgres(dsn, schema, runs)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(f'SET search_path TO "{schema}"')
        await db.execute(_DUE.replace("?", "%s"), (BASE,))
    yield store, runs
    await store.close()
    await drop_schemas([schema])


async def test_a_scrape_of_a_big_store_counts_its_runs_without_reading_them_all(big):
    store, runs = big
    exposed = PrometheusMetrics(store)
    await exposed.scrape()  # the first: whatever is made once (the exporter, the store's pool)
    tracemalloc.start()
    try:
        body = await exposed.scrape()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    found = Counter()
    due = None
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "treadle_runs":
                found[sample.labels["workflow"], sample.labels["status"]] += sample.value
            elif sample.name == "treadle_timers_due":
                due = sample.value
    assert found == Counter((run.workflow, run.status) for run in runs)
    assert due == sum(run.status == "waiting" for run in runs)  # counted, not read
    assert peak < MOST_BYTES, f"a scrape of {COUNT} runs allocated {peak / 2**20:.1f} MiB"
    exposed.close()
