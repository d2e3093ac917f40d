"""Hosting several versions of one workflow: a runtime, the CLI, the server, a worker.

Each run goes on with the version that started it, wherever it is taken up:
a ``Runtime`` hosting both versions wakes each timer run on its own, one
hosting only version 2 parks a version 1 run naming the version and
``treadle migrate``, and version 2's code refuses to resume a version 1 run
and changes nothing. ``treadle runs``/``show`` and the HTTP API say which
version each run is on; a run started by a client without workflow code
(version 0) starts on the newest version its worker hosts.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from versions_app import NAP, review, review_v1

import treadle.workers
from cli.treadle_cli import Cli
from postgres import drop_schemas, fresh_schema, postgres_dsn
from server.conftest import ServeProcess
from treadle import RunStatus, Runtime
from treadle._scaleout._apps import load_app
from treadle.errors import GraphChangedError, VersionMismatchError
from treadle.stores import PostgresStore, SqliteStore
from treadle.testing import FakeClock
from treadle.workers import Worker

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import httpx

HERE = Path(__file__).parent
START = 1_800_000_000.0


def everything(db: Path) -> list[list[Any]]:
    """Every row of every table, to show that a refused call wrote nothing."""
    with sqlite3.connect(db) as connection:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        return [connection.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables]  # noqa: S608


async def test_a_runtime_hosting_both_versions_wakes_each_timer_run_on_its_own(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    clock = FakeClock(start=START)
    runtime = Runtime(store, [review, review_v1], clock=clock)
    try:
        for n in range(3):
            await runtime.start(review_v1, f"later a{n}", run_id=f"a{n}")
            await runtime.start("review", f"later b{n}", run_id=f"b{n}")  # the newest: v2
        await runtime.start("review", "later c", run_id="c", version=1)
        assert {r.run_id: r.version for r in await store.list_runs()} == {
            **{f"a{n}": 1 for n in range(3)},
            **{f"b{n}": 2 for n in range(3)},
            "c": 1,
        }
        assert await runtime.wake_due() == []  # nothing is due yet
        await clock.advance_to(START + NAP)
        woken = {result.run_id: result for result in await runtime.wake_due()}
        assert set(woken) == {"a0", "a1", "a2", "b0", "b1", "b2", "c"}
        for run_id, result in woken.items():
            assert result.status is RunStatus.AWAITING_INPUT
            (request,) = result.pending_requests
            if run_id.startswith("b"):  # version 2's graph: triage ran before the question
                assert request.payload == {"doc": f"later {run_id} (triaged)", "version": 2}
            else:
                assert request.payload == {"doc": f"later {run_id}", "version": 1}
            row = await store.get_run(run_id)
            code = runtime.workflow("review", row.version)
            done = await code.respond(run_id, {request.request_id: "ok"}, store=store)
            assert done.status is RunStatus.COMPLETED
            assert done.outputs == [f"v{row.version} {request.payload['doc']}: ok"]
        assert {r.parked for r in await store.list_runs()} == {None}
    finally:
        await store.close()


async def test_a_runtime_hosting_only_v2_parks_a_v1_run_naming_its_version_and_migrate(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "runs.sqlite")
    clock = FakeClock(start=START)
    try:
        await review_v1.run("later old", run_id="old", store=store, clock=clock)
        await review.run("later new", run_id="new", store=store, clock=clock)
        await clock.advance_to(START + NAP)
        (woken,) = await Runtime(store, [review], clock=clock).wake_due()
        assert (woken.run_id, woken.status) == ("new", RunStatus.AWAITING_INPUT)

        parked = await store.get_run("old")
        assert (parked.status, parked.version) == ("waiting", 1)
        assert parked.parked is not None
        assert "version 1 of 'review' is not hosted here" in parked.parked
        assert "treadle migrate --from 1 --to 2" in parked.parked
        # Parked: not claimed again until a resume by its own version's code takes it up.
        both = Runtime(store, [review, review_v1], clock=clock)
        assert await both.wake_due() == []
        with pytest.raises(VersionMismatchError):  # version 2's is refused: it stays parked
            await review.resume("old", store=store, clock=clock)
        assert (await store.get_run("old")).parked == parked.parked
        taken_up = await review_v1.resume("old", store=store, clock=clock)
        assert taken_up.status is RunStatus.AWAITING_INPUT
        assert (await store.get_run("old")).parked is None
    finally:
        await store.close()


async def test_resuming_a_v1_run_with_v2_code_is_refused_naming_both_and_changes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    store = SqliteStore(db)
    try:
        asking = await review_v1.run("draft", run_id="r1", store=store)
        (request,) = asking.pending_requests
        before = everything(db)
        with pytest.raises(VersionMismatchError) as refused:
            await review.resume("r1", store=store)
        assert isinstance(refused.value, GraphChangedError)
        assert (refused.value.run_version, refused.value.version) == (1, 2)
        message = str(refused.value)
        assert "'r1' is on version 1 of 'review', not version 2" in message
        assert "treadle migrate --from 1 --to 2" in message
        assert everything(db) == before
        with pytest.raises(VersionMismatchError):  # nor is an answer delivered through it
            await review.respond("r1", {request.request_id: "no"}, store=store)
        assert everything(db) == before
        # Its own version goes on with it.
        done = await review_v1.respond("r1", {request.request_id: "fine"}, store=store)
        assert done.outputs == ["v1 draft: fine"]
    finally:
        await store.close()


@pytest.mark.integration
async def test_runs_and_show_name_each_runs_version(tmp_path: Path) -> None:
    cli = Cli(tmp_path, PYTHONPATH=str(HERE), COLUMNS="160")
    for spec, run_id in (("versions_app:review_v1", "r1"), ("versions_app:review", "r2")):
        started = cli.json("run", spec, "--input", f'"doc {run_id}"', "--run-id", run_id)
        assert started["status"] == "awaiting_input"

    listed = {row["run_id"]: row["version"] for row in cli.json("runs")["runs"]}
    assert listed == {"r1": 1, "r2": 2}
    table = cli("runs")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines() if line.strip()}
    assert "review v1" in rows["r1"]
    assert "review v2" in rows["r2"]
    assert "(review v1)" in cli("show", "r1").stdout
    assert "(review v2)" in cli("show", "r2").stdout

    # Answered from the shell: each run goes on with its own version's code.
    for run_id, version in (("r1", 1), ("r2", 2)):
        (request,) = cli.json("show", run_id)["pending_requests"]
        answered = cli("respond", run_id, request["request_id"], '"yes"')
        assert answered.returncode == 0, answered.stderr
        shown = cli.json("show", run_id)
        assert (shown["status"], shown["version"]) == ("completed", version)
        assert shown["outputs"][0].startswith(f"v{version} doc {run_id}")


def wait_for(server: httpx.Client, run_id: str, status: str) -> dict[str, Any]:
    """The run's detail once it has ``status`` (polled, bounded)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        detail = server.get(f"/api/runs/{run_id}").json()
        if detail["run"]["status"] == status:
            return detail
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} never reached {status}: {detail}")


