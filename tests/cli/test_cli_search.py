"""``treadle runs --where`` and ``treadle bulk`` on a SQLite file (issue 34).

A filter finds runs by their search fields; a bad one is refused naming its
column (exit 2). A bulk action's dry run counts exactly the runs the real one
then acts on, each through the one door with the CLI's user in the run's log
and the audit log; a run that no longer passes the filter is skipped and said so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from treadle_cli import Cli, Typed

from treadle import Actor

APP = str(Path(__file__).parents[1] / "search_app.py")
TICKETS = {"t1": ("c1", 10), "t2": ("c2", 2000), "t3": ("c1", 3000), "t4": ("c3", 5)}


pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    cli = Cli(tmp_path_factory.mktemp("search"))
    for run_id, (customer, amount) in TICKETS.items():
        given = json.dumps({"customer": customer, "amount": amount})
        done = cli("run", APP, "--input", given, "--run-id", run_id)
        assert done.returncode == 3, done.stderr  # it rests, awaiting its answer
    return cli


def _ids(cli: Cli, where: str) -> list[str]:
    return [run["run_id"] for run in cli.json("runs", "--where", where)["runs"]]


def test_runs_where_finds_runs_by_their_fields(filled: Cli) -> None:
    assert _ids(filled, 'fields.customer == "c1"') == ["t3", "t1"]
    assert _ids(filled, 'fields.amount >= 1000 && status == "awaiting_input"') == ["t3", "t2"]
    assert _ids(filled, 'fields.stage == "review" && !(fields.customer in ["c1", "c2"])') == ["t4"]
    # --status and --where together: both hold.
    listed = filled.json("runs", "--where", "fields.amount < 100", "--status", "completed")
    assert listed["runs"] == []


def test_a_bad_filter_is_refused_naming_its_column(filled: Cli) -> None:
    done = filled("runs", "--where", 'fields.customer = "c1"')
    assert done.returncode == 2
    assert "column 17" in done.stderr
    assert "unexpected character '='" in done.stderr


@pytest.mark.timeout(240)
def test_a_bulk_action_acts_on_what_its_dry_run_counted_and_records_each(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    for run_id, (customer, amount) in TICKETS.items():
        given = json.dumps({"customer": customer, "amount": amount})
        assert cli("run", APP, "--input", given, "--run-id", run_id).returncode == 3
    where = "fields.amount >= 1000"
    counted = cli.json("bulk", "pause", "--where", where, "--dry-run")
    assert counted == {"action": "pause", "dry_run": True, "matched": 2, "acted": 0, "skipped": []}
    paused = cli.json("bulk", "pause", "--where", where, "--yes")
    assert (paused["matched"], paused["acted"]) == (2, 2)
    assert _ids(cli, 'status == "paused"') == ["t3", "t2"]

    # An answer of the wrong type is checked as one respond checks it: every run skipped,
    # saying why, nothing answered (it was kept, logged as answered and told acted on).
    wrong = cli.json(
        "bulk", "respond", "--where", 'fields.customer == "c1"', "--executor", "approve",
        "--answer", "5", "--yes",
    )  # fmt: skip
    assert (wrong["matched"], wrong["acted"]) == (2, 0)
    assert all("expects str, got int 5" in s["reason"] for s in wrong["skipped"]), wrong
    assert "request_answered" not in [e["action"] for e in cli.json("audit")["entries"]]
    answered = cli.json(
        "bulk", "respond", "--where", 'fields.customer == "c1"', "--executor", "approve",
        "--answer", '"yes"', "--yes",
    )  # fmt: skip
    assert (answered["matched"], answered["acted"]) == (2, 2)

    # Paused runs stay paused (status "paused"), so "awaiting_input" no longer keeps them.
    cancelled = cli.json(
        "bulk", "cancel", "--where", 'status != "cancelled"', "--yes", "--rate", "50"
    )
    assert (cancelled["matched"], cancelled["acted"]) == (4, 4)
    again = cli.json("bulk", "cancel", "--where", 'status != "cancelled"', "--dry-run")
    assert again["matched"] == 0

    me = Actor.cli().label
    audit = cli.json("audit")["entries"]
    by_run = {}
    for entry in audit:
        by_run.setdefault(entry["run_id"], []).append((entry["action"], entry["actor"]["label"]))
    for run_id in TICKETS:
        assert by_run[run_id].count(("run_cancelled", me)) == 1, by_run[run_id]
    assert by_run["t2"].count(("run_paused", me)) == 1
    assert by_run["t1"].count(("request_answered", me)) == 1
    deleted = cli.json("bulk", "delete", "--where", 'fields.customer == "c3"', "--yes")
    assert deleted["acted"] == 1
    assert _ids(cli, "true") == ["t3", "t2", "t1"]


def test_a_bulk_action_without_a_filter_or_confirmation_is_refused(filled: Cli) -> None:
    done = filled("bulk", "cancel")
    assert done.returncode == 2
    assert "needs --where" in done.stderr
    done = filled("bulk", "cancel", "--where", "true")  # no terminal to ask, no --yes
    assert done.returncode == 2
    assert "add --yes" in done.stderr
    done = filled("bulk", "explode", "--where", "true", "--dry-run")
    assert done.returncode == 2
    assert "cancel, pause, unpause, resume, respond, delete" in done.stderr


def test_a_bulk_answer_is_read_as_strictly_as_any_commands_json(filled: Cli) -> None:
    # bulk respond read --answer with json.loads: a key named twice (the last taken) was an
    # answer, and a deep one a 54-line traceback.
    asked = ("bulk", "respond", "--where", "true", "--executor", "approve", "--yes")
    twice = filled(*asked, "--answer", '{"approved": false, "approved": true}')
    assert twice.returncode == 2, twice.stdout
    assert "the key 'approved' appears twice in one object" in twice.stderr
    deep = filled(*asked, "--answer", "[" * 30_000 + "]" * 30_000)
    assert deep.returncode == 2, deep.stdout
    assert deep.stderr.strip() == (
        "error: the answer (--answer) nests arrays and objects more than 256 levels deep, "
        "the most a command accepts"
    )
    assert "Traceback" not in deep.stderr + twice.stderr


def test_a_bulk_action_confirmed_on_a_terminal_acts_only_on_the_runs_it_counted(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    for run_id, (customer, amount) in TICKETS.items():
        given = json.dumps({"customer": customer, "amount": amount})
        assert cli("run", APP, "--input", given, "--run-id", run_id).returncode == 3

    def another_run_the_filter_keeps() -> None:
        given = json.dumps({"customer": "c9", "amount": 9000})
        assert cli("run", APP, "--input", given, "--run-id", "t9").returncode == 3

    typed = Typed(b"runs?", another_run_the_filter_keeps, b"y\n")
    screen = cli.on_a_terminal(
        "bulk", "cancel", "--where", "fields.amount >= 1000", columns=200, typed=typed
    )
    assert "cancel 2 runs?" in screen
    assert "cancel: 2 of 3 runs (1 skipped)" in screen, screen
    assert "skipped t9: not among the 2 runs confirmed" in screen
    statuses = {run["run_id"]: run["status"] for run in cli.json("runs")["runs"]}
    assert statuses == {
        "t1": "awaiting_input",
        "t2": "cancelled",
        "t3": "cancelled",
        "t4": "awaiting_input",
        "t9": "awaiting_input",
    }
