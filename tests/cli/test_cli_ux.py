"""What a new user meets first: the demo's last words, `run`'s refusals, `fork`'s advice,
the live view, the worker's log and `graph`'s pictures, each through the real command.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from treadle_cli import HERE, Cli

from postgres import drop_schemas, fresh_schema, postgres_dsn

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

ROOT = HERE.parents[1]
BRIEF = json.dumps({"topic": "otters", "words": 3})
ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 treadle\.\S+ [A-Z]+ ")


def awaiting_review(cli: Cli, run_id: str) -> str:
    """Start cli_app's review as ``run_id``; return the id of the request it waits on."""
    started = cli("run", "cli_app:review", "-i", BRIEF, "--run-id", run_id, "--json")
    assert started.returncode == 3, started.stderr
    (request,) = json.loads(started.stdout)["pending_requests"]
    return str(request["request_id"])


# -- the demo --------------------------------------------------------------------------


def test_the_demo_ends_with_time_travel_commands_that_run_as_printed(tmp_path):
    demo = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "document_review.py"), "demo.sqlite"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    printed = demo.stdout.splitlines()
    commands = [line.strip() for line in printed[printed.index("from a shell:") + 1 :]]
    assert [shlex.split(c)[:2] for c in commands] == [
        ["treadle", "history"],
        ["treadle", "fork"],
        ["treadle", "resume"],
    ]
    assert all("--store demo.sqlite" in c for c in commands)
    cli = Cli(tmp_path)

    def shell(command: str) -> subprocess.CompletedProcess[str]:
        return cli(*shlex.split(command, comments=True)[1:])

    history = shell(commands[0])
    assert history.returncode == 0, history.stderr
    assert len(re.findall(r"^ [0-9a-f]{32} ", history.stdout, re.MULTILINE)) == 10
    forked = shell(commands[1])
    assert forked.returncode == 0, forked.stderr
    fork_id = re.search(r"forked run ([0-9a-f]{32}) \(running\)", forked.stdout)
    assert fork_id is not None, forked.stdout
    resumed = shell(commands[2].replace("FORK_ID", fork_id[1]))
    assert resumed.returncode == 0, resumed.stderr
    assert "approved after 2 revision(s)" in resumed.stdout


# -- fork ------------------------------------------------------------------------------


def test_a_fork_awaiting_an_answer_says_how_to_answer_it_not_to_resume_it(tmp_path):
    cli = Cli(tmp_path)
    awaiting_review(cli, "r1")
    forked = cli("fork", "r1", "--superstep", "2")
    assert forked.returncode == 0, forked.stderr
    assert "(awaiting_input)" in forked.stdout
    assert "treadle resume" not in forked.stdout
    assert "ok: boolean (required)" in forked.stdout
    fork_id = re.search(r"forked run (\S+) ", forked.stdout)
    assert fork_id is not None, forked.stdout
    request_id = cli.json("show", fork_id[1])["pending_requests"][0]["request_id"]
    answer = f'answer: treadle respond {fork_id[1]} {request_id} \'{{"ok": true, "note": ""}}\''
    assert answer in forked.stdout

    as_json = cli.json("fork", "r1", "--superstep", "2")
    assert as_json["status"] == "awaiting_input"
    assert as_json["pending_requests"][0]["answer_schema"]["required"] == ["ok"]


def test_a_fork_mid_run_says_resume_and_one_of_an_ended_run_says_show(tmp_path):
    cli = Cli(tmp_path)
    done = cli("run", "cli_app:long_job", "-i", "1", "--run-id", "j1")
    assert done.returncode == 0, done.stderr
    mid = cli("fork", "j1", "--superstep", "0")
    assert mid.returncode == 0, mid.stderr
    new_id = re.search(r"forked run (\S+) \(running\)", mid.stdout)
    assert new_id is not None, mid.stdout
    assert f"continue it with: treadle resume {new_id[1]}" in mid.stdout
    # Until taken up it is a fork not started, not a run whose process died ("orphaned").
    listed = cli("runs").stdout
    assert "running (forked, not started)" in listed
    assert "orphaned" not in listed
    shown = cli("show", new_id[1]).stdout
    assert f"forked from j1; nobody has taken it up yet: treadle resume {new_id[1]}" in shown
    assert "its process died" not in shown
    ended = cli("fork", "j1", "--superstep", "1")
    assert "(completed)" in ended.stdout
    assert "treadle resume" not in ended.stdout
    assert "treadle show" in ended.stdout


# -- run: the input and the run id ----------------------------------------------------


