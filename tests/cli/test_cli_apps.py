"""Which workflow an app path names, the same for every command.

An app is ``pkg.module[:workflow]`` or ``path/app.py[:workflow]``. A module
or file may hold several versions of one workflow (docs/versions.md keeps
version 1 beside version 2): ``run``, ``graph``, ``check-upgrade``, ``serve``,
``worker`` and ``Runtime.start`` all take the newest version of that one
name; an app holding workflows of several names must name one. A file path
is accepted by every command that takes an app, ``worker`` included.
"""

from __future__ import annotations

import signal
import textwrap
import time
from typing import TYPE_CHECKING

import pytest
from treadle_cli import Cli

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

TWO_VERSIONS = """
from treadle import WorkflowBuilder, WorkflowContext, executor


@executor(id="note")
async def note_v1(amount: int, ctx: WorkflowContext) -> None:
    ctx.yield_output({"amount": amount, "version": 1})


@executor(id="note")
async def note(amount: int, ctx: WorkflowContext) -> None:
    ctx.yield_output({"amount": amount, "version": 2})


expense_v1 = WorkflowBuilder(start=note_v1, name="expense", version=1).build()
expense = WorkflowBuilder(start=note, name="expense", version=2).build()
"""

NAPPING = """
from treadle import WorkflowBuilder, WorkflowContext, executor


@executor
async def nap(seconds: float, ctx: WorkflowContext) -> None:
    await ctx.sleep(seconds)
    ctx.yield_output("woke")


napping = WorkflowBuilder(start=nap, name="napping").build()
"""


def write_app(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.parametrize("app", ["expense.py", "expense"])
def test_run_and_graph_take_the_newest_version_of_the_one_workflow_an_app_holds(tmp_path, app):
    cli = Cli(tmp_path)
    write_app(tmp_path, "expense.py", TWO_VERSIONS)
    done = cli("run", app, "--input", "12", "--run-id", "e1")
    assert done.returncode == 0, done.stderr
    shown = cli.json("show", "e1")
    assert shown["outputs"] == [{"amount": 12, "version": 2}]
    assert shown["version"] == 2
    drawn = cli("graph", app)
    assert drawn.returncode == 0, drawn.stderr
    assert "note" in drawn.stdout


def test_an_app_holding_workflows_of_several_names_must_name_one(tmp_path):
    cli = Cli(tmp_path)
    write_app(tmp_path, "expense.py", TWO_VERSIONS)
    write_app(tmp_path, "both.py", TWO_VERSIONS + NAPPING)
    refused = cli("run", "both.py", "--input", "1")
    assert refused.returncode == 2
    assert "holds 2 workflows at its top level" in refused.stderr
    assert "both.py:expense (versions 1, 2)" in refused.stderr
    assert "both.py:napping" in refused.stderr
    # 'both.py:' names no workflow (it was taken as the whole module): a typo, refused.
    empty = cli("run", "both.py:", "--input", "1")
    assert empty.returncode == 2
    assert "'both.py:' is not an app: write pkg.module:workflow" in empty.stderr
    named = cli("run", "both.py:expense_v1", "--input", "1", "--run-id", "old")
    assert named.returncode == 0, named.stderr
    assert cli.json("show", "old")["version"] == 1


def test_worker_takes_a_file_path_as_run_does(tmp_path):
    cli = Cli(tmp_path)
    write_app(tmp_path, "nap.py", NAPPING)
    resting = cli("run", "nap.py", "--input", "0.2", "--run-id", "n1")
    assert resting.returncode == 3, resting.stderr
    worker = cli.start("worker", "--app", "nap.py", "--poll-interval", "0.05")
    try:
        deadline = time.monotonic() + 30
        while cli.json("show", "n1")["status"] != "completed":
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker never woke the run"
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "worker serving napping" in err
    assert cli.json("show", "n1")["outputs"] == ["woke"]
