"""The SQLite ``treadle worker`` takes dead owners' runs over at once and says what it does.

Every test drives the real command in subprocesses on one SQLite file, with
a lease (60 s) far longer than any wait here: a run the worker takes up
before that lease runs out was taken from an owner it knew to be dead.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import TYPE_CHECKING

import pytest
from test_cli_ownership import ISO_LINE, end, gate_of, input_for
from treadle_cli import Cli

from gates import wait_for_file

if TYPE_CHECKING:
    import subprocess

pytestmark = pytest.mark.integration

LEASE = "60"


def stop(worker: subprocess.Popen[str]) -> str:
    """SIGTERM the worker and return what it logged; it must exit cleanly."""
    worker.send_signal(signal.SIGTERM)
    try:
        out, err = worker.communicate(timeout=30)
    finally:
        end(worker)
    assert (worker.returncode, out) == (0, ""), err
    assert all(ISO_LINE.match(line) for line in err.strip().splitlines()), err
    return err


def wait_for_status(cli: Cli, run_id: str, status: str, worker: subprocess.Popen[str]) -> float:
    """Seconds until the run has ``status`` (another process moves it: polled)."""
    began = time.monotonic()
    while (shown := cli.json("show", run_id))["status"] != status:
        if worker.poll() is not None:
            pytest.fail(f"the worker exited: {worker.communicate()}")
        assert time.monotonic() - began < 20, shown
        time.sleep(0.05)
    return time.monotonic() - began


def test_the_sqlite_worker_takes_over_at_once_a_run_whose_owner_process_was_killed(tmp_path):
    cli = Cli(tmp_path, TREADLE_LEASE=LEASE)
    gate = gate_of(tmp_path)
    owner = cli.start("run", "slow_app:gated", "--input", input_for(gate), "--run-id", "k1")
    wait_for_file(gate.with_name("gate.reached"), owner)
    worker = cli.start("worker", "--app", "slow_app", "--poll-interval", "0.05")
    try:
        time.sleep(0.5)  # the worker is up, and leaves the live owner's run alone
        assert cli.json("show", "k1")["owner"].split(":")[1] == str(owner.pid)
        end(owner)  # SIGKILL in superstep 2, holding a lease for another minute
        gate.touch()
        taken = wait_for_status(cli, "k1", "completed", worker)
    finally:
        err = stop(worker)
    assert taken < 10, err  # not a whole lease (60 s) later
    assert cli.json("show", "k1")["owner"] is None
    lines = err.splitlines()
    (gone,) = [line for line in lines if "run k1: its owner" in line]
    assert f":{owner.pid}:" in gone, gone
    assert "is dead" in gone, gone
    (claimed,) = [line for line in lines if "claimed run k1 " in line]
    assert "status running" in claimed, claimed
    assert "orphaned" in claimed, claimed
    assert any("run k1 completed" in line for line in lines), err
    # No superstep committed twice: the one it was killed in ran again, once.
    assert cli.checkpoints("k1") == [0, 1, 2, 3]


def test_the_sqlite_worker_logs_the_deadlines_it_fires(tmp_path):
    cli = Cli(tmp_path, TREADLE_LEASE=LEASE)
    started = cli("run", "slow_app:nap_a", "--input", "600", "--timeout", "1", "--run-id", "d1")
    assert started.returncode == 3, started.stderr  # waiting on a timer ten minutes away
    worker = cli.start("worker", "--app", "slow_app", "--poll-interval", "0.05")
    try:
        wait_for_status(cli, "d1", "failed", worker)
    finally:
        err = stop(worker)
    lines = err.splitlines()
    (claimed,) = [line for line in lines if "claimed run d1 " in line]
    assert "status waiting" in claimed, claimed
    assert "its deadline passed" in claimed, claimed
    (failed,) = [line for line in lines if "run d1 failed" in line]
    assert "RunTimeoutError" in failed, failed
    assert "deadline" in failed, failed


def _logged_until(worker: subprocess.Popen[str], needle: str) -> list[str]:
    """The worker's log, read on a thread, once a line holds ``needle``; then it is stopped."""
    lines: list[str] = []
    reading = threading.Thread(target=lambda: lines.extend(iter(worker.stderr.readline, "")))
    reading.start()
    try:
        began = time.monotonic()
        while not any(needle in line for line in lines):
            assert worker.poll() is None, lines
            assert time.monotonic() - began < 20, f"no line says {needle!r}: {lines}"
            time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        reading.join()
        end(worker)
    assert worker.returncode == 0, lines
    return lines


def test_a_second_sqlite_worker_on_one_file_says_another_serves_it(tmp_path):
    # It started without a word: safe (leases), but only adding waiting for the one writer.
    cli = Cli(tmp_path, TREADLE_LEASE=LEASE)
    marker = cli.db.with_name(cli.db.name + "-worker")

    def serving_alone(worker: subprocess.Popen[str]) -> None:
        began = time.monotonic()
        while not (marker.exists() and marker.read_text() == str(worker.pid)):
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() - began < 20, "no worker holds the file's marker"
            time.sleep(0.05)

    first = cli.start("worker", "--app", "slow_app", "--poll-interval", "0.05")
    try:
        serving_alone(first)
        second = cli.start("worker", "--app", "slow_app", "--poll-interval", "0.05")
        said = _logged_until(second, "another treadle worker")
    finally:
        alone = stop(first)
    assert any(f"another treadle worker (pid {first.pid}) serves" in line for line in said), said
    assert "another treadle worker" not in alone, alone
    third = cli.start("worker", "--app", "slow_app", "--poll-interval", "0.05")
    try:
        serving_alone(third)  # the first let go as it stopped: the third holds it
    finally:
        assert "another treadle worker" not in stop(third)
