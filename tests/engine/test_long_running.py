"""Durable waits across processes and restarts, on real SQLite files.

Each process is forked with treadle imported (``tests/forked.py``): a real
process of its own, killed with SIGKILL where a test kills it.
"""

import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

import forked
from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RunTimeoutError
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

HERE = Path(__file__).parent


class App:
    """Drives long_running_app.py in processes sharing files and a clock."""

    def __init__(self, tmp_path: Path) -> None:
        self.store = tmp_path / "runs.sqlite"
        self.side = tmp_path / "side.sqlite"
        self.clock = tmp_path / "clock"
        self.set_time(1_000_000.0)

    def set_time(self, now: float) -> None:
        self.clock.write_text(repr(now))

    def start(self, *args: str) -> forked.Forked:
        """``long_running_app.py`` with ``args`` in a process of its own."""
        script = str(HERE / "long_running_app.py")
        paths = (str(self.store), str(self.side), str(self.clock))
        env = {**os.environ, "PYTHONPATH": str(HERE)}
        return forked.start("long_running_app:cli", env=env, cwd=HERE, argv=[script, *paths, *args])

    def run(self, *args: str) -> tuple[int, list[str]]:
        with self.start(*args) as step:
            code, out, err = step.finish(60)
        assert code in (0, 2), err
        return code, out.strip().splitlines()

    def run_then_kill(self, *args: str) -> list[dict]:
        """Run until the app says it is idle, then SIGKILL it; return its reports."""
        with self.start(*args) as child:
            reports = []
            for line in child.stdout:
                if line.strip() == "idle":
                    break
                reports.append(json.loads(line))
            os.kill(child.pid, signal.SIGKILL)
            child.communicate()
        return reports

    def side_events(self, kind: str) -> int:
        with sqlite3.connect(self.side) as db:
            db.execute("CREATE TABLE IF NOT EXISTS events (kind TEXT, detail TEXT)")
            return db.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0]


@pytest.mark.integration
def test_a_question_asked_in_one_process_is_answered_in_another(tmp_path):
    app = App(tmp_path)
    code, lines = app.run("hitl-start", "r1")
    asked = json.loads(lines[0])
    assert asked["status"] == "awaiting_input"
    (request_id,) = asked["requests"]
    # The first process has exited. A new one answers with the wrong type...
    code, lines = app.run("hitl-answer", "r1", request_id, json.dumps("yes"))
    assert code == 2
    assert lines[0].startswith(f"refused: InvalidResponseError: request {request_id!r}")
    # ... an unknown id ...
    code, lines = app.run(
        "hitl-answer", "r1", "req-000000000000", json.dumps({"approve": True, "note": ""})
    )
    assert (code, lines[0].split(":")[1].strip()) == (2, "UnknownRequestError")
    # ... then properly, which completes the run.
    answer = json.dumps({"approve": True, "note": "fine by legal"})
    code, lines = app.run("hitl-answer", "r1", request_id, answer)
    assert json.loads(lines[0]) == {
        "status": "completed",
        "outputs": ["contract.pdf: approved (fine by legal)"],
        "requests": [],
    }
    # Answering twice is refused.
    code, lines = app.run("hitl-answer", "r1", request_id, answer)
    assert code == 2
    assert "was already answered" in lines[0]


@pytest.mark.integration
def test_a_job_submitted_in_a_step_is_submitted_once_across_kills_between_polls(tmp_path):
    app = App(tmp_path)
    now = 1_000_000.0
    (first,) = app.run_then_kill("poll-start", "p1")
    assert first["status"] == "waiting"
    wakes = 0
    while True:
        now += 3600  # well past any backoff
        app.set_time(now)
        reports = app.run_then_kill("poll-wake")  # a fresh process each time, killed after
        wakes += 1
        assert len(reports) == 1
        if reports[0]["status"] == "completed":
            break
        assert reports[0]["status"] == "waiting"
    assert reports[0]["outputs"] == ["job-video done after 5 polls"]
    assert app.side_events("submit") == 1
    assert app.side_events("poll") == 5
    assert wakes == 4


