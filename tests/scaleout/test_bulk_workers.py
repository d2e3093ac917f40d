"""A bulk cancel of 10,000 runs by filter while ``treadle worker`` processes drive them.

Issue 34, must show 4, on PostgreSQL. 10,000 runs (200 in the default suite,
10,000 under ``make soak``: the full size takes about ten minutes on two
cores) of batch ``b1`` and 200 of
batch ``b2`` are queued through the workers' client (their input fields
written with them); two real workers take them up and keep spinning some.
Then ``treadle bulk cancel --where 'fields.batch == "b1"'``, a separate
process, counts them with ``--dry-run`` and cancels them: its count equals
the number acted on, every ``b1`` run is cancelled once (one
``run_cancelled`` audit entry each, with the CLI's user as the actor), no
``b2`` run is touched, and the workers go on driving the ``b2`` runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections import Counter
from typing import TYPE_CHECKING

import pytest
from bulk_app import Spin, spinner
from processes import HERE, TREADLE, start_worker, wait_until

import treadle.workers
from treadle import Actor
from treadle._values._filter import parse_filter

if TYPE_CHECKING:
    from pathlib import Path

    from treadle.stores import PostgresStore

KEPT = 200
WHERE = 'fields.batch == "b1"'


def _bulk(dsn: str, schema: str, *args: str) -> dict:
    env = {**os.environ, "TREADLE_SCHEMA": schema, "PYTHONPATH": str(HERE)}
    done = subprocess.run(
        [TREADLE, "bulk", "cancel", "--where", WHERE, "--store", dsn, "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.fleet
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    "cancelled", [200, pytest.param(10_000, marks=pytest.mark.soak)], ids=["200", "10000"]
)
async def test_a_bulk_cancel_by_filter_cancels_each_run_once_while_workers_drive_them(
    dsn: str, schema: str, store: PostgresStore, tmp_path: Path, cancelled: int
) -> None:
    client = treadle.workers.Client(store, [spinner])
    started = time.perf_counter()
    ids = [(f"b1-{n:05d}", "b1") for n in range(cancelled)] + [
        (f"b2-{n:05d}", "b2") for n in range(KEPT)
    ]
    for at in range(0, len(ids), 100):
        chunk = ids[at : at + 100]
        await asyncio.gather(*(client.start(spinner, Spin(b), run_id=i) for i, b in chunk))
    queued = time.perf_counter() - started
    workers = [
        start_worker(
            dsn,
            schema,
            tmp_path / f"worker-{n}.log",
            name=f"worker-{n}",
            lease=5.0,
            poll=0.05,
            app="bulk_app",
        )
        for n in range(2)
    ]
    try:

        async def driven() -> bool:
            spinning = await store.search_runs(parse_filter("fields.spins >= 2"), limit=10)
            return len(spinning) >= 10

        await wait_until(driven, interval=0.2)

        counted = _bulk(dsn, schema, "--dry-run")
        assert (counted["dry_run"], counted["matched"], counted["acted"]) == (True, cancelled, 0)
        cancelling = time.perf_counter()
        done = _bulk(dsn, schema, "--yes")
        took = time.perf_counter() - cancelling
        assert done["matched"] == counted["matched"]
        assert done["acted"] == counted["matched"], done["skipped"][:5]
        assert done["skipped"] == []

        me = Actor.cli().label
        cancels = Counter()
        actors = set()
        for entry in await store.read_audit():
            if entry.action == "run_cancelled":
                cancels[entry.run_id] += 1
                actors.add(entry.actor["label"])
        assert actors == {me}
        assert set(cancels) == {run_id for run_id, batch in ids if batch == "b1"}
        assert set(cancels.values()) == {1}  # each run cancelled once
        left = await store.count_runs(parse_filter(f'{WHERE} && status != "cancelled"'))
        assert left == 0
        untouched = await store.count_runs(parse_filter('fields.batch == "b2"'))
        assert untouched == KEPT
        assert await store.count_runs(parse_filter('status == "cancelled"')) == cancelled

        # The workers go on: b2 runs are taken up and spin.
        async def b2_spinning() -> bool:
            found = 'fields.batch == "b2" && fields.spins >= 2'
            return await store.count_runs(parse_filter(found)) >= 2

        await wait_until(b2_spinning, interval=0.2)
        print(f"queued {len(ids)} runs in {queued:.1f} s; cancelled {cancelled} in {took:.1f} s")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            await asyncio.to_thread(worker.wait, 30)
        await client.close()
