"""`treadle runs` and `treadle show` print a run's outcome beside its status; --outcome filters."""

from __future__ import annotations

import json
from pathlib import Path

from treadle_cli import Cli

APP = str(Path(__file__).parents[1] / "server" / "outcome_app.py")


def test_runs_shows_each_runs_outcome_and_filters_on_it(tmp_path):
    cli = Cli(tmp_path)
    for run_id, euros in (("cheap", 30), ("dear", 1200)):
        claim = json.dumps({"who": "ann", "euros": euros})
        done = cli("run", APP, "-i", claim, "--run-id", run_id)
        assert done.returncode == 0, done.stderr

    listed = cli("runs")
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert "outcome" in listed.stdout.splitlines()[0]
    assert lines["dear"].split()[3:5] == ["completed", "rejected"]
    assert lines["cheap"].split()[3:5] == ["completed", "approved"]

    rejected = cli.json("runs", "--outcome", "rejected")["runs"]
    assert [r["run_id"] for r in rejected] == ["dear"]
    assert rejected[0]["outcome"] == "rejected"
    assert rejected[0]["outcome_summary"] == "1200 EUR for ann is over the 1000 EUR limit"
    assert [r["run_id"] for r in cli.json("runs", "--outcome", "approved")["runs"]] == ["cheap"]
    assert cli.json("runs", "--outcome", "withdrawn")["runs"] == []

    shown = cli("show", "dear")
    assert shown.returncode == 0, shown.stderr
    assert "completed" in shown.stdout.splitlines()[0]
    assert "outcome: rejected: 1200 EUR for ann is over the 1000 EUR limit" in shown.stdout
    assert cli.json("show", "dear")["outcome"] == "rejected"
