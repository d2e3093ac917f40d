"""Start policies from the command line: ``treadle run`` with start flags, on one SQLite file.

A run admitted at once runs here; one that waits its turn is queued (exit
0, ``queued``); a refused start says by whom, in one line (exit 2); a bad
flag is refused before anything is stored.
"""

from __future__ import annotations

import json

import pytest
from treadle_cli import Cli

BRIEF = '{"topic": "otters", "words": 3}'


def test_a_singleton_from_the_command_line_queues_the_second_and_refuses_a_third(tmp_path):
    cli = Cli(tmp_path)
    first = cli("run", "cli_app:review", "-i", BRIEF, "--singleton", "--key", "acme", "--json")
    assert first.returncode == 3, first.stderr  # awaiting its answer: it holds acme
    second = cli("run", "cli_app:review", "-i", BRIEF, "--singleton", "--key", "acme", "--json")
    assert second.returncode == 0, second.stderr
    assert '"status": "queued"' in second.stdout
    refused = cli(
        "run",
        "cli_app:review",
        "-i",
        BRIEF,
        "--singleton",
        "--key",
        "acme",
        "--when-busy",
        "refuse",
    )
    assert refused.returncode == 2
    assert "key 'acme' of workflow 'review' is taken by run" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    statuses = sorted(run["status"] for run in cli.json("runs")["runs"])
    assert statuses == ["awaiting_input", "queued"]
    # The queued run is shown as queued, with the app's code given or not (it said "has no
    # checkpoint", exit 2, with --app).
    queued = json.loads(second.stdout)["run_id"]
    for app in ((), ("--app", "cli_app:review")):
        shown = cli("show", queued, *app)
        assert shown.returncode == 0, shown.stderr
        assert f"run '{queued}' is queued: no worker has taken it up yet" in shown.stdout


def test_a_deduplication_id_from_the_command_line_starts_one_run(tmp_path):
    cli = Cli(tmp_path)
    first = cli.json("run", "cli_app:review", "-i", BRIEF, "--dedup-id", "ticket-9")
    again = cli.json("run", "cli_app:review", "-i", BRIEF, "--dedup-id", "ticket-9")
    assert again["run_id"] == first["run_id"]
    assert len(cli.json("runs")["runs"]) == 1


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--queue-concurrency", "0"], "concurrency must be a whole number of at least 1"),
        (["--when-busy", "drop", "--singleton"], "when_busy must be 'queue' or 'refuse'"),
        (["--debounce", "-1"], "debounce must be a positive number of seconds"),
        (["--key", "acme"], "key is used by singleton and debounce"),
    ],
)
def test_a_bad_start_flag_is_refused_in_one_line_and_nothing_is_stored(tmp_path, args, named):
    cli = Cli(tmp_path)
    before = cli.snapshot()
    done = cli("run", "cli_app:review", "-i", BRIEF, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert cli.snapshot() == before
