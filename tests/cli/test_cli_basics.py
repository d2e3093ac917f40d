"""What a new user meets first: the version, a missing store, a run that cannot be saved."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import psycopg
import pytest
from treadle_cli import HERE, Cli

import treadle
from postgres import drop_schemas, fresh_schema, postgres_dsn

pytestmark = pytest.mark.integration


def test_version_prints_the_installed_version(tmp_path):
    done = Cli(tmp_path)("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"treadle {version('treadle')}"


def test_python_dash_m_treadle_is_the_command_where_its_script_is_not_on_the_path(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(treadle.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "treadle", "--version"],
        capture_output=True, text=True, check=False, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"treadle {version('treadle')}"
    refused = subprocess.run(
        [sys.executable, "-m", "treadle", "show", "r1", "--store", str(tmp_path / "no.sqlite")],
        capture_output=True, text=True, check=False, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "no store at" in refused.stderr


@pytest.mark.parametrize("command", [["runs"], ["show", "r1"], ["history", "r1"], ["cancel", "r1"]])
def test_a_read_never_creates_a_store_and_the_error_names_the_file(tmp_path, command):
    cli = Cli(tmp_path)
    done = cli(*command)
    assert done.returncode == 2
    assert f"no store at '{cli.db}'" in done.stderr
    assert "--store" in done.stderr
    assert not cli.db.exists()  # nothing was created


@pytest.mark.parametrize("command", [["runs"], ["show", "r1"], ["audit"], ["cancel", "r1"]])
def test_a_read_never_creates_a_postgresql_schema_and_the_error_names_it(tmp_path, command):
    # A misspelt TREADLE_SCHEMA: the command is refused, naming the schema, and the server
    # is left as it was (it used to create the schema and its tables, then list nothing).
    dsn, schema = postgres_dsn(), fresh_schema()
    done = Cli(tmp_path, TREADLE_STORE=dsn, TREADLE_SCHEMA=schema)(*command)
    try:
        assert done.returncode == 2, done.stdout
        assert f"no treadle store in schema '{schema}'" in done.stderr
        assert "TREADLE_SCHEMA" in done.stderr
        assert not asyncio.run(schema_exists(dsn, schema))  # nothing was created
    finally:
        asyncio.run(drop_schemas([schema]))


@pytest.mark.parametrize("command", [["runs"], ["worker", "--app", "cli_app"]])
def test_a_store_url_postgresql_cannot_read_is_one_line_that_hides_its_password(tmp_path, command):
    # A careless TREADLE_STORE (an unclosed IPv6 bracket): every command, the worker too,
    # printed a ValueError's traceback rather than the one line and exit 2 of a refusal.
    secret = "s3cret-of-the-dsn"  # noqa: S105 - what must not be shown
    done = Cli(tmp_path, TREADLE_STORE=f"postgresql://bob:{secret}@[::1:5432/test")(*command)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "not a PostgreSQL connection string" in done.stderr
    assert "TREADLE_STORE" in done.stderr
    assert secret not in done.stdout + done.stderr


@pytest.mark.parametrize("command", [("runs",), ("worker", "--app", "cli_app")])
def test_a_libpq_connection_string_is_refused_not_made_a_file_named_after_its_password(
    tmp_path, command
):
    # `host=... password=... dbname=...` was taken as a SQLite path: the worker made a
    # file (and a lock file beside it) whose name held the password.
    secret = "s3cret-of-the-conninfo"  # noqa: S105 - what must not be shown or stored
    conninfo = f"host=127.0.0.1 password={secret} dbname=x"
    # A process: without the check, the worker serves the file it made until stopped.
    done = Cli(tmp_path, process=True, TREADLE_STORE=conninfo)(*command)
    assert done.returncode == 2, done.stderr
    assert "reads as a PostgreSQL connection string" in done.stderr
    assert secret not in done.stdout + done.stderr
    assert not [p for p in tmp_path.rglob("*") if secret in p.name]


async def schema_exists(dsn: str, schema: str) -> bool:
    async with await psycopg.AsyncConnection.connect(dsn) as connection:
        query = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
        return await (await connection.execute(query, (schema,))).fetchone() is not None


def test_run_creates_the_store_it_is_given(tmp_path):
    cli = Cli(tmp_path)
    done = cli("run", "cli_app:long_job", "--input", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert cli.db.exists()
    assert cli("runs").returncode == 0


def test_a_run_whose_checkpoint_cannot_be_written_exits_as_failed_not_as_bad_input(tmp_path):
    done = Cli(tmp_path)("run", "unserializable_app:workflow", "--input", "1")
    assert done.returncode == 1, done.stderr
    assert "run failed" in done.stderr
    assert "Opaque" in done.stderr  # names what could not be stored


def test_an_answer_of_the_wrong_shape_names_each_field_and_changes_nothing(tmp_path):
    cli = Cli(tmp_path)
    asked = cli(
        "run", "cli_app:review", "--input", '{"topic": "tides", "words": 5}', "--run-id", "r1"
    )
    assert asked.returncode == 3, asked.stderr
    [request] = cli.json("show", "r1")["pending_requests"]
    before = cli.snapshot()
    done = cli("respond", "r1", request["request_id"], '{"ok": "yes", "notes": "typo"}')
    assert done.returncode == 2
    assert "ok: Input should be a valid boolean" in done.stderr
    assert "notes: no such field (it has: ok, note)" in done.stderr
    assert cli.snapshot() == before
    accepted = cli("respond", "r1", request["request_id"], '{"ok": true, "note": "fine"}')
    assert accepted.returncode == 0, accepted.stderr


def test_an_app_may_be_a_bare_module_with_one_workflow_or_a_file(tmp_path):
    cli = Cli(tmp_path)
    bare = cli("graph", "unserializable_app")
    assert bare.returncode == 0, bare.stderr
    assert '"unserializable"' in bare.stdout
    by_file = cli("graph", str(HERE / "unserializable_app.py"))
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stdout == bare.stdout
    # A run started from a file is found again by later commands, from anywhere.
    (tmp_path / "elsewhere").mkdir()
    app = tmp_path / "elsewhere" / "asking.py"
    app.write_text((HERE / "cli_app.py").read_text())
    asked = cli("run", f"{app}:review", "--input", '{"topic": "t", "words": 1}', "--run-id", "r1")
    assert asked.returncode == 3, asked.stderr
    [request] = cli.json("show", "r1")["pending_requests"]
    done = cli("respond", "r1", request["request_id"], '{"ok": true}')
    assert done.returncode == 0, done.stderr


def test_an_app_naming_no_single_workflow_says_what_it_holds_and_what_was_meant(tmp_path):
    cli = Cli(tmp_path)
    several = cli("graph", "cli_app")
    assert several.returncode == 2
    assert "holds 3 workflows" in several.stderr
    assert "cli_app:review" in several.stderr
    typo = cli("graph", "cli_app:reveiw")
    assert typo.returncode == 2
    assert "did you mean cli_app:review?" in typo.stderr


def test_an_input_that_does_not_fit_names_the_field(tmp_path):
    done = Cli(tmp_path)("run", "cli_app:review", "--input", '{"topic": "tides"}')
    assert done.returncode == 2
    assert "as Brief, words: Field required" in done.stderr


def shortest_prefix(chosen: str, ids: list[str]) -> str:
    """The shortest prefix of ``chosen``, 8 digits or more, that no other of ``ids`` has."""
    size = 8
    while any(other != chosen and other.startswith(chosen[:size]) for other in ids):
        size += 1
    return chosen[:size]


def test_a_checkpoint_is_named_by_a_prefix_of_its_id_or_by_its_superstep(tmp_path):
    cli = Cli(tmp_path)
    asked = cli("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}', "--run-id", "r1")
    assert asked.returncode == 3, asked.stderr
    checkpoints = cli.json("history", "r1")["checkpoints"]
    at_one = next(c["checkpoint_id"] for c in checkpoints if c["superstep"] == 1)
    # Ids start with the time they were made: the prefix naming one runs past it.
    prefix = shortest_prefix(at_one, [c["checkpoint_id"] for c in checkpoints])
    assert len(prefix) < len(at_one)
    by_prefix = cli("fork", "r1", "--checkpoint", prefix, "--json")
    assert by_prefix.returncode == 0, by_prefix.stderr
    assert json.loads(by_prefix.stdout)["checkpoint_id"] == at_one
    by_step = cli("fork", "r1", "--superstep", "1", "--json")
    assert by_step.returncode == 0, by_step.stderr
    assert json.loads(by_step.stdout)["checkpoint_id"] == at_one
    missing = cli("fork", "r1", "--superstep", "9")
    assert missing.returncode == 2
    assert "has no checkpoint at superstep 9 (its supersteps: [0, 1, 2]" in missing.stderr
    unknown = cli("fork", "r1", "--checkpoint", "zzz")
    assert unknown.returncode == 2
    assert "run 'r1' has no checkpoint whose id starts 'zzz' (its supersteps" in unknown.stderr
    both = cli("resume", "r1", "--checkpoint", prefix, "--superstep", "1")
    assert both.returncode == 2
    assert "not both" in both.stderr
    resumed = cli("resume", "r1", "--superstep", "1")
    assert resumed.returncode == 3, resumed.stderr  # it asks again, from superstep 1


def test_a_narrow_terminal_shows_run_and_checkpoint_ids_whole(tmp_path):
    """Ids made together share their first digits (the time): cut short, they would look alike."""
    cli = Cli(tmp_path)
    for _ in range(2):
        asked = cli("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}')
        assert asked.returncode == 3, asked.stderr
    run_ids = [run["run_id"] for run in cli.json("runs")["runs"]]
    assert len(run_ids) == 2  # made within the same minute: their first ten digits alike
    listed = cli.on_a_terminal("runs", columns=80)
    assert all(run_id in listed for run_id in run_ids), listed
    history = cli.on_a_terminal("history", run_ids[0], columns=80)
    checkpoint_ids = [c["checkpoint_id"] for c in cli.json("history", run_ids[0])["checkpoints"]]
    assert all(c in history for c in checkpoint_ids), history


@pytest.mark.parametrize("command", ["run", "start"])
def test_a_run_id_other_doors_could_not_name_is_refused_before_anything_is_made(tmp_path, command):
    cli = Cli(tmp_path)
    done = cli(command, "cli_app:long_job", "--input", "1", "--run-id", "a b")
    assert done.returncode == 2
    assert "run_id 'a b' must be 1 to 200 letters, digits or . _ ~ : @ + -" in done.stderr
    assert not cli.db.exists()


def test_treadle_fork_forks_a_cancelled_run(tmp_path):
    cli = Cli(tmp_path)
    started = cli.json("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}')
    assert cli("cancel", started["run_id"]).returncode == 0
    last = max(cli.checkpoints(started["run_id"]))
    forked = cli.json("fork", started["run_id"], "--superstep", str(last))
    assert forked["parent_run_id"] == started["run_id"]
    assert forked["pending_requests"], forked  # it waits for the answer, as its parent did
    assert cli.json("show", started["run_id"])["status"] == "cancelled"
