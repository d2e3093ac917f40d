"""Following runs from the command line through their durable event log: watch, logs, export,
--follow. Real `treadle` processes; Ctrl-C on `watch` in a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest
from treadle_cli import TREADLE, Cli

from gates import wait_for_file
from postgres import drop_schemas, fresh_schema, postgres_dsn

pytestmark = pytest.mark.integration

DEADLINE = 40.0  # seconds a test waits for a process to reach a point before it fails


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours and cursor moves


class Terminal:
    """`treadle ARGS` on a pseudo-terminal: what it prints is read as a person would see it
    (its colours and cursor moves left out)."""

    def __init__(self, cli: Cli, *args: str) -> None:
        self.leader, follower = pty.openpty()
        self.process = subprocess.Popen(
            [TREADLE, *args],
            cwd=cli.cwd,
            env=cli.env,
            stdin=follower,
            stdout=follower,
            stderr=follower,
            start_new_session=True,  # its own terminal: Ctrl-C reaches it alone
        )
        os.close(follower)
        self.seen = ""

    def read_until(self, text: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while text not in self.seen:
            assert time.monotonic() < deadline, self.seen
            ready, _, _ = select.select([self.leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(self.leader, 4096)
                except OSError:  # the process closed the terminal
                    chunk = b""
                assert chunk or self.process.poll() is None, self.seen
                self.seen += ANSI.sub("", chunk.decode(errors="replace"))
        return self.seen

    def close(self) -> int:
        code = self.process.wait(timeout=DEADLINE)
        self.read_rest()
        os.close(self.leader)
        return code

    def read_rest(self) -> None:
        while select.select([self.leader], [], [], 0.1)[0]:
            try:
                chunk = os.read(self.leader, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.seen += ANSI.sub("", chunk.decode(errors="replace"))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=DEADLINE)


def test_watch_follows_a_run_another_process_advances_and_ctrl_c_leaves_it_alone(tmp_path):
    cli = Cli(tmp_path)
    gate = tmp_path / "gate"
    running = cli.start("run", "slow_app:gated", "-i", json.dumps(str(gate)), "--run-id", "g-1")
    try:
        wait_for_file(tmp_path / "gate.reached", running)  # mid-superstep 2, in another process
        [before] = cli.json("runs")["runs"]
        assert (before["status"], before["owner"] is not None) == ("running", True)

        watching = Terminal(cli, "watch", "g-")  # a prefix names the run
        try:
            watching.read_until("✓ begin")  # superstep 1, from the log; superstep 2 not committed
            watching.process.send_signal(signal.SIGINT)
            assert watching.close() == 130
        finally:
            watching.kill()
        assert "stopped watching run g-1; the run was not touched" in watching.seen
        [after] = cli.json("runs")["runs"]
        assert (after["status"], after["owner"]) == ("running", before["owner"])

        live = cli.start("watch", "g-1")  # follows on, live, to the end
        assert live.stdout is not None
        assert "superstep 1: begin" in live.stdout.readline()
        gate.touch()
        shown, _ = live.communicate(timeout=DEADLINE)
        assert live.returncode == 0  # the run completed
        for line in (
            "superstep 2: hold",
            "superstep 3: finish",
            'output from finish: "passed gate"',
        ):
            assert line in shown
        assert shown.rstrip().endswith('run g-1: completed\n  output: "passed gate"')
    finally:
        gate.touch()
        out, errors = running.communicate(timeout=DEADLINE)
    assert running.returncode == 0, errors  # watching never detached nor cancelled it
    assert "passed gate" in out


def test_logs_prints_every_event_with_each_failure_s_full_traceback(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "watch_app:failing", "-i", '"x1"', "--run-id", "f-1").returncode == 1
    done = cli("logs", "f-1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("run f-1 (failing): failed")
    assert done.stdout.count("executor_failed fragile: ValueError: invalid literal") == 2
    assert "(attempt=1, retrying=True)" in done.stdout
    assert done.stdout.count(", in parse_amount") == 2  # each attempt's traceback, to its frame
    assert done.stdout.count("    return int(text)") == 2

    lines = [json.loads(line) for line in cli("logs", "f-1", "--json").stdout.splitlines()]
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    failures = [e for e in lines if e["type"] == "executor_failed"]
    assert [f["data"]["attempt"] for f in failures] == [1, 2]
    assert "in parse_amount" in failures[-1]["data"]["error"]["traceback"]
    assert lines[-1]["type"] == "status_changed"
    assert lines[-1]["data"]["status"] == "failed"
    after = cli("logs", "f-1", "--json", "--after", "5").stdout
    later = [json.loads(line) for line in after.splitlines()]
    assert [e["seq"] for e in later] == list(range(6, len(lines) + 1))

    watched = cli("watch", "f-1")  # an ended run: its whole log, then where it stands
    assert watched.returncode == 1
    assert watched.stdout.count(", in parse_amount") == 1  # the failure that ended it
    assert "↻ fragile: attempt 2" in watched.stdout
    assert "error: ExecutorFailedError: executor 'fragile' failed" in watched.stdout


def test_export_writes_the_run_its_checkpoints_and_its_events_as_json_lines(tmp_path):
    cli = Cli(tmp_path)
    assert (
        cli(
            "run", "cli_app:review", "-i", '{"topic": "t", "words": 1}', "--run-id", "e-1"
        ).returncode
        == 3
    )
    done = cli("export", "e-")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [r.pop("record") for r in records]
    checkpoints = cli.json("history", "e-1")["checkpoints"]
    events = cli("logs", "e-1", "--json").stdout.splitlines()
    assert kinds == ["run"] + ["checkpoint"] * len(checkpoints) + ["event"] * len(events)
    assert records[0]["run_id"] == "e-1"
    assert records[0]["status"] == "awaiting_input"
    assert [r["checkpoint_id"] for r in records[1 : 1 + len(checkpoints)]] == [
        c["checkpoint_id"] for c in checkpoints
    ]
    assert records[1 + len(checkpoints) :] == [json.loads(e) for e in events]

    target = tmp_path / "e-1.jsonl"
    to_file = cli("export", "e-1", "-o", str(target))
    assert to_file.returncode == 0, to_file.stderr
    assert to_file.stdout == ""
    assert target.read_text() == done.stdout
    assert cli("export", "nope").returncode == 2


def test_resume_and_respond_with_follow_draw_the_run_as_it_commits(tmp_path):
    cli = Cli(tmp_path)
    started = cli("run", "watch_app:counting", "-i", "3", "--run-id", "c-1", "--follow")
    assert started.returncode == 3, started.stderr  # `run` draws live anyway; --follow is accepted
    quiet = cli("resume", "c-1", "--superstep", "1")
    assert quiet.returncode == 3, quiet.stderr
    assert "superstep 2" not in quiet.stdout
    followed = cli("resume", "c-1", "--superstep", "1", "--follow")
    assert followed.returncode == 3, followed.stderr
    assert followed.stdout.index("superstep 2: confirm") < followed.stdout.index(
        "run c-1: awaiting_input"
    )
    [request] = cli.json("show", "c-1")["pending_requests"]
    answered = cli("respond", "c-1", request["request_id"], "true", "--follow")
    assert answered.returncode == 0, answered.stderr
    drawn = [
        "superstep 3: confirm",
        "✓ confirm",
        "output from confirm: 3",
        "completed after superstep 3",
    ]
    at = [answered.stdout.index(line) for line in drawn]
    assert at == sorted(at)
    assert answered.stdout.index("run c-1: completed") > at[-1]


async def test_start_and_respond_follow_a_run_a_worker_runs_on_postgresql(tmp_path):
    dsn, schema = postgres_dsn(), fresh_schema()
    cli = Cli(tmp_path, TREADLE_STORE=dsn, TREADLE_SCHEMA=schema)
    worker = cli.start("worker", "--app", "watch_app", "--poll-interval", "0.05")
    try:
        started = cli("start", "counting", "-i", "4", "--run-id", "p-1", "--follow")
        assert started.returncode == 3, started.stderr  # it rests, awaiting the answer
        for line in ("superstep 1: count", '  count: {"counted": 4}', "superstep 2: confirm"):
            assert line in started.stdout
        assert "the answer is boolean" in started.stdout
        request_id = cli.json("show", "p-1")["pending_requests"][0]["request_id"]
        answered = cli("respond", "p-1", request_id, "true", "--follow")
        assert answered.returncode == 0, answered.stderr  # the worker applied it; we followed
        assert "output from confirm: 4" in answered.stdout
        assert "run p-1: completed" in answered.stdout
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=DEADLINE)
        await drop_schemas([schema])


def test_watch_shows_the_superstep_under_way_in_another_process(tmp_path):
    """The log holds a superstep's events once it commits; meanwhile `watch` says which
    executors run in it and for how long, on a terminal, as `run` does."""
    cli = Cli(tmp_path)
    gate = tmp_path / "gate"
    running = cli.start("run", "slow_app:gated", "-i", json.dumps(str(gate)), "--run-id", "u-1")
    watching = None
    try:
        wait_for_file(tmp_path / "gate.reached", running)  # superstep 2 under way, uncommitted
        watching = Terminal(cli, "watch", "u-1", "--app", "slow_app:gated")
        watching.read_until("superstep 2 running: hold")
        seen = watching.read_until(" s")  # and for how long, in seconds
        assert re.search(r"superstep 2 running: hold\s+\d+ s", seen), seen
        gate.touch()
        watching.read_until("run u-1: completed")
        assert watching.close() == 0
    finally:
        gate.touch()
        if watching is not None:
            watching.kill()
        running.communicate(timeout=DEADLINE)
    # Once committed, the superstep is drawn from the log as `run` draws it.
    drawn = ["superstep 2: hold", "✓ hold", "superstep 3: finish", "run u-1: completed"]
    at = [watching.seen.index(line) for line in drawn]
    assert at == sorted(at), watching.seen


def test_watch_until_end_follows_a_run_through_its_rest_to_its_end(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "watch_app:counting", "-i", "2", "--run-id", "a-1").returncode == 3
    plain = cli("watch", "a-1")  # without it: watching ends at the rest
    assert plain.returncode == 3
    following = cli.start("watch", "a-1", "--until-end")
    try:
        [request] = cli.json("show", "a-1")["pending_requests"]
        # Answered only once the watcher has drawn the rest, or it could read the run
        # already answered (a command in this process answers within milliseconds).
        assert following.stdout is not None
        before = ""
        while "treadle respond" not in before and (line := following.stdout.readline()):
            before += line
        deadline = time.monotonic() + DEADLINE
        while following.poll() is None and time.monotonic() < deadline:
            answered = cli("respond", "a-1", request["request_id"], "true")
            if answered.returncode == 0:
                break
            time.sleep(0.1)
        after, errors = following.communicate(timeout=DEADLINE)
        shown = before + after
    finally:
        if following.poll() is None:
            following.kill()
            following.communicate()
    assert following.returncode == 0, errors  # it followed on to the end: completed
    drawn = [
        "awaiting_input after superstep 2",
        f"treadle respond a-1 {request['request_id']}",
        "output from confirm: 2",
        "completed after superstep 3",
        "run a-1: completed",
    ]
    at = [shown.index(line) for line in drawn]
    assert at == sorted(at), shown
