"""The CLI's door and the record (issue 29): what ``treadle`` does to a run is logged with
``cli:USER@HOST``, ``logs`` and ``export`` say who did what, and ``treadle audit --verify``
finds an edited, reordered or removed entry; a deleted run keeps its entries."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from treadle_cli import Cli

from treadle import Actor

APP = str(Path(__file__).parents[1] / "operations" / "record_app.py")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _asked(cli: Cli) -> str:
    started = cli("run", APP, "--input", '"t"', "--run-id", "r1")
    assert started.returncode in (0, 3), started.stderr
    (request,) = cli.json("requests")["requests"]
    return str(request["request_id"])


def test_each_cli_action_is_logged_once_with_the_cli_user_and_said_in_logs_and_export(
    cli: Cli,
) -> None:
    request_id = _asked(cli)
    for args in (
        ("respond", "r1", request_id, "true"),
        ("pause", "r1"),
        ("unpause", "r1"),
        ("cancel", "r1"),
    ):
        done = cli(*args)
        assert done.returncode in (0, 3), (args, done.stderr)  # 3: it rests, waiting for input
    me = Actor.cli().label
    logged = cli("logs", "r1", "--json")
    events = [json.loads(line) for line in logged.stdout.splitlines()]
    acted = [(e["type"], e["data"]["actor"]["label"]) for e in events if "actor" in e["data"]]
    assert acted == [
        ("run_created", me),
        ("request_answered", me),
        ("run_paused", me),
        ("run_unpaused", me),
        ("run_cancelled", me),
    ]
    logs = cli("logs", "r1").stdout
    assert f"{me} approved at " in logs
    assert "(cli)" in logs
    exported = [json.loads(line) for line in cli("export", "r1").stdout.splitlines()]
    said = [line["said"] for line in exported if "said" in line]
    assert len(said) == 5
    assert said[1].startswith(f"{me} approved at ")
    assert said[1].endswith(" (cli)")


def _sql(cli: Cli, *statements: str) -> None:
    with sqlite3.connect(cli.db) as db:
        for statement in statements:
            db.execute(statement)


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        ("UPDATE treadle_audit SET detail = '{\"answer\":false}' WHERE seq = 2", "entry 2"),
        (
            (
                "UPDATE treadle_audit SET seq = -seq WHERE seq IN (2, 3);"
                "UPDATE treadle_audit SET seq = 5 - seq WHERE seq IN (-2, -3)"
            ),
            "entry 2",
        ),
        ("DELETE FROM treadle_audit WHERE seq = 2", "entry 2 is missing"),
        ("DELETE FROM treadle_audit WHERE seq = (SELECT max(seq) FROM treadle_audit)", "entry 4"),
    ],
    ids=["edited", "reordered", "removed", "removed-last"],
)
def test_audit_verify_finds_an_edited_reordered_or_removed_entry(
    cli: Cli, tamper: str, named: str
) -> None:
    request_id = _asked(cli)
    assert cli("respond", "r1", request_id, "true").returncode == 3  # rests for input
    assert cli("pause", "r1").returncode == 0
    assert cli("unpause", "r1").returncode == 0
    held = cli("audit", "--verify")
    assert held.returncode == 0, held.stderr
    assert "4 entries" in held.stdout
    _sql(cli, *tamper.split(";"))
    broken = cli("audit", "--verify")
    assert broken.returncode == 1
    assert named in broken.stderr


def test_deleting_a_run_keeps_its_audit_entries(cli: Cli) -> None:
    request_id = _asked(cli)
    assert cli("respond", "r1", request_id, "true").returncode == 3  # rests for input
    assert cli("cancel", "r1").returncode == 0
    assert cli("delete", "r1", "--yes").returncode == 0
    kept = cli.json("audit", "r1")["entries"]
    assert [e["action"] for e in kept] == [
        "run_created",
        "request_answered",
        "run_cancelled",
        "run_deleted",
    ]
    assert cli("audit", "--verify").returncode == 0


def test_audit_and_links_take_a_prefix_and_refuse_an_id_nobody_has(cli: Cli) -> None:
    # Every command naming a run takes a prefix of its id and refuses an unknown one;
    # `audit RUN` and `links create` took the text as a whole id and printed nothing (or
    # "no run") for a prefix, and nothing at all, exit 0, for an id nobody has.
    request_id = _asked(cli)
    assert [e["action"] for e in cli.json("audit", "r")["entries"]] == ["run_created"]
    unknown = cli("audit", "nosuch")
    assert unknown.returncode == 2
    assert "no run 'nosuch'" in unknown.stderr
    made = cli("links", "create", "r", request_id, "--for", "ann")
    assert made.returncode == 0, made.stderr
    assert f"answer link for ann to {request_id} of r1," in made.stdout
    cli("delete", "r1", "--yes")  # a deleted run's entries are still found by its id
    assert [e["action"] for e in cli.json("audit", "r1")["entries"]][-1] == "run_deleted"


def test_who_started_a_run_is_an_object_in_every_json_view(cli: Cli) -> None:
    # It was the actor's JSON text inside the JSON, to be parsed twice by every script.
    _asked(cli)
    listed = cli.json("runs")["runs"][0]["started_by"]
    assert (listed["kind"], listed["door"], listed["role"]) == ("cli", "cli", "admin")
    assert listed["label"] == f"cli:{listed['name']}"
    assert cli.json("show", "r1")["started_by"] == listed
