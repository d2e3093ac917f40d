"""``treadle runs`` marks a run whose calls wait for a call limit, and its ``--json`` says what."""

from __future__ import annotations

from apps.held_line import HeldLine
from cli.treadle_cli import Cli
from treadle.stores import SqliteStore


async def test_runs_lists_which_limit_a_run_waits_for_and_its_place_in_line(tmp_path):
    line = HeldLine()
    cli = Cli(tmp_path)
    store = SqliteStore(cli.db)
    try:
        await line.queue(store, {"first": "first", "second": "second", "third": "third"})

        listed = cli("runs")
        assert listed.returncode == 0, listed.stderr
        lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
        assert "waiting" not in lines["first"]  # it holds the slot
        assert "(waiting: openai #1)" in lines["second"]
        assert "(waiting: openai #2)" in lines["third"]

        rows = {r["run_id"]: r for r in cli.json("runs")["runs"]}
        assert rows["first"]["waiting_for"] == []
        [wait] = rows["third"]["waiting_for"]
        assert (wait["limit"], wait["position"], wait["next_slot_at"]) == ("openai", 1, None)
        assert wait["call"].startswith("third/")

        await line.finish()
        rows = {r["run_id"]: r for r in cli.json("runs")["runs"]}
        assert [rows[r]["waiting_for"] for r in ("first", "second", "third")] == [[], [], []]
        assert "waiting" not in cli("runs").stdout
    finally:
        await store.close()
