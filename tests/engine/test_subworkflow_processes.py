"""Sub-workflows across processes: answered through the parent, killed inside, raced.

Each step is a real process (``subworkflow_app.py``, forked with treadle
imported: ``tests/forked.py``) on a real store file or
PostgreSQL schema: the process that asks exits, another answers through the
parent run's id, a SIGKILL inside the sub-workflow is resumed by a third,
and two answerers racing for one request are told the truth.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import forked
from engine import subworkflow_app
from postgres import drop_schemas, fresh_schema, postgres_dsn

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent
APP = str(HERE / "subworkflow_app.py")


def app(*args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    """``subworkflow_app.py args`` in a process of its own, to its end."""
    with spawn(*args, crash_at=crash_at) as step:
        return subprocess.CompletedProcess(args, *step.finish(60))


def spawn(*args: str, crash_at: str | None = None) -> forked.Forked:
    """``subworkflow_app.py args`` in a process forked with treadle imported."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    if crash_at is not None:
        env["CRASH_AT"] = crash_at
    return forked.start("subworkflow_app:cli", env=env, cwd=HERE, argv=[APP, *args])


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def executions(log: Path) -> Counter[str]:
    return Counter(line.split("@")[0] for line in log.read_text().split())


def reference() -> dict[str, object]:
    """The uninterrupted run in this process, approved: what every other path must give."""

    async def go() -> dict[str, object]:
        workflow = subworkflow_app.build()
        from treadle.stores import MemoryStore  # noqa: PLC0415

        store = MemoryStore()
        first = await workflow.run("contract", store=store)
        [request] = first.pending_requests
        done = await workflow.respond(first.run_id, {request.request_id: True}, store=store)
        return json.loads(subworkflow_app.outcome(done))

    return asyncio.run(go())


def ask(where: str, log: Path, run_id: str, **crash: str) -> str:
    """Start the run in its own process, which exits once the sub-workflow asks; the request id."""
    started = json.loads(last_line(app("start", where, str(log), run_id, **crash)))
    assert started == {"status": "awaiting_input", "outputs": []}
    pending = json.loads(last_line(app("pending", where, str(log), run_id)))
    [[request_id, path, payload]] = pending
    assert path == "review/approve"  # the request names where it comes from
    assert payload["title"] == "contract"
    return request_id


def test_an_approval_inside_a_sub_workflow_is_answered_from_another_process(tmp_path):
    where, log = str(tmp_path / "runs.sqlite"), tmp_path / "log.txt"
    request_id = ask(where, log, "doc-1")
    answered = json.loads(last_line(app("respond", where, str(log), "doc-1", request_id, "yes")))
    assert answered == reference()
    trail = answered["outputs"][0]["trail"]
    assert trail == ["checked", "drafted", "approved", "body of contract (drafted)"]
    # Each executor ran once, but the asker: again when re-delivered with its answer.
    assert executions(log) == {"intake": 1, "check": 1, "draft": 1, "approve": 2, "publish": 1}


@pytest.mark.parametrize("crash_at", ["draft", "approve", "publish"])
def test_a_sigkill_inside_the_sub_workflow_resumes_to_the_uninterrupted_result(tmp_path, crash_at):
    where, log = str(tmp_path / "runs.sqlite"), tmp_path / "log.txt"
    run_id = f"doc-{crash_at}"
    if crash_at == "publish":  # killed after the answer, on the way out of the sub-workflow
        request_id = ask(where, log, run_id)
        killed = app("respond", where, str(log), run_id, request_id, "yes", crash_at=crash_at)
    else:
        killed = app("start", where, str(log), run_id, crash_at=crash_at)
    assert killed.returncode == -9, killed.stderr  # SIGKILL, mid-superstep
    resumed = json.loads(last_line(app("resume", where, str(log), run_id)))
    if resumed["status"] == "awaiting_input":
        pending = json.loads(last_line(app("pending", where, str(log), run_id)))
        [[request_id, _, _]] = pending
        resumed = json.loads(last_line(app("respond", where, str(log), run_id, request_id, "yes")))
    assert resumed == reference()
    ran = executions(log)
    # What committed before the kill never ran again: only the killed invocation did.
    expected = {"intake": 1, "check": 1, "draft": 1, "approve": 2, "publish": 1}
    expected[crash_at] += 1
    assert ran == expected
    # No superstep of the sub-workflow committed twice: its trail holds each step once.
    assert resumed["outputs"][0]["trail"][:3] == ["checked", "drafted", "approved"]


async def race_answers(where: str, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    request_id = await asyncio.to_thread(ask, where, log, "raced")
    answerers = [
        spawn("respond", where, str(log), "raced", request_id, verdict)
        for verdict in ("yes", "no", "yes", "no")
    ]
    ended = await asyncio.to_thread(forked.communicate_all, answerers, 60)
    for code, _, err in ended:
        assert code == 0, err
    said = [out.strip().splitlines()[-1] for _, out, _ in ended]
    won = [json.loads(line) for line in said if not line.startswith("refused")]
    refused = [line for line in said if line.startswith("refused")]
    # Exactly one answer is applied; every other answerer is told its answer lost.
    assert len(won) == 1, said
    assert refused == ["refused RequestAlreadyAnsweredError"] * 3, said
    final = json.loads(last_line(await asyncio.to_thread(app, "resume", where, str(log), "raced")))
    assert final == won[0]
    assert final["status"] == "completed"
    assert executions(log)["publish"] == 1


async def test_answerers_racing_for_a_sub_workflow_request_on_sqlite(tmp_path):
    await race_answers(str(tmp_path / "runs.sqlite"), tmp_path)


async def test_answerers_racing_for_a_sub_workflow_request_on_postgres(tmp_path):
    dsn, schema = postgres_dsn(), fresh_schema()
    try:
        await race_answers(f"{dsn}#{schema}", tmp_path)
    finally:
        await drop_schemas([schema])