def test_run_without_input_says_it_is_required_and_what_it_holds(tmp_path):
    cli = Cli(tmp_path)
    before = cli.snapshot()
    refused = cli("run", "cli_app:review")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: --input is required: the start executor 'write' accepts Brief")
    assert "topic: string (required), words: integer (required)" in line
    assert cli.snapshot() == before
    example = line.rpartition("e.g. ")[2]
    started = cli("run", "cli_app:review", *shlex.split(example))  # the example fits
    assert started.returncode == 3, started.stderr

    wrong = cli("run", "cli_app:review", "--input", '{"topic": "t"}')
    assert wrong.returncode == 2
    (line,) = wrong.stderr.strip().splitlines()
    assert "words: Field required" in line
    assert """e.g. --input '{"topic": "", "words": 0}'""" in line

    # A workflow whose start executor takes null runs without --input.
    optional = cli("run", "ux_app:optional")
    assert optional.returncode == 0, optional.stderr
    assert "output: null" in optional.stdout


@pytest.mark.parametrize("command", ["run", "start"])
def test_help_shows_no_null_default_for_input(tmp_path, command):
    shown = Cli(tmp_path, COLUMNS="200")(command, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "--input" in shown.stdout
    assert "null]" not in shown.stdout


def test_a_run_id_in_use_points_to_the_run_that_has_it(tmp_path):
    cli = Cli(tmp_path)
    awaiting_review(cli, "doc-4")
    before = cli.snapshot()
    again = cli("run", "cli_app:review", "-i", BRIEF, "--run-id", "doc-4")
    assert again.returncode == 2
    (line,) = again.stderr.strip().splitlines()
    assert "a run 'doc-4' exists already (review, awaiting_input at superstep 2)" in line
    assert "`treadle show doc-4`" in line
    assert "`treadle resume doc-4`" in line
    assert again.stdout == ""
    assert cli.snapshot() == before

    assert cli("run", "cli_app:long_job", "-i", "1", "--run-id", "done").returncode == 0
    ended = cli("run", "cli_app:long_job", "-i", "1", "--run-id", "done")
    assert ended.returncode == 2
    assert "`treadle fork done --superstep N`" in ended.stderr
    assert "treadle resume" not in ended.stderr


# -- the live view ---------------------------------------------------------------------


def test_run_refuses_a_numeric_string_and_a_misspelt_key_in_the_input(tmp_path):
    cli = Cli(tmp_path)
    before = cli.snapshot()
    numeric = cli("run", "cli_app:review", "--input", '{"topic": "t", "words": "12"}')
    assert numeric.returncode == 2, numeric.stdout
    assert "words: Input should be a valid integer" in numeric.stderr
    misspelt = cli("run", "cli_app:review", "--input", '{"topc": "t", "words": 12}')
    assert misspelt.returncode == 2, misspelt.stdout
    assert "topc: no such field" in misspelt.stderr
    assert "did you mean 'topic'" in misspelt.stderr
    assert cli.snapshot() == before
    fits = cli("run", "cli_app:review", "--input", '{"topic": "t", "words": 12}')
    assert fits.returncode == 3, fits.stderr


def test_the_live_view_fills_each_bar_when_its_executor_completes(tmp_path):
    done = Cli(tmp_path)("run", "ux_app:progress", "--input", "3")
    assert done.returncode == 0, done.stderr
    bars = [line for line in done.stdout.splitlines() if "━" in line]
    # partly reported 2 of 3 last, unsized reported no total: both completed.
    assert [line.split()[0] for line in bars] == ["partly:", "unsized:"]
    assert all(line.rstrip().endswith("100%") for line in bars), done.stdout


def test_retry_lines_say_the_attempt_and_the_wait_before_the_next(tmp_path):
    cli = Cli(tmp_path)
    recovered = cli("run", "ux_app:retrying", "--input", "2")
    assert recovered.returncode == 0, recovered.stderr
    lines = [line.strip() for line in recovered.stdout.splitlines()]
    assert lines[2:7] == [
        "✗ flaky: ConnectionError: flake 1 (attempt 1 of 3 failed; retrying in 0.05 s)",
        "↻ flaky: attempt 2 of 3",
        "✗ flaky: ConnectionError: flake 2 (attempt 2 of 3 failed; retrying in 0.05 s)",
        "↻ flaky: attempt 3 of 3",
        "✓ flaky",
    ]
    failed = cli("run", "ux_app:retrying", "--input", "5")
    assert failed.returncode == 1
    assert "✗ flaky: ConnectionError: flake 3 (attempt 3 of 3; no retry left)" in failed.stdout


# -- the worker's log --------------------------------------------------------------------


def stopped(worker: subprocess.Popen[str]) -> str:
    """SIGTERM the worker; its stderr, once it exited 0."""
    worker.send_signal(signal.SIGTERM)
    try:
        out, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, err
    assert out == ""
    return err


def wait_for_status(cli: Cli, run_id: str, status: str, worker: subprocess.Popen[str]) -> None:
    """Poll `treadle runs` until the worker brought ``run_id`` to ``status``."""
    deadline = time.monotonic() + 30
    while (rows := {r["run_id"]: r["status"] for r in cli.json("runs")["runs"]}).get(
        run_id
    ) != status:
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, rows
        time.sleep(0.05)


def test_a_run_resting_on_a_timer_names_the_sqlite_worker_that_wakes_it(tmp_path):
    cli = Cli(tmp_path)
    rested = cli("run", "ux_app:napper", "--input", "0.2", "--run-id", "nap-1")
    assert rested.returncode == 3, rested.stderr
    assert "next timer: " in rested.stdout
    assert "`treadle worker` wakes it" in rested.stdout
    worker = cli.start("worker", "--app", "ux_app", "--poll-interval", "0.05")
    try:
        wait_for_status(cli, "nap-1", "completed", worker)
    finally:
        err = stopped(worker)
    lines = err.strip().splitlines()
    assert all(ISO_LINE.match(line) for line in lines), err
    assert [line.split(" INFO ")[1] for line in lines] == [
        "worker serving progress, retrying, optional, napper",
        "claimed run nap-1 epoch 2 status waiting superstep 1 (its timer is due)",
        "run nap-1 completed at superstep 2",
        "worker stopped",
    ]


def test_the_postgresql_worker_logs_each_line_once_with_an_iso_time(tmp_path):
    """Also: `show` of a run queued by `start` says so (it raised JSONDecodeError)."""
    dsn, schema = postgres_dsn(), fresh_schema()
    cli = Cli(tmp_path, TREADLE_STORE=dsn, TREADLE_SCHEMA=schema)
    try:
        assert cli("start", "optional", "--input", "7", "--run-id", "w1").returncode == 0
        queued = cli("show", "w1")  # before any worker took it up: no graph stored yet
        assert queued.returncode == 0, queued.stderr
        assert "run 'w1' is queued: no worker has taken it up yet" in queued.stdout
        assert "checkpoint none yet" in queued.stdout
        worker = cli.start("worker", "--app", "ux_app", "--poll-interval", "0.05")
        try:
            wait_for_status(cli, "w1", "completed", worker)
        finally:
            err = stopped(worker)
    finally:
        import asyncio  # noqa: PLC0415 - only to drop the schema

        asyncio.run(drop_schemas([schema]))
    lines = err.strip().splitlines()
    assert all(ISO_LINE.match(line) for line in lines), err
    said = [line.split(" INFO ", 1)[1] for line in lines]
    assert len(said) == len(set(said)), err  # no line twice
    assert len([s for s in said if s.startswith("claimed run w1 ")]) == 1, err
    assert len([s for s in said if s.startswith("released run w1 ")]) == 1, err
    serving = re.fullmatch(r"worker \S+ serving (.+)", said[0])
    assert serving is not None, err
    hosted = set(serving[1].split("; "))
    assert hosted == {"progress v1", "retrying v1", "optional v1", "napper v1"}
    assert said[-1].endswith("stopped"), err


# -- graph pictures --------------------------------------------------------------------


def graph_cli(tmp_path: Path, **env: str) -> Cli:
    cli = Cli(tmp_path, **env)
    cli.env["PYTHONPATH"] = str(ROOT / "examples")
    return cli


def test_graph_draws_png_and_svg_with_graphviz(tmp_path):
    assert shutil.which("dot"), "Graphviz's dot is missing: run `make renderers`"
    cli = graph_cli(tmp_path)
    png = cli("graph", "every_edge_kind:workflow", "--format", "png", "-o", "g.png")
    assert png.returncode == 0, png.stderr
    assert "wrote g.png (png)" in png.stdout
    assert (tmp_path / "g.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    svg = cli("graph", "every_edge_kind:workflow", "--format", "svg")
    assert svg.returncode == 0, svg.stderr
    assert "<svg" in svg.stdout
    assert "fan-in" in svg.stdout.replace("&#45;", "-")
    by_suffix = cli("graph", "every_edge_kind:workflow", "-o", "g.dot")
    assert by_suffix.returncode == 0, by_suffix.stderr
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    no_file = cli("graph", "every_edge_kind:workflow", "--format", "png")
    assert no_file.returncode == 2
    assert "add -o FILE.png" in no_file.stderr
    unknown = cli("graph", "every_edge_kind:workflow", "--format", "gif")
    assert unknown.returncode == 2
    assert "use mermaid, dot, png, svg" in unknown.stderr


def test_graph_says_what_to_install_when_dot_is_missing(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    cli = graph_cli(tmp_path, PATH=str(bare))
    refused = cli("graph", "every_edge_kind:workflow", "--format", "png", "-o", "g.png")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "renders with Graphviz's `dot`, which is not on PATH" in line
    assert "apt-get install graphviz" in line
    assert "--format dot" in line
    assert not (tmp_path / "g.png").exists()
    assert list(bare.iterdir()) == []


def test_the_answer_line_a_fork_prints_answers_the_fork(tmp_path):
    cli = Cli(tmp_path)
    awaiting_review(cli, "r1")
    forked = cli("fork", "r1", "--superstep", "2")
    answer = re.search(r"answer: (treadle respond \S+ \S+ .+)$", forked.stdout, re.MULTILINE)
    assert answer is not None, forked.stdout
    answered = cli(*shlex.split(answer[1])[1:])  # the line as printed, example answer and all
    assert answered.returncode == 0, answered.stderr
    assert '"approved": true' in answered.stdout


def test_show_of_a_run_a_worker_failed_before_its_first_checkpoint_says_so(tmp_path):
    # It said "run 'w2' is queued: no worker has taken it up yet" of a run a worker had taken
    # up and failed (its input did not fit: `treadle start` has no code to check it with).
    dsn, schema = postgres_dsn(), fresh_schema()
    cli = Cli(tmp_path, TREADLE_STORE=dsn, TREADLE_SCHEMA=schema)
    try:
        assert cli("start", "napper", "--input", '"soon"', "--run-id", "w2").returncode == 0
        worker = cli.start("worker", "--app", "ux_app", "--poll-interval", "0.05")
        try:
            wait_for_status(cli, "w2", "failed", worker)
        finally:
            stopped(worker)
        shown = cli("show", "w2")
    finally:
        import asyncio  # noqa: PLC0415 - only to drop the schema

        asyncio.run(drop_schemas([schema]))
    assert shown.returncode == 0, shown.stderr
    assert "is queued" not in shown.stdout
    assert "run 'w2' failed before its first checkpoint" in shown.stdout
    assert "the input does not fit the start executor" in shown.stdout


def test_a_worker_refused_its_port_or_lease_says_so_in_one_line(tmp_path):
    # A metrics port in use was a 68-line traceback ending in OSError; TREADLE_LEASE=-1 a
    # 68-line ExceptionGroup around the right one-line error.
    import socket  # noqa: PLC0415 - only to hold a port

    cli = Cli(tmp_path, TREADLE_STORE=str(tmp_path / "w.sqlite"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = cli("worker", "--app", "ux_app", "--metrics-port", str(port))
    assert taken.returncode == 2, taken.stderr
    said = taken.stderr.strip().splitlines()
    assert said[-1] == f"error: cannot serve metrics on 127.0.0.1:{port}: Address already in use"
    assert "Traceback" not in taken.stderr
    leased = Cli(tmp_path, TREADLE_STORE=str(tmp_path / "w.sqlite"), TREADLE_LEASE="-1")
    refused = leased("worker", "--app", "ux_app")
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: TREADLE_LEASE must be a positive number of seconds, got '-1'"
    )


def test_a_worker_given_a_database_that_does_not_exist_says_so_and_stops(tmp_path):
    # It logged four warnings a round, for ever: the server had refused it for good.
    url = "postgresql://postgres@127.0.0.1:5432/treadle_no_such_database"
    refused = Cli(tmp_path, TREADLE_STORE=url)("worker", "--app", "ux_app")
    assert refused.returncode == 2, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot use the store: PostgreSQL store ")
    assert 'database "treadle_no_such_database" does not exist' in last
    assert "Traceback" not in refused.stderr
    assert "WARNING" not in refused.stderr  # nothing served, nothing retried


@pytest.mark.parametrize(
    "command",
    [["worker", "--app", "ux_app"], ["serve", "--app", "ux_app", "--port", "0"]],
    ids=["worker", "serve"],
)
@pytest.mark.parametrize(
    "store",
    [
        "{tmp}/no/such/folder/runs.sqlite",
        "postgresql://postgres@127.0.0.1:5432/treadle_no_such_database",
        "postgresql://bob:s3cret-pw@[::1:5432/test",
    ],
    ids=["sqlite-no-folder", "postgres-no-database", "postgres-unreadable-url"],
)
def test_a_store_that_can_never_be_used_stops_worker_and_serve_in_one_line(
    tmp_path, command, store
):
    # Retrying cannot mend any of these: the worker on SQLite and the server on either store
    # logged the same warnings each round for ever (the server after printing its address and
    # token, as if serving), or (a URL libpq cannot read) the server ended in a traceback.
    url = store.format(tmp=tmp_path)
    refused = Cli(tmp_path, process=True, TREADLE_STORE=url)(*command)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in refused.stderr
    assert "WARNING" not in refused.stderr  # nothing served, nothing retried
    assert "token=" not in refused.stdout  # the server never said it served
    assert "s3cret-pw" not in refused.stdout + refused.stderr
