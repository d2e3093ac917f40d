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
from expense_app import Verdict as ExpenseVerdict
from expense_app import audited_v1, expenses_v1, expenses_v2
from replay_app import Verdict, upgraded, workflow

if TYPE_CHECKING:
    from treadle import Workflow

HERE = Path(__file__).resolve().parent


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


def treadle(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The ``treadle`` command in a real process, with the upgrade app importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")} | (env or {})
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


# -- a replay runs no step, and checks each run against its own version ----------------------
async def record_expenses(path: Path, marks: Path) -> dict[str, list[str]]:
    """Runs of ``expense_app`` on SQLite: answered and waiting runs of version 1, one of 2."""
    os.environ["EXPENSE_SIDE_EFFECTS"] = str(marks)
    store = SqliteStore(path)
    ids: dict[str, list[str]] = {"v1": [], "v2": []}
    try:
        for n, flow in enumerate([expenses_v1, expenses_v1, expenses_v1, expenses_v2]):
            result = await flow.run(100 + n, store=store, deterministic=True)
            ids[f"v{flow.version}"].append(result.run_id)
            if n != 1:  # the second stays waiting for its answer
                request = result.pending_requests[0].request_id
                await flow.respond(result.run_id, {request: ExpenseVerdict(ok=True)}, store=store)
    finally:
        await store.close()
    return ids


async def test_check_upgrade_runs_no_step_and_checks_each_run_against_its_own_version(
    tmp_path: Path,
) -> None:
    path, marks = tmp_path / "runs.sqlite", tmp_path / "side-effects.txt"
    ids = await record_expenses(path, marks)
    recorded = marks.read_text()
    assert recorded.count("REMINDER") == 4  # the recording itself reminded once a run
    checked = treadle(
        tmp_path,
        "check-upgrade",
        "--app",
        f"{HERE / 'expense_app.py'}:expenses_v1",
        "--store",
        str(path),
        env={"EXPENSE_SIDE_EFFECTS": str(marks)},
    )
    assert marks.read_text() == recorded  # no step body ran again: no reminder, no filing
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "4 of 4 run(s) replay as recorded" in checked.stdout  # v2's run against v2
    assert ids["v2"][0] in checked.stdout  # what it could not compare is named, with why


async def test_a_step_the_new_code_added_is_a_divergence_and_is_not_run(tmp_path: Path) -> None:
    path, marks = tmp_path / "runs.sqlite", tmp_path / "side-effects.txt"
    ids = await record_expenses(path, marks)
    recorded = marks.read_text()
    report = await check(path, audited_v1, ids["v1"][:1])
    assert marks.read_text() == recorded  # "audit" was reported, not performed
    first = report.runs[0].divergence
    assert first is not None, report
    assert (first.superstep, first.executor_id, first.what, first.step) == (
        2,
        "approve",
        "journal",
        "audit",
    )


async def test_runs_of_a_version_not_given_are_skipped_and_say_why(tmp_path: Path) -> None:
    path, marks = tmp_path / "runs.sqlite", tmp_path / "side-effects.txt"
    ids = await record_expenses(path, marks)
    report = await check(path, expenses_v1)
    assert report.ok, [d.describe() for d in report.divergences]
    by_id = {r.run_id: r for r in report.runs}
    assert sorted(by_id) == sorted(ids["v1"] + ids["v2"])
    skipped = by_id[ids["v2"][0]]
    assert (skipped.checked, skipped.supersteps) == (False, 0)
    assert "version 2" in skipped.skipped[0]
    assert all(by_id[run_id].checked for run_id in ids["v1"])
