"""`treadle pause` and `treadle unpause` on SQLite: real processes, one store file.

A run another `treadle run` is advancing pauses at its next barrier (that
command exits 3, paused); `treadle runs --status paused` lists it; a
paused run is advanced by nothing until `treadle unpause` or `treadle
resume`; refusals exit 2 and change nothing, as `treadle cancel`'s do.
"""

from __future__ import annotations

import json

import pytest
from test_cli_ownership import end, gate_of, input_for
from treadle_cli import Cli

from gates import wait_for_file

pytestmark = pytest.mark.integration


def test_treadle_pause_stops_a_run_at_its_next_barrier_and_unpause_lets_it_go_on(tmp_path):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    owner = cli.start("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "p1")
    try:
        wait_for_file(gate.with_name("gate.reached"), owner)  # superstep 2 is computing
        asked = cli("pause", "p1")
        assert asked.returncode == 0, asked.stderr
        assert "run p1: pause requested; its owner" in asked.stdout
        assert "pauses it at its next superstep boundary" in asked.stdout
        shown = cli.json("show", "p1")
        assert (shown["status"], shown["orphaned"]) == ("running", False)
        assert shown["pause_requested"] is not None
        assert "running (pause requested)" in cli("runs").stdout
        gate.touch()  # the owner finishes superstep 2, commits it, and stops there
        out, err = owner.communicate(timeout=30)
    finally:
        end(owner)
    assert owner.returncode == 3, err  # the run is not done: it is paused
    assert "run p1: paused" in out
    assert "`treadle unpause p1` or `treadle resume p1` lets it go on" in out
    assert cli.checkpoints("p1") == [0, 1, 2]
    assert [row["run_id"] for row in cli.json("runs", "--status", "paused")["runs"]] == ["p1"]
    assert "`treadle unpause p1`" in cli("show", "p1").stdout

    again = cli("pause", "p1")
    assert (again.returncode, again.stdout.strip()) == (0, "run p1 paused at superstep 2")
    before = cli.snapshot()
    refused = cli("send", "p1", '"hello"')
    assert refused.returncode == 2
    assert "run 'p1' is paused; nothing was changed" in refused.stderr
    assert cli.snapshot() == before

    unpaused = cli("unpause", "p1")
    assert unpaused.returncode == 0, unpaused.stderr
    assert "run p1 unpaused (running); a `treadle worker` takes it up" in unpaused.stdout
    done = cli("resume", "p1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"] == ["passed gate"]
    assert cli.checkpoints("p1") == [0, 1, 2, 3]  # nothing committed twice

    for command in ("pause", "unpause"):
        ended = cli(command, "p1")
        assert ended.returncode == 2
        assert f"run 'p1' has ended (completed); there is nothing to {command}" in ended.stderr
    unknown = cli("pause", "ghost")
    assert (unknown.returncode, "no run 'ghost'" in unknown.stderr) == (2, True)


def test_a_paused_run_keeps_an_answer_for_later_and_resume_goes_on_with_it(tmp_path):
    cli = Cli(tmp_path)
    brief = json.dumps({"topic": "otters", "words": 30})
    started = cli("run", "cli_app:review", "--input", brief, "--run-id", "q1", "--json")
    assert started.returncode == 3, started.stderr
    (request,) = json.loads(started.stdout)["pending_requests"]
    paused = cli("pause", "q1")
    assert (paused.returncode, paused.stdout.strip()) == (0, "run q1 paused at superstep 2")

    answered = cli("respond", "q1", request["request_id"], '{"ok": true}', "--json")
    assert answered.returncode == 3, answered.stderr  # kept, not applied: the run is paused
    assert json.loads(answered.stdout)["status"] == "paused"
    assert cli.checkpoints("q1") == [0, 1, 2]

    resumed = cli("resume", "q1", "--json")  # unpauses it, and applies the answer kept
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outputs"][0]["approved"] is True
    not_paused = cli("unpause", "q1")
    assert not_paused.returncode == 2
    assert "has ended (completed)" in not_paused.stderr


def test_an_answer_given_while_paused_is_shown_answered_not_waiting(tmp_path):
    # respond keeps the answer in the inbox until the run goes on: the run's views say it
    # is answered, never that it waits with a command to answer it again (which the
    # store would refuse: already answered).
    cli = Cli(tmp_path)
    asked = cli.json("run", "cli_app:review", "--input", '{"topic": "a", "words": 1}',
                     "--run-id", "r1")  # fmt: skip
    (request,) = asked["pending_requests"]
    assert request["answered"] is False
    assert cli("pause", "r1").returncode == 0
    kept = cli("respond", "r1", request["request_id"], '{"ok": true}')
    assert kept.returncode == 3, kept.stderr  # the run is not done: it is paused
    for shown in (kept.stdout, cli("show", "r1").stdout):
        assert f"request {request['request_id']} from approve: answered" in shown
        assert "treadle respond" not in shown
    assert cli.json("show", "r1")["pending_requests"][0]["answered"] is True
    assert cli("unpause", "r1").returncode == 0
    done = cli.json("resume", "r1")
    assert (done["status"], done["pending_requests"]) == ("completed", [])
