"""Sub-workflows across processes: answered through the parent, killed inside, raced.

Each step is a real process (``subworkflow_app.py``) on a real store file or
PostgreSQL schema: the process that asks exits, another answers through the
parent run's id, a SIGKILL inside the sub-workflow is resumed by a third,
and two answerers racing for one request are told the truth.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine import subworkflow_app
from postgres import drop_schemas, fresh_schema, postgres_dsn

pytestmark = pytest.mark.integration

APP = str(Path(__file__).parent / "subworkflow_app.py")


def app(*args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None
    if crash_at is not None:
        import os  # noqa: PLC0415 - only the crash needs the environment

        env = {**os.environ, "CRASH_AT": crash_at}
    return subprocess.run(
        [sys.executable, APP, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, APP, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


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
    said = [(await asyncio.to_thread(p.communicate))[0].strip().splitlines()[-1] for p in answerers]
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