@executor
async def nap(seconds: float, ctx: WorkflowContext) -> None:
    due = await ctx.step("due", lambda: ctx_clock().now() + seconds)
    await ctx.sleep(seconds)
    WOKEN.append((ctx.run_id, ctx_clock().now(), due))


WOKEN: list[tuple[str, float, float]] = []
CLOCK = FakeClock(start=0.0)


def ctx_clock() -> FakeClock:
    return CLOCK


async def test_a_thousand_timers_wake_exactly_once_never_early_across_three_restarts(tmp_path):
    WOKEN.clear()
    path = tmp_path / "runs.sqlite"
    rng = random.Random(7)

    def make() -> tuple[SqliteStore, Runtime]:
        store = SqliteStore(path)
        workflow = WorkflowBuilder(start=nap, name="naps", store=store, clock=CLOCK).build()
        return store, Runtime(store, [workflow], clock=CLOCK)

    store, runtime = make()
    delays = {f"n{i}": rng.uniform(1, 4000) for i in range(1000)}
    for run_id, delay in delays.items():
        result = await runtime.start("naps", delay, run_id=run_id, record_events=False)
        assert result.status is RunStatus.WAITING
    # Three restarts: each time the old runtime and its store go away and a
    # new one on the same file takes over the timers the old one set.
    for until in (1000.0, 2500.0, 3999.0, 4001.0):
        await CLOCK.advance_to(until)
        await runtime.wake_due()
        await store.close()
        store, runtime = make()
    await store.close()
    woken = {run_id: (at, due) for run_id, at, due in WOKEN}
    assert len(WOKEN) == 1000, "a timer woke twice, or not at all"
    assert set(woken) == set(delays)
    for run_id, (at, due) in woken.items():
        assert at >= due, f"{run_id} woke early"


async def test_a_run_deadline_fails_a_run_waiting_on_a_later_timer_across_a_restart(tmp_path):
    path = tmp_path / "runs.sqlite"
    clock = FakeClock(start=0.0)

    @executor
    async def slow_nap(seconds: float, ctx: WorkflowContext) -> None:
        await ctx.sleep(seconds)
        ctx.yield_output("woke")

    def make():
        store = SqliteStore(path)
        workflow = WorkflowBuilder(start=slow_nap, name="sla", store=store, clock=clock).build()
        return store, Runtime(store, [workflow], clock=clock)

    store, runtime = make()
    resting = await runtime.start("sla", 7200, run_id="r1", timeout=3600)
    assert resting.status is RunStatus.WAITING
    await store.close()
    store, runtime = make()  # the process that set the deadline is gone
    await clock.advance_to(3599)
    assert await runtime.wake_due() == []
    await clock.advance_to(3600)
    (failed,) = await runtime.wake_due()
    assert failed.status is RunStatus.FAILED
    assert isinstance(failed.error, RunTimeoutError)
    row = await store.get_run("r1")
    assert row.status == "failed"
    assert "deadline" in (row.error or "")
    await store.close()


def test_runtime_refuses_two_workflows_with_one_name_and_version():
    one = WorkflowBuilder(start=nap, name="same").build()
    other = WorkflowBuilder(start=nap, name="same").build()
    with pytest.raises(ValueError, match=r"two workflows are version 1 of 'same'.*version=2"):
        Runtime(MemoryStore(), [one, other])
    newer = WorkflowBuilder(start=nap, name="same", version=2).build()
    runtime = Runtime(MemoryStore(), [one, newer, one])
    assert runtime.workflow("same") is newer  # the newest, unless a version is named
    assert runtime.workflow("same", 1) is one


@pytest.mark.integration
def test_spawned_work_lost_to_a_crash_is_reported_to_its_executor(tmp_path):
    sys.path.insert(0, str(HERE))
    import spawn_app  # noqa: PLC0415 - the script doubles as the workflow definition

    path = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    argv = [str(HERE / "spawn_app.py"), str(path)]
    with forked.start("spawn_app:cli", env=env, cwd=HERE, argv=argv) as child:
        assert child.stdout.readline().strip() == "working"
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
    store = SqliteStore(path)
    result = spawn_app.build(store).resume_sync("s1")
    assert (result.status, result.outputs) == (RunStatus.COMPLETED, [("forever", True)])
    asyncio.run(store.close())
