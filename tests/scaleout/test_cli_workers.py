"""The command line against PostgreSQL: queue, answer and cancel runs that workers run."""

from __future__ import annotations

import json
import os
import subprocess
from typing import TYPE_CHECKING

from processes import HERE, TREADLE

import forked
import treadle.workers
from treadle import RunStatus
from treadle._scaleout._apps import load_app
from treadle.workers import Worker

if TYPE_CHECKING:
    from pathlib import Path

    from treadle.stores import PostgresStore


def cli(store: str, schema: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``treadle args`` in a process forked with the command line imported (tests/forked.py)."""
    env = {**os.environ, "TREADLE_STORE": store, "TREADLE_SCHEMA": schema, "PYTHONPATH": str(HERE)}
    argv = [TREADLE, *args]
    with forked.start("treadle._cli._app:main", env=env, argv=argv) as child:
        return subprocess.CompletedProcess(argv, *child.finish(60))


def console_script(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``treadle args`` as the installed console script: a Python start of its own."""
    env = {**os.environ, "TREADLE_STORE": store, "PYTHONPATH": str(HERE)}
    return subprocess.run(
        [TREADLE, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


async def test_start_respond_and_cancel_from_the_command_line_go_through_workers(
    dsn: str, schema: str, store: PostgresStore
) -> None:
    started = cli(dsn, schema, "start", "asker", "-i", '"colour?"', "--run-id", "q1", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"run_id": "q1", "workflow": "asker"}
    again = cli(dsn, schema, "start", "asker", "-i", '"colour?"', "--run-id", "q1")
    assert (again.returncode, again.stdout.strip()) == (0, "q1")  # idempotent
    assert cli(dsn, schema, "start", "asker", "-i", '"size?"', "--run-id", "q2").returncode == 0

    serving = load_app("scale_app")  # as `treadle worker --app scale_app` loads it
    assert await Worker(store, serving, lease=2, poll_interval=0.05).run_until_idle() == 2

    shown = json.loads(cli(dsn, schema, "show", "q1", "--json").stdout)
    (request,) = shown["pending_requests"]
    answered = cli(dsn, schema, "respond", "q1", request["request_id"], '"blue"', "--json")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == {"run_id": "q1", "delivered": True}
    assert cli(dsn, schema, "cancel", "q2").returncode == 0
    assert (await store.get_run("q1")).status == "awaiting_input"  # no worker ran yet

    assert await Worker(store, serving, lease=2, poll_interval=0.05).run_until_idle() == 1
    client = treadle.workers.Client(store, serving)
    done = await client.result("q1")
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, ["colour? -> blue"])
    assert (await client.get("q2")).status == "cancelled"


def test_start_refuses_an_embedded_store_naming_the_command_to_use(tmp_path: Path) -> None:
    refused = console_script(str(tmp_path / "x.sqlite"), "start", "asker", "-i", '"colour?"')
    assert refused.returncode == 2
    assert "use treadle run" in refused.stderr
