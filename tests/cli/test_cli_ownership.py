"""One owner per run, as the `treadle` command shows it: Ctrl-C detaches, busy runs, orphans.

Every test drives the real command in processes of its own on a SQLite file
(forked with the command line imported, ``cli.fork``; the Ctrl-C on a
terminal starts it on a pseudo-terminal). The ``slow_app:gated`` workflow
holds superstep 2 until the test creates its gate file, so "during
superstep 2" is a state the test waits for, not a guess.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from treadle_cli import TREADLE, Cli, seconds

from gates import wait_for_file

if TYPE_CHECKING:
    from forked import Forked

pytestmark = pytest.mark.integration

ISO_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 treadle\.[\w.]+ (DEBUG|INFO|WARNING|ERROR) "
)


def gate_of(tmp_path: Path, name: str = "gate") -> Path:
    return tmp_path / name


def input_for(gate: Path) -> str:
    return json.dumps(str(gate))


def end(process: Forked) -> None:
    """SIGKILL ``process`` (if it still runs), reap it and close its pipes."""
    process.kill()
    process.communicate()


def pause_outside_a_write(process: Forked, db: Path) -> None:
    """SIGSTOP ``process`` at a moment it holds no write lock on ``db`` (else others would wait)."""
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "the process never paused outside a write"
        process.send_signal(signal.SIGSTOP)
        stat = Path(f"/proc/{process.pid}/stat")
        while stat.read_bytes().rsplit(b")", 1)[-1].split()[0] != b"T":
            time.sleep(0.001)  # until the kernel has stopped it
        probe = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # it stopped mid-transaction: let it finish
            process.send_signal(signal.SIGCONT)
        finally:
            probe.close()


def test_ctrl_c_in_a_terminal_detaches_the_run_and_resume_completes_it(tmp_path):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a pseudo-terminal, as a user runs it
        os.chdir(cli.cwd)
        os.execve(  # noqa: S606 - the CLI itself, on a pseudo-terminal
            TREADLE,
            [TREADLE, "run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r1"],
            {**cli.env, "COLUMNS": "100", "TERM": "xterm"},
        )
    screen = b""

    def read_some(timeout: float) -> bool:
        nonlocal screen
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            return False
        screen += chunk
        return bool(chunk)

    deadline = time.monotonic() + 30
    while not (gate.parent / (gate.name + ".reached")).exists():  # superstep 2 is running
        assert time.monotonic() < deadline, screen.decode(errors="replace")
        read_some(0.02)
    os.write(fd, b"\x03")  # Ctrl-C: the terminal driver sends SIGINT to the foreground group
    while time.monotonic() < deadline and read_some(1):
        pass
    _, status = os.waitpid(pid, 0)
    text = screen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert (
        "detached from run r1 at superstep 1 (its last checkpoint); it stays resumable: "
        "treadle resume r1 (or let `treadle worker` take it over); treadle show r1 to look at it"
    ) in text
    assert "Traceback" not in text
    assert "cancelled" not in text

    shown = cli.json("show", "r1")
    assert shown["status"] == "running"
    assert shown["orphaned"] is True
    assert shown["owner"] is None  # the lease was given up: no one need wait it out
    assert shown["superstep"] == 1
    described = cli("show", "r1")
    assert "running (orphaned)" in described.stdout
    assert "take it over with: treadle resume r1" in described.stdout

    gate.touch()
    resumed = cli("resume", "r1")
    assert resumed.returncode == 0, resumed.stderr
    assert "completed" in resumed.stdout
    assert cli.json("show", "r1")["outputs"] == ["passed gate"]
    assert cli.checkpoints("r1") == [0, 1, 2, 3]  # superstep 2 committed once, by resume


def test_ctrl_c_on_resume_detaches_too(tmp_path):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    running = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r2")
    wait_for_file(gate.with_name("gate.reached"), running)
    running.send_signal(signal.SIGINT)
    _, first_err = running.communicate(timeout=30)
    assert running.returncode == 130, first_err
    gate.with_name("gate.reached").unlink()

    resuming = cli.fork("resume", "r2")
    wait_for_file(gate.with_name("gate.reached"), resuming)  # resume is in superstep 2 now
    resuming.send_signal(signal.SIGINT)
    out, err = resuming.communicate(timeout=30)
    assert resuming.returncode == 130, (out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("detached from run r2 at superstep 1 (its last checkpoint);")
    assert cli.json("show", "r2")["status"] == "running"

    gate.touch()
    done = cli("resume", "r2")
    assert done.returncode == 0, done.stderr
    assert cli.checkpoints("r2") == [0, 1, 2, 3]


def test_a_run_another_process_owns_is_refused_in_one_line_or_waited_for(tmp_path):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r3")
    try:
        wait_for_file(gate.with_name("gate.reached"), owner)

        listed = cli.json("runs")["runs"]
        assert listed[0]["run_id"] == "r3"
        assert listed[0]["orphaned"] is False
        assert listed[0]["owner"].startswith(f"{socket.gethostname()}:{owner.pid}:")
        assert seconds(listed[0]["lease_until"]) > time.time()
        table = cli("runs").stdout
        assert f":{owner.pid}:" in table
        assert "orphaned" not in table

        refused = cli("resume", "r3")
        assert refused.returncode == 2
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith("error: run 'r3' is owned by ")
        assert f":{owner.pid}:" in line
        assert "(lease until 20" in line
        assert "add --wait" in line
        assert "Traceback" not in refused.stderr
        assert cli.checkpoints("r3") == [0, 1]

        waiting = cli.fork("resume", "r3", "--wait")
        gate.touch()
        out, err = owner.communicate(timeout=30)
        assert owner.returncode == 0, err
        out, err = waiting.communicate(timeout=30)
        assert waiting.returncode == 0, err
        assert "completed" in out
    finally:
        end(owner)
    assert cli.checkpoints("r3") == [0, 1, 2, 3]


def test_a_killed_owner_leaves_its_run_orphaned_until_resume_takes_it_over(tmp_path):
    cli = Cli(tmp_path, TREADLE_LEASE="1")
    gate = gate_of(tmp_path)
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r4")
    wait_for_file(gate.with_name("gate.reached"), owner)
    end(owner)

    (row,) = cli.json("runs")["runs"]
    assert row["status"] == "running"
    assert row["orphaned"] is True  # its process is gone: no need to wait out the lease
    assert row["owner"].startswith(f"{socket.gethostname()}:{owner.pid}:")
    assert "running (orphaned)" in cli("runs").stdout
    shown = cli("show", "r4").stdout
    assert "running (orphaned)" in shown
    assert "take it over with: treadle resume r4 (or a running `treadle worker` does)" in shown

    gate.touch()
    resumed = cli("resume", "r4")
    assert resumed.returncode == 0, resumed.stderr
    assert cli.json("show", "r4")["orphaned"] is False
    assert cli.checkpoints("r4") == [0, 1, 2, 3]


def test_an_owner_paused_past_its_lease_is_orphaned_and_fenced_out(tmp_path):
    cli = Cli(tmp_path, TREADLE_LEASE="1")
    gate = gate_of(tmp_path)
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r5")
    try:
        wait_for_file(gate.with_name("gate.reached"), owner)
        pause_outside_a_write(owner, tmp_path / "runs.sqlite")  # alive, renewing nothing
        deadline = time.monotonic() + 30
        while not (shown := cli.json("show", "r5"))["orphaned"]:
            assert time.monotonic() < deadline, shown
            time.sleep(0.05)
        assert seconds(shown["lease_until"]) <= time.time()  # orphaned by its lease, not by death
        assert f":{owner.pid}:" in shown["owner"]
        assert "(lease ended " in cli("show", "r5").stdout

        gate.touch()
        resumed = cli("resume", "r5")
        assert resumed.returncode == 0, resumed.stderr
        assert "completed" in resumed.stdout

        owner.send_signal(signal.SIGCONT)  # it finishes superstep 2, and may commit nothing
        _, err = owner.communicate(timeout=30)
        assert owner.returncode != 0
        assert "Traceback" not in err
    finally:
        end(owner)
    assert cli.checkpoints("r5") == [0, 1, 2, 3]
    assert cli.json("show", "r5")["outputs"] == ["passed gate"]


def test_an_answer_to_an_answered_request_is_refused_in_one_line(tmp_path):
    cli = Cli(tmp_path)
    started = cli.json("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}')
    run_id = started["run_id"]
    request_id = started["pending_requests"][0]["request_id"]
    first = cli("respond", run_id, request_id, '{"ok": true, "note": "first [one]"}')
    assert first.returncode == 0, first.stderr
    before = cli.checkpoints(run_id)

    second = cli("respond", run_id, request_id, '{"ok": false, "note": "second"}')
    assert second.returncode == 2
    (line,) = second.stderr.strip().splitlines()
    assert f"request {request_id!r} of run {run_id!r} was already answered" in line
    assert "first [one]" in line  # the winning answer, markup-like text and all
    assert cli.checkpoints(run_id) == before
    assert cli.json("show", run_id)["outputs"][0]["note"] == "first [one]"


def test_the_sqlite_worker_parks_what_it_cannot_load_and_logs_each_line_once(tmp_path):
    cli = Cli(tmp_path, TREADLE_LEASE="1")
    gate = gate_of(tmp_path)
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r6")
    wait_for_file(gate.with_name("gate.reached"), owner)
    end(owner)

    # This worker serves cli_app only: it claims the orphan once its lease ends, and parks it.
    worker = cli.fork("worker", "--app", "cli_app", "--poll-interval", "0.05")
    try:
        deadline = time.monotonic() + 30
        while not (shown := cli.json("show", "r6"))["parked"]:
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, shown
            time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    finally:
        end(worker)
    assert worker.returncode == 0, err
    assert out == ""
    lines = err.strip().splitlines()
    assert lines, err
    assert all(ISO_LINE.match(line) for line in lines), err
    assert len([line for line in lines if "parked run r6" in line]) == 1, err
    assert len([line for line in lines if "worker serving" in line]) == 1, err
    assert len([line for line in lines if "worker stopped" in line]) == 1, err

    assert "no workflow 'gated' here" in shown["parked"]
    table = cli("runs").stdout
    assert "parked: no workflow 'gated' here" in table
    described = cli("show", "r6").stdout
    assert "parked: no workflow 'gated' here" in described
    assert "`treadle resume r6` takes it up" in described

    gate.touch()
    resumed = cli("resume", "r6")
    assert resumed.returncode == 0, resumed.stderr
    after = cli.json("show", "r6")
    assert (after["status"], after["parked"]) == ("completed", None)
    assert cli.checkpoints("r6") == [0, 1, 2, 3]


def test_only_treadle_cancel_cancels_and_the_owner_then_commits_nothing_more(tmp_path):
    cli = Cli(tmp_path)
    gate = gate_of(tmp_path)
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r7")
    try:
        wait_for_file(gate.with_name("gate.reached"), owner)
        cancelled = cli("cancel", "r7")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "run r7 cancelled" in cancelled.stdout
        gate.touch()  # the owner finishes superstep 2 and finds it may not commit it
        _, err = owner.communicate(timeout=30)
    finally:
        end(owner)
    assert owner.returncode == 1, err
    assert err.strip().splitlines()[-1] == "cancelled: run 'r7' was cancelled"
    shown = cli.json("show", "r7")
    assert (shown["status"], shown["orphaned"], shown["owner"]) == ("cancelled", False, None)
    assert cli.checkpoints("r7") == [0, 1]


# SIGHUP (the worker's terminal closed) killed it on the spot: no detach, no "worker stopped".
@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
def test_stopping_the_sqlite_worker_leaves_the_run_it_advances_resumable(tmp_path, stop):
    cli = Cli(tmp_path, TREADLE_LEASE="1")
    gate = gate_of(tmp_path)
    reached = gate.with_name("gate.reached")
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "r8")
    wait_for_file(reached, owner)
    end(owner)
    reached.unlink()

    worker = cli.fork("worker", "--app", "slow_app", "--poll-interval", "0.05")
    try:
        wait_for_file(reached, worker)  # the worker took the orphan over: superstep 2 again
        worker.send_signal(stop)
        _, err = worker.communicate(timeout=30)
    finally:
        end(worker)
    assert worker.returncode == 0, err
    assert "left run r8 as last committed" in err
    assert "worker stopped" in err
    shown = cli.json("show", "r8")
    assert (shown["status"], shown["orphaned"], shown["superstep"]) == ("running", True, 1)

    gate.touch()
    resumed = cli("resume", "r8")
    assert resumed.returncode == 0, resumed.stderr
    assert cli.checkpoints("r8") == [0, 1, 2, 3]


def test_a_run_whose_owner_was_killed_is_orphaned_after_its_lease_and_a_worker_completes_it(
    tmp_path,
):
    cli = Cli(tmp_path, TREADLE_LEASE="1")
    gate = gate_of(tmp_path)
    owner = cli.fork("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "k1")
    wait_for_file(gate.with_name("gate.reached"), owner)
    end(owner)  # SIGKILL in superstep 2

    (row,) = cli.json("runs")["runs"]
    assert (row["status"], row["orphaned"]) == ("running", True)
    assert "running (orphaned)" in cli("runs").stdout
    gate.touch()
    worker = cli.fork("worker", "--app", "slow_app", "--poll-interval", "0.05")
    try:
        deadline = time.monotonic() + 30
        while (shown := cli.json("show", "k1"))["status"] != "completed":
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, shown
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert shown["outputs"] == ["passed gate"]
    # No superstep committed twice: one checkpoint each, one chain.
    history = cli.json("history", "k1")["checkpoints"]
    assert [c["superstep"] for c in history] == [0, 1, 2, 3]
    parents = [c["parent_checkpoint_id"] for c in history[1:]]
    assert parents == [c["checkpoint_id"] for c in history[:-1]]


def test_a_worker_given_one_workflow_wakes_its_timers_on_time_and_parks_the_others(tmp_path):
    cli = Cli(tmp_path)
    for n in range(2):
        for name in ("nap_a", "nap_b"):
            started = cli("run", f"slow_app:{name}", "--input", "1", "--run-id", f"{name}-{n}")
            assert started.returncode == 3, started.stderr  # waiting on its timer
    due = {r["run_id"]: seconds(r["wake_at"]) for r in cli.json("runs")["runs"]}
    worker = cli.fork("worker", "--app", "slow_app:nap_a", "--poll-interval", "0.05")
    try:
        deadline = time.monotonic() + 30
        while True:
            rows = {r["run_id"]: r for r in cli.json("runs")["runs"]}
            a_done = all(rows[f"nap_a-{n}"]["status"] == "completed" for n in range(2))
            b_parked = all(rows[f"nap_b-{n}"]["parked"] for n in range(2))
            if a_done and b_parked:
                break
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, rows
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    for n in range(2):
        woke_at = cli.json("show", f"nap_a-{n}")["outputs"][0]
        assert due[f"nap_a-{n}"] <= woke_at <= due[f"nap_a-{n}"] + 10  # never early, not late
        b = rows[f"nap_b-{n}"]
        assert b["status"] == "waiting"  # parked as it was: nothing lost
        assert "no workflow 'nap_b' here" in b["parked"]
        assert len([line for line in err.splitlines() if f"parked run nap_b-{n}" in line]) == 1