@pytest.mark.integration
def test_the_server_lists_both_versions_and_starts_the_one_asked_for(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path, str(tmp_path / "runs.sqlite"), PYTHONPATH=str(HERE), app="versions_app"
    )
    serve.start()
    try:
        serve.ready()
        with serve.client(headers=serve.auth) as server:
            (listed,) = server.get("/api/workflows").json()["workflows"]
            assert (listed["name"], listed["version"], listed["versions"]) == ("review", 2, [1, 2])
            assert server.get("/api/workflows/review").json()["versions"] == [1, 2]

            old = server.post("/api/runs", json={"workflow": "review", "version": 1, "input": "a"})
            new = server.post("/api/runs", json={"workflow": "review", "input": "b"})
            assert (old.status_code, new.status_code) == (201, 201), (old.text, new.text)
            assert (old.json()["run"]["version"], new.json()["run"]["version"]) == (1, 2)

            missing = server.post("/api/runs", json={"workflow": "review", "version": 7})
            assert missing.status_code == 404
            error = missing.json()["error"]
            assert "version 7 of 'review'" in error["message"]
            assert "(it serves: 1, 2)" in error["message"]

            for run, doc in ((old.json()["run"], "a"), (new.json()["run"], "b (triaged)")):
                run_id, version = run["run_id"], run["version"]
                asking = wait_for(server, run_id, "awaiting_input")
                (request,) = asking["pending_requests"]
                assert request["payload"] == {"doc": doc, "version": version}
                path = f"/api/runs/{run_id}/requests/{request['request_id']}"
                answered = server.post(path, json={"answer": "yes"})
                assert answered.status_code == 202, answered.text
                done = wait_for(server, run_id, "completed")
                assert done["outputs"] == [f"v{version} {doc}: yes"]
                assert done["run"]["version"] == version
    finally:
        code, _, log = serve.stop()
    assert code == 0, log


@pytest.fixture
async def pg_store() -> AsyncIterator[PostgresStore]:
    """A ``PostgresStore`` on a schema of the test's own, dropped afterwards."""
    dsn = postgres_dsn()
    schema = fresh_schema()
    store = PostgresStore(dsn, schema=schema)
    yield store
    await store.close()
    await drop_schemas([schema])


@pytest.mark.integration
async def test_a_run_started_without_code_starts_on_the_newest_version_its_worker_hosts(
    pg_store: PostgresStore,
) -> None:
    client = treadle.workers.Client(pg_store)  # no workflow code: the run names no version
    await client.start("review", "plain", run_id="p1")
    assert (await client.get("p1")).version == 0

    # Loaded as `treadle worker --app` loads them: a client finds their code from the run.
    hosting_both = Worker(pg_store, load_app("versions_app"), lease=5, poll_interval=0.05)
    assert await hosting_both.run_until_idle() == 1
    row = await client.get("p1")
    assert (row.status, row.version) == ("awaiting_input", 2)

    await client.start("review", "older", run_id="p2")
    hosting_v1 = Worker(pg_store, load_app("versions_app:review_v1"), lease=5, poll_interval=0.05)
    assert await hosting_v1.run_until_idle() == 1  # p1, on version 2, is not its to take
    assert (await client.get("p2")).version == 1

    # Answered by a client that has no code; each goes on with its own version.
    for run_id in ("p1", "p2"):
        (request,) = (await client.result(run_id)).pending_requests
        await client.respond(run_id, {request.request_id: "yes"})
    assert await hosting_v1.run_until_idle() == 1
    assert await hosting_both.run_until_idle() == 1
    first, second = await client.result("p1"), await client.result("p2")
    assert (first.status, first.outputs) == (RunStatus.COMPLETED, ["v2 plain (triaged): yes"])
    assert (second.status, second.outputs) == (RunStatus.COMPLETED, ["v1 older: yes"])
