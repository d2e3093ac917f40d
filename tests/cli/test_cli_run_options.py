"""The run options as flags: the same RunOptions value, checked before anything runs."""

from __future__ import annotations

import json

import pytest
from treadle_cli import Cli

pytestmark = pytest.mark.integration


def test_max_supersteps_stops_a_loop_started_from_the_command_line(tmp_path):
    cli = Cli(tmp_path)
    done = cli("run", "cli_app:bouncing", "-i", "0", "--max-supersteps", "4", "--json")
    assert done.returncode == 1, done.stderr
    assert "max_supersteps=4" in done.stdout + done.stderr
    (run,) = cli.json("runs")["runs"]
    assert run["status"] == "failed"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--durability", "bogus"], "--durability"),
        (["--max-supersteps", "0"], "--max-supersteps"),
        (["--timeout", "-5"], "--timeout"),
        (["--keep-last", "0"], "--keep-last"),
    ],
)
def test_a_bad_run_option_is_refused_in_one_line_and_nothing_is_stored(tmp_path, args, named):
    cli = Cli(tmp_path)
    before = cli.snapshot()
    done = cli("run", "cli_app:bouncing", "-i", "0", *args)
    assert done.returncode == 2
    assert named in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert cli.snapshot() == before


def test_a_stored_run_keeps_its_deadline_so_resume_refuses_a_timeout(tmp_path):
    cli = Cli(tmp_path)
    started = cli("run", "cli_app:review", "-i", json.dumps({"topic": "bees", "words": 3}))
    assert started.returncode == 3, started.stderr
    (run,) = cli.json("runs")["runs"]
    before = cli.snapshot()
    for command in (["resume", run["run_id"]], ["send", run["run_id"], '"hi"']):
        done = cli(*command, "--timeout", "3600")
        assert done.returncode == 2
        assert "--timeout" in done.stderr
        assert cli.snapshot() == before
    resumed = cli("resume", run["run_id"], "--max-supersteps", "5")
    assert resumed.returncode == 3, resumed.stderr
