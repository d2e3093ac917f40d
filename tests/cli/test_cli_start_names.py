"""``treadle start`` by a name no other run of the store has: a note, not silence.

A run queued by name waits for a worker serving that name. The first run of
a name may be the first of a new workflow, or a typo nothing will ever
serve: ``treadle start`` queues it either way (a worker may come later),
prints its id alone on stdout, and says on stderr that no other run has
that name. A second run of the name, or a name the store knows, gets no note.
"""

from __future__ import annotations

import json

import pytest
from treadle_cli import Cli

from postgres import drop_schemas, fresh_schema, postgres_dsn

pytestmark = pytest.mark.integration

NOTE = "no other run of workflow 'countng' is in this store"


async def test_a_name_no_other_run_has_is_queued_with_a_note(tmp_path) -> None:
    dsn, schema = postgres_dsn(), fresh_schema()
    cli = Cli(tmp_path, TREADLE_STORE=dsn, TREADLE_SCHEMA=schema)
    try:
        typo = cli("start", "countng", "-i", "4", "--run-id", "t-1")
        assert typo.returncode == 0, typo.stderr
        assert typo.stdout.strip() == "t-1"  # stdout is the id alone, for scripts
        assert NOTE in " ".join(typo.stderr.split())
        assert "treadle worker" in typo.stderr

        as_json = cli("start", "other-name", "-i", "4", "--json")
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["workflow"] == "other-name"
        assert "no other run of workflow 'other-name'" in " ".join(as_json.stderr.split())

        again = cli("start", "countng", "-i", "5", "--run-id", "t-2")
        assert again.returncode == 0, again.stderr
        assert again.stderr == ""  # the name has a run already: no note

        same = cli("start", "countng", "-i", "4", "--run-id", "t-1")  # idempotent, by id
        assert (same.returncode, same.stdout.strip(), same.stderr) == (0, "t-1", "")
        statuses = {run["run_id"]: run["status"] for run in cli.json("runs")["runs"]}
        assert statuses["t-1"] == statuses["t-2"] == "pending"  # for a worker to take up
    finally:
        await drop_schemas([schema])


TICK_ID = "report@20260501T000200Z"  # the form of a schedule's tick's run


def test_the_command_line_refuses_a_run_id_of_a_schedules_form(tmp_path):
    cli = Cli(tmp_path)
    done = cli(
        "run", "cli_app:review", "--input", '{"topic": "t", "words": 1}', "--run-id", TICK_ID
    )
    assert done.returncode == 2
    assert "has the form SCHEDULE@TIME that schedule 'report' names its runs by" in done.stderr
    assert not cli.db.exists()  # refused before anything was made
