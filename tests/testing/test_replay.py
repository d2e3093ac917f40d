"""The replay check: recorded runs replay on unchanged code, and a swapped step is named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from treadle.stores import SqliteStore
from treadle.testing import ReplayReport, replay

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_app import Verdict, upgraded, workflow

if TYPE_CHECKING:
    from treadle import Workflow


async def record(path: Path, runs: int) -> list[str]:
    """``runs`` runs on SQLite: every one asks, most are answered (half yes, half no)."""
    store = SqliteStore(path)
    ids = []
    try:
        for n in range(runs):
            result = await workflow.run(n, store=store, deterministic=True)
            ids.append(result.run_id)
            if n % 10 != 0:  # a tenth stay waiting for their answer
                request = result.pending_requests[0].request_id
                # A third with a long note: replayed with the very answer, not a preview.
                note = "reviewed at length. " * 20 if n % 3 == 0 else ""
                await workflow.respond(
                    result.run_id, {request: Verdict(ok=n % 2 == 0, note=note)}, store=store
                )
    finally:
        await store.close()
    return ids


async def check(path: Path, new: Workflow, run_ids: list[str] | None = None) -> ReplayReport:
    store = SqliteStore(path)
    try:
        return await replay(new, store, run_ids)
    finally:
        await store.close()


async def test_an_unchanged_workflow_replays_a_hundred_recorded_runs(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    ids = await record(path, 100)
    report = await check(path, workflow)
    assert report.ok, [d.describe() for d in report.divergences]
    assert sorted(r.run_id for r in report.runs) == sorted(ids)
    answered = [r for r in report.runs if r.supersteps == 3]
    assert len(answered) == 90  # write, ask, and the answered re-execution each replayed
    assert all(not r.skipped for r in report.runs)


async def test_swapping_two_steps_names_the_first_divergence(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    ids = await record(path, 3)
    report = await check(path, upgraded, ids)
    assert not report.ok
    first = report.runs[0].divergence
    assert first is not None
    assert (first.run_id, first.superstep, first.executor_id) == (ids[0], 2, "approve")
    assert first.step == "file"  # where the new code now goes first
    assert first.what == "journal"
    assert "superstep 2" in first.describe()
    assert "'approve'" in first.describe()


def treadle(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``treadle`` command in a real process, with the upgrade app importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent)
    command = [str(Path(sys.executable).parent / "treadle"), *args]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=50, check=False
    )


async def test_check_upgrade_exits_0_when_runs_replay_and_1_naming_the_divergence(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    ids = await record(path, 2)
    same = treadle(tmp_path, "check-upgrade", "--app", "replay_app:workflow", "--store", str(path))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "2 of 2 run(s) replay as recorded" in same.stdout
    changed = treadle(
        tmp_path,
        "check-upgrade",
        "--app",
        "replay_app:upgraded",
        "--store",
        str(path),
        "--run",
        ids[1],
    )
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert f"run {ids[1]} superstep 2 executor 'approve' step 'file'" in changed.stdout
    assert "0 of 1 run(s)" in changed.stdout
