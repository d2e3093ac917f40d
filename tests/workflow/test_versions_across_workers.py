"""Two versions hosted by two `treadle worker` processes at once, on PostgreSQL.

Must-show 1 of issue 19, as a user would do it: a worker hosting version 1
takes 100 runs to their question; then, "deployed", worker A hosts version 1
only and worker B version 2 only, both at once. 100 new runs start on
version 2 (the newest the client was given), all 200 questions are answered
through the client, and every run completes on the version it started with:
its output and its row say so, nothing was parked or failed, and (from each
worker's log of the runs it claimed) runs of version 1 were only ever run by
A and runs of version 2 only by B.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from versions_app import review, review_v1

import treadle.workers
from postgres import drop_schemas, fresh_schema, postgres_dsn
from scaleout.processes import TREADLE, wait_until
from treadle import RunStatus

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from treadle.workers import Client

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
RUNS = 40  # per version: more than a worker's 32 at once, so each worker queues some
CLAIMED = re.compile(r"claimed run (\S+) epoch")


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    """A PostgreSQL schema of the test's own, dropped afterwards (skips without a server)."""
    postgres_dsn()
    name = fresh_schema()
    yield name
    await drop_schemas([name])


class Workers:
    """`treadle worker` processes on one schema, each logging to a file of its own."""

    def __init__(self, schema: str, directory: Path) -> None:
        self.schema = schema
        self.directory = directory
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, worker_id: str, app: str) -> None:
        """``treadle worker --app APP`` named ``worker_id``, as a deploy would start it."""
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
        env = {**inherited, "TREADLE_SCHEMA": self.schema, "PYTHONPATH": str(HERE)}
        command = [TREADLE, "worker", "--app", app, "--store", postgres_dsn()]
        command += ["--worker-id", worker_id, "--poll-interval", "0.05", "--concurrency", "32"]
        with self.log(worker_id).open("wb") as sink:
            self.running[worker_id] = subprocess.Popen(
                command, env=env, stdout=subprocess.DEVNULL, stderr=sink
            )

    def stop(self, worker_id: str) -> None:
        """SIGTERM it and wait: it finishes its supersteps and releases its runs."""
        process = self.running.pop(worker_id)
        process.send_signal(signal.SIGINT if os.name == "nt" else signal.SIGTERM)
        try:
            assert process.wait(timeout=20) == 0, self.log(worker_id).read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    def check_alive(self) -> None:
        for worker_id, process in self.running.items():
            code = process.poll()
            assert code is None, f"{worker_id} exited {code}: {self.log(worker_id).read_text()}"

    def log(self, worker_id: str) -> Path:
        return self.directory / f"{worker_id}.log"

    def claimed(self, worker_id: str) -> set[str]:
        """The runs the worker's log says it claimed."""
        return set(CLAIMED.findall(self.log(worker_id).read_text()))

    def stop_all(self) -> None:
        for worker_id in list(self.running):
            self.stop(worker_id)


@pytest.fixture
def workers(schema: str, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(schema, tmp_path)
    try:
        yield started
    finally:
        for process in started.running.values():  # a failed test: no clean stop owed
            process.kill()
            process.wait()


async def resting(client: Client, run_ids: set[str], workers: Workers) -> None:
    """Wait until every run in ``run_ids`` awaits its answer."""

    async def all_asking() -> bool:
        workers.check_alive()
        asking = await client.list_runs(status=RunStatus.AWAITING_INPUT)
        return run_ids <= {row.run_id for row in asking}

    await wait_until(all_asking, interval=0.05)


async def answer(client: Client, run_id: str, verdict: str) -> str:
    """Answer the run's one pending request through the client; return what was asked."""
    (request,) = (await client.result(run_id)).pending_requests
    await client.respond(run_id, {request.request_id: verdict})
    return str(request.payload["doc"])


async def test_two_versions_on_two_workers_at_once_each_run_finishes_on_its_own_version(
    schema: str, workers: Workers
) -> None:
    dsn = postgres_dsn()
    v1_ids = {f"v1-{n:03d}" for n in range(RUNS)}
    v2_ids = {f"v2-{n:03d}" for n in range(RUNS)}

    # Before the deploy: version 1 only; its runs reach their question and rest there.
    workers.start("old", "versions_app:review_v1")
    async with treadle.workers.connect(dsn, schema=schema, workflows=[review_v1]) as before:
        for run_id in sorted(v1_ids):
            await before.start(review_v1, f"doc {run_id}", run_id=run_id)
        async with asyncio.timeout(30):
            await resting(before, v1_ids, workers)
    workers.stop("old")
    assert workers.claimed("old") == v1_ids

    # The deploy: A keeps hosting version 1, B hosts version 2, both at once.
    workers.start("A", "versions_app:review_v1")
    workers.start("B", "versions_app:review")
    async with treadle.workers.connect(dsn, schema=schema, workflows=[review_v1, review]) as client:
        for run_id in sorted(v2_ids):
            await client.start("review", f"doc {run_id}", run_id=run_id)  # the newest: v2
        assert {(await client.get(r)).version for r in v2_ids} == {2}
        async with asyncio.timeout(30):
            asked_v1 = {r: await answer(client, r, "yes") for r in sorted(v1_ids)}
            await resting(client, v2_ids, workers)
            asked_v2 = {r: await answer(client, r, "yes") for r in sorted(v2_ids)}
            for run_id in sorted(v1_ids | v2_ids):
                await client.wait(run_id, poll_interval=0.05)
        results = {r: await client.result(r) for r in sorted(v1_ids | v2_ids)}
        rows = {r: await client.get(r) for r in sorted(v1_ids | v2_ids)}
    workers.stop_all()

    assert asked_v1 == {r: f"doc {r}" for r in v1_ids}
    assert asked_v2 == {r: f"doc {r} (triaged)" for r in v2_ids}  # v2's triage ran first
    for run_id, result in results.items():
        row = rows[run_id]
        assert (result.status, row.parked, row.error) == (RunStatus.COMPLETED, None, None)
        if run_id in v1_ids:
            assert (row.version, result.outputs) == (1, [f"v1 doc {run_id}: yes"])
        else:
            assert (row.version, result.outputs) == (2, [f"v2 doc {run_id} (triaged): yes"])
    # Who ran what, from each worker's own log of the runs it claimed.
    assert workers.claimed("A") == v1_ids  # each v1 run went on, after its answer, on A
    assert workers.claimed("B") == v2_ids  # each v2 run, from its start, on B
    logs = {w: workers.log(w).read_text() for w in ("old", "A", "B")}
    assert "serving review v1" in logs["A"]
    assert "serving review v2" in logs["B"]
    for text in logs.values():
        assert "parked" not in text
        assert " ERROR " not in text
