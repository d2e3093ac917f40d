"""`treadle delete` raced by other processes: one wins, the rest are told so, nothing half-done."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest
from treadle_cli import TREADLE, Cli

from postgres import drop_schemas, fresh_schema, postgres_dsn

REVIEW = '{"topic": "tides", "words": 5}'
RACERS = 4


def race(cli: Cli, *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Start every command at once, as separate processes; their outcomes, in order."""
    started = [(command, cli.fork(*command)) for command in commands]
    done = []
    for command, process in started:
        with process:
            out, err = process.communicate(timeout=50)
        done.append(subprocess.CompletedProcess([TREADLE, *command], process.returncode, out, err))
    return done


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
async def cli(request, tmp_path):
    if request.param == "sqlite":
        yield Cli(tmp_path)
        return
    schema = fresh_schema()
    yield Cli(tmp_path, TREADLE_STORE=postgres_dsn(), TREADLE_SCHEMA=schema)
    await drop_schemas([schema])


def awaiting_run(cli: Cli, run_id: str) -> str:
    """A run resting on a request, made where the store is (a worker-less start on PostgreSQL)."""
    if "TREADLE_SCHEMA" in cli.env:  # PostgreSQL: made by a one-off worker process
        started = cli("start", "review", "-i", REVIEW, "--run-id", run_id)
        assert started.returncode == 0, started.stderr
        return run_id
    done = cli("run", "cli_app:review", "-i", REVIEW, "--run-id", run_id)
    assert done.returncode == 3, done.stderr
    return run_id


def test_deleters_racing_for_one_run_one_deletes_it_the_others_are_told_it_is_gone(cli):
    # A run whose id the doomed one's starts stands by: a loser used to resolve the id a
    # second time, once the run was gone, as that run's prefix, and delete it (and say it
    # had deleted the run it was given).
    run_id = awaiting_run(cli, "doomed")
    bystander = awaiting_run(cli, "doomed-2")
    outcomes = race(cli, *[("delete", run_id, "--yes")] * RACERS)
    winners = [o for o in outcomes if o.returncode == 0]
    assert len(winners) == 1, [(o.returncode, o.stderr) for o in outcomes]
    assert f"deleted run {run_id} " in winners[0].stdout
    for lost in outcomes:
        if lost.returncode != 0:
            assert lost.returncode == 2
            told = lost.stderr
            assert f"no run '{run_id}'" in told or f"run '{run_id}' is no longer in" in told
    gone = cli("show", run_id)
    assert gone.returncode == 2
    assert f"run '{run_id}' is no longer in" in gone.stderr  # not the bystander, by prefix
    assert cli.json("show", bystander)["status"] in ("awaiting_input", "pending")  # untouched
    deleted = [e for e in cli.json("audit")["entries"] if e["action"] == "run_deleted"]
    assert [e["run_id"] for e in deleted] == [run_id]


def test_a_delete_and_answers_racing_leave_one_consistent_outcome(tmp_path):
    cli = Cli(tmp_path)
    run_id = awaiting_run(cli, "contested")
    shown = cli.json("show", run_id)
    (request,) = shown["pending_requests"]
    answer = ("respond", run_id, request["request_id"], '{"ok": true, "note": "ship it"}')
    outcomes = race(cli, ("delete", run_id, "--yes"), answer, answer, answer)
    deleted, answers = outcomes[0], outcomes[1:]
    applied = [o for o in answers if o.returncode == 0]
    assert len(applied) <= 1, [o.stderr for o in answers]
    with sqlite3.connect(cli.db) as db:
        left = db.execute("SELECT status FROM treadle_runs WHERE run_id = ?", (run_id,)).fetchall()
        events = db.execute("SELECT COUNT(*) FROM treadle_events WHERE run_id = ?", (run_id,))
        logged = events.fetchone()[0]
    if deleted.returncode == 0:  # it went, whole: row, log and all
        assert (left, logged) == ([], 0)
    else:  # an answer got there first: the run was busy, then completed with it
        assert "is owned by" in deleted.stderr or "is not" in deleted.stderr, deleted.stderr
        assert left == [("completed",)]
        assert len(applied) == 1
        assert json.loads(cli("show", run_id, "--json").stdout)["status"] == "completed"


def test_a_fork_and_a_delete_racing_leave_no_fork_of_a_deleted_run(cli):
    # Separate processes: either the delete wins (the fork is told its run is gone) or the
    # fork does (the delete is refused: the run has a fork), never both told they won.
    for attempt in range(3):
        run_id = awaiting_run(cli, f"parent-{attempt}")
        deleted, forked = race(
            cli, ("delete", run_id, "--yes"), ("fork", run_id, "--superstep", "0", "--json")
        )
        assert (deleted.returncode == 0) != (forked.returncode == 0), (deleted, forked)
        runs = {row["run_id"]: row for row in cli.json("runs")["runs"]}
        if deleted.returncode == 0:
            assert run_id not in runs
            assert f"'{run_id}'" in forked.stderr
            assert not any(row["parent_run_id"] == run_id for row in runs.values())
        else:
            assert "fork" in deleted.stderr, deleted.stderr  # RunHasForksError names them
            child = json.loads(forked.stdout)["run_id"]
            assert runs[child]["parent_run_id"] == run_id
            assert run_id in runs
