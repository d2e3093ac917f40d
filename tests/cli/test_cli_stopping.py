"""A command stopped early never cancels its run: signals and a closed output detach.

Only ``treadle cancel`` cancels. A command that drives a run (``run``,
``resume``, ``respond``) and meets Ctrl-C, SIGTERM, SIGHUP, or a reader that
went away (``| head -1``: EPIPE on its next write) detaches: it says where
the run stands in one line, exits with 128 plus the signal's number, and the
run stays as last committed, for ``treadle resume`` to finish. A command
that follows a run (``watch``, ``start --follow``) stops following and
leaves it alone.

Every test drives the real command in subprocesses, with real signals and
real pipes, on a SQLite file; ``slow_app`` holds superstep 2 until the test
creates its gate file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_ownership import gate_of, input_for
from treadle_cli import TREADLE, Cli

import treadle
from gates import wait_for_file

SRC = Path(treadle.__file__).parents[1]  # the code under test, for `python -m treadle`

pytestmark = pytest.mark.integration

DETACHED = (
    "detached from run {run} at superstep {superstep} (its last checkpoint); it stays resumable: "
    "treadle resume {run} (or let `treadle worker` take it over); treadle show {run} to look at it"
)


def detached_line(cli: Cli, run: str) -> str:
    """The one line a stop prints, at the superstep the run last committed."""
    return DETACHED.format(run=run, superstep=cli.json("show", run)["superstep"])


def held_in_superstep_2(
    cli: Cli, command: str, tmp_path, run: str, *more: str
) -> subprocess.Popen[str]:
    """``command`` (run, resume or respond, with ``more``) driving ``run``, held by its gate."""
    gate = gate_of(tmp_path)
    if command == "run":
        driving = cli.start("run", "slow_app:gated", "--input", input_for(gate), "--run-id", run)
    elif command == "resume":
        first = cli.start("run", "slow_app:gated", "--input", input_for(gate), "--run-id", run)
        wait_for_file(gate.with_name("gate.reached"), first)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)
        assert first.returncode == 130
        gate.with_name("gate.reached").unlink()
        driving = cli.start("resume", run, *more)
    else:  # respond: the answer drives the run on, into the held superstep
        asked = cli("run", "slow_app:asked_then_gated", "--input", input_for(gate), "--run-id", run)
        assert asked.returncode == 3, asked.stderr
        (request,) = cli.json("show", run)["pending_requests"]
        driving = cli.start("respond", run, request["request_id"], "true", *more)
    wait_for_file(gate.with_name("gate.reached"), driving)
    return driving


def rest_of_stderr(process: subprocess.Popen[str]) -> str:
    """What ``process`` writes to stderr until it exits (its stdout went to ``head``)."""
    assert process.stderr is not None
    with process.stderr:
        return process.stderr.read()


def finishes_on_resume(cli: Cli, tmp_path, run: str) -> None:
    shown = cli.json("show", run)
    assert shown["status"] == "running", shown
    assert shown["owner"] is None  # the lease was given up: resume need not wait it out
    gate_of(tmp_path).touch()
    resumed = cli("resume", run)
    assert resumed.returncode == 0, resumed.stderr
    assert cli.json("show", run)["outputs"] == ["passed gate"]


@pytest.mark.parametrize(
    ("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
@pytest.mark.parametrize("command", ["run", "resume", "respond"])
def test_a_signal_detaches_a_driving_command_with_one_line(tmp_path, command, sent, code):
    cli = Cli(tmp_path)
    driving = held_in_superstep_2(cli, command, tmp_path, "s1")
    driving.send_signal(sent)
    _, err = driving.communicate(timeout=30)
    assert driving.returncode == code, err
    assert err.strip() == detached_line(cli, "s1")
    finishes_on_resume(cli, tmp_path, "s1")


# (resume --follow draws nothing while its first superstep is held: it follows as respond does)
@pytest.mark.parametrize("command", ["run", "respond"])
def test_a_closed_stdout_detaches_a_driving_command_and_resume_finishes_the_run(tmp_path, command):
    cli = Cli(tmp_path)
    # resume and respond draw the run's events as they commit with --follow (run always does)
    more = () if command == "run" else ("--follow",)
    driving = held_in_superstep_2(cli, command, tmp_path, "p1", *more)
    assert driving.stdout is not None
    head = subprocess.Popen(["head", "-1"], stdin=driving.stdout, stdout=subprocess.PIPE)
    driving.stdout.close()  # head alone reads it now
    first, _ = head.communicate(timeout=30)  # head has read its line and gone: the pipe is closed
    assert first.strip()
    gate_of(tmp_path).touch()  # the run goes on, and the next line it draws meets EPIPE
    err = rest_of_stderr(driving)
    assert driving.wait(timeout=30) == 141, err
    assert "Traceback" not in err
    shown = cli.json("show", "p1")
    if shown["status"] == "running":
        assert err.strip() == detached_line(cli, "p1")
    else:  # the run reached its end before the next line met the closed pipe: said as it is
        assert err.strip() == f"run p1 is {shown['status']}; treadle show p1 to look at it"
    assert shown["status"] != "cancelled"
    if shown["status"] == "running":
        gate_of(tmp_path).unlink()
        finishes_on_resume(cli, tmp_path, "p1")
    assert cli.json("runs")["runs"][0]["status"] != "cancelled"


def test_run_piped_to_head_leaves_its_run_resumable_not_cancelled(tmp_path):
    """The command of the report, as a shell runs it."""
    cli = Cli(tmp_path)
    brief = json.dumps({"topic": "otters", "words": 300})
    pipeline = (
        f"{TREADLE} run cli_app:review --input '{brief}' --run-id p1 | head -1; "
        "exit ${PIPESTATUS[0]}"
    )
    piped = subprocess.run(
        ["bash", "-c", pipeline],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert piped.stdout == "run p1 of review\n"
    assert "Traceback" not in piped.stderr
    shown = cli.json("show", "p1")
    assert shown["status"] != "cancelled", piped.stderr
    if shown["status"] == "running":  # detached before it came to rest: resume takes it on
        assert piped.returncode == 141, piped.stderr
        assert cli("resume", "p1").returncode == 3
    (request,) = cli.json("show", "p1")["pending_requests"]
    answered = cli("respond", "p1", request["request_id"], '{"ok": true}')
    assert answered.returncode == 0, answered.stderr
    assert cli.json("show", "p1")["status"] == "completed"


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_stops_watch_with_one_line_and_leaves_the_run_alone(tmp_path, sent, code):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    owner = cli.start("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "w1")
    wait_for_file(gate.with_name("gate.reached"), owner)
    watching = cli.start("watch", "w1")
    assert watching.stdout is not None
    assert "superstep" in watching.stdout.readline() + watching.stdout.readline()
    watching.send_signal(sent)
    _, err = watching.communicate(timeout=30)
    assert watching.returncode == code, err
    assert err.strip() == (
        "stopped watching run w1; the run was not touched (treadle watch w1 to watch it again)"
    )
    gate.touch()
    _, owner_err = owner.communicate(timeout=30)
    assert owner.returncode == 0, owner_err
    assert cli.json("show", "w1")["outputs"] == ["passed gate"]


def test_watch_piped_to_head_stops_and_leaves_the_run_alone(tmp_path):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    owner = cli.start("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "w2")
    wait_for_file(gate.with_name("gate.reached"), owner)
    watching = cli.start("watch", "w2")
    assert watching.stdout is not None
    head = subprocess.Popen(["head", "-1"], stdin=watching.stdout, stdout=subprocess.PIPE)
    watching.stdout.close()
    head.communicate(timeout=30)
    gate.touch()  # the run goes on; watch's next line meets EPIPE
    err = rest_of_stderr(watching)
    assert watching.wait(timeout=30) == 141, err
    assert "Traceback" not in err
    _, owner_err = owner.communicate(timeout=30)
    assert owner.returncode == 0, owner_err
    assert cli.json("show", "w2")["outputs"] == ["passed gate"]


@pytest.mark.parametrize("command", [["runs"], ["run", "cli_app:review", "--run-id", "f1"]])
def test_an_output_that_cannot_be_written_is_said_in_one_line_and_fails_nothing(tmp_path, command):
    """A full disk (here /dev/full) took the command down with a traceback, "run failed"."""
    cli = Cli(tmp_path)
    if command[0] == "run":
        command = [*command, "--input", json.dumps({"topic": "otters", "words": 300})]
    else:
        assert cli("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}').returncode == 3
    env = {**cli.env, "PYTHONPATH": os.pathsep.join([str(SRC), cli.env["PYTHONPATH"]])}
    with Path("/dev/full").open("w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "treadle", *command],
            cwd=cli.cwd, env=env, stdout=full, stderr=subprocess.PIPE, text=True,
            timeout=50, check=False,
        )  # fmt: skip
    assert done.returncode == 74, done.stderr
    assert "Traceback" not in done.stderr
    assert "No space left on device" in done.stderr or "resumable" in done.stderr
    if command[0] == "run":  # the run goes on from where it was left: nothing failed
        assert cli.json("show", "f1")["status"] != "failed"
        assert cli("resume", "f1").returncode == 3
