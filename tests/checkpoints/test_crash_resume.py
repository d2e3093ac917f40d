"""Crash and resume: SIGKILL a real process mid-run, resume in another.

Each of 30 trials starts the 20-superstep workflow of ``crash_workflow.py``
in a process of its own (forked with treadle imported: ``tests/forked.py``)
on a real SQLite file, kills it with SIGKILL at a random moment, then
resumes the run in the test's own process (another process than the one
killed, with nothing of it in memory). Every run must end exactly as an
uninterrupted one, and no superstep committed before the kill may have run
again (invocations are counted in a side table the workflow writes). The
run's event log, written with its checkpoints, holds each superstep once:
what the kill interrupted left no events behind.
"""

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import forked
from treadle._checkpoints._checkpointer import BATCHED_IN_FLIGHT
from treadle.stores import SqliteStore

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import crash_workflow  # noqa: E402 - the script doubles as the reference workflow

TRIALS = 30
LOSS_WINDOW = {"sync": 0, "background": 1, "batched": BATCHED_IN_FLIGHT}  # supersteps


def spawn(mode: str, store: Path, side: Path, run_id: str, durability: str) -> forked.Forked:
    """The script in a process of its own, forked with treadle imported (a trial a fork)."""
    return forked.start(
        "crash_workflow:script",
        [mode, str(store), str(side), run_id, durability],
        env={**os.environ, "PYTHONPATH": str(HERE)},
        cwd=HERE,
    )


async def resume_here(store_path: Path, side: Path, run_id: str, durability: str) -> str:
    """The run resumed (or, with nothing durable, started over) in this process; its outcome."""
    crash_workflow.SIDE_PATH = str(side)
    store = SqliteStore(store_path)
    workflow = crash_workflow.build(store, durability)
    try:
        if await committed_superstep(store_path, run_id) is None:
            first = crash_workflow.Tick(1, ())
            result = await workflow.run(first, run_id=run_id, record_events=False)
        else:
            result = await workflow.resume(run_id, record_events=False)
        return crash_workflow.outcome(result)
    finally:
        await store.close()


def reference_outcome() -> str:
    result = asyncio.run(crash_workflow.build().run(crash_workflow.Tick(1, ())))
    return crash_workflow.outcome(result)


def invocation_counts(side: Path, run_id: str) -> dict[int, int]:
    with sqlite3.connect(side) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS invocations (run TEXT, superstep INT, executor TEXT)"
        )
        rows = db.execute(
            "SELECT superstep, COUNT(*) FROM invocations WHERE run = ? GROUP BY superstep",
            (run_id,),
        ).fetchall()
    return dict(rows)


async def committed_superstep(store_path: Path, run_id: str) -> int | None:
    store = SqliteStore(store_path)
    try:
        return (await store.get_run(run_id)).superstep
    except LookupError:
        return None  # killed before the run was even created
    finally:
        await store.close()


async def event_log(store_path: Path, run_id: str) -> list:
    store = SqliteStore(store_path)
    try:
        return await store.read_events(run_id)
    finally:
        await store.close()


def assert_logged_once(events: list, trial: int) -> None:
    """The run's event log holds each superstep once, whatever the kill interrupted."""
    assert [event.seq for event in events] == list(range(1, len(events) + 1)), trial
    started = [event.superstep for event in events if event.kind == "superstep_started"]
    assert started == list(range(1, crash_workflow.SUPERSTEPS + 1)), (trial, started)
    saved = [event.superstep for event in events if event.kind == "checkpoint_saved"]
    assert saved == sorted(set(saved)), (trial, saved)
    statuses = [event.data["status"] for event in events if event.kind == "status_changed"]
    assert statuses[-1] == "completed", (trial, statuses)


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("durability", "trials"),
    [
        ("sync", TRIALS),
        ("background", 20),
        ("batched", 20),
        # The long campaign (`make soak`): many more kills in every mode.
        pytest.param("sync", 300, marks=pytest.mark.soak, id="sync-soak"),
        pytest.param("background", 200, marks=pytest.mark.soak, id="background-soak"),
        pytest.param("batched", 200, marks=pytest.mark.soak, id="batched-soak"),
    ],
)
def test_sigkill_at_a_random_superstep_then_resume_completes_exactly(tmp_path, durability, trials):
    """In every mode no superstep whose checkpoint was durable at the kill runs again.

    In the background and batched modes fewer supersteps are durable at any
    moment: commits still in flight are lost and their supersteps re-run,
    but never more than the mode's loss window plus the superstep under way.
    """
    rerun_limit = LOSS_WINDOW[durability] + 1
    expected = reference_outcome()
    rng = random.Random(20261121)
    store_path, side = tmp_path / "runs.sqlite", tmp_path / "side.sqlite"
    killed_mid_run = 0
    for trial in range(trials):
        run_id = f"trial-{trial}"
        with spawn("run", store_path, side, run_id, durability) as child:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "started"
            # A 20-superstep run takes about 20 x 6 ms here; kill somewhere inside.
            try:
                child.wait(timeout=rng.uniform(0.0, 0.12))
            except subprocess.TimeoutExpired:
                os.kill(child.pid, signal.SIGKILL)
            child.communicate()
        if child.returncode == -signal.SIGKILL:
            killed_mid_run += 1
        committed = asyncio.run(committed_superstep(store_path, run_id))
        before = invocation_counts(side, run_id)

        # Nothing durable yet (killed before the run was created): start over.
        resumed = asyncio.run(resume_here(store_path, side, run_id, durability))
        assert resumed == expected, f"trial {trial}"

        rerun = [superstep for superstep in before if superstep > (committed or 0)]
        assert len(rerun) <= rerun_limit, (trial, committed, sorted(before))
        after = invocation_counts(side, run_id)
        assert set(after) == set(range(1, crash_workflow.SUPERSTEPS + 1))
        for superstep in range(1, (committed or 0) + 1):
            assert before.get(superstep) == 1, (trial, superstep, before)
            assert after[superstep] == 1, f"trial {trial}: committed superstep {superstep} re-ran"
        assert_logged_once(asyncio.run(event_log(store_path, run_id)), trial)
    assert killed_mid_run >= trials // 2, "most trials should kill a run in flight"
