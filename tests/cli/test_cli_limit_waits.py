"""``treadle runs`` marks a run whose calls wait for a call limit, and its ``--json`` says what."""

from __future__ import annotations

import asyncio

from cli.treadle_cli import Cli
from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore


async def test_runs_lists_which_limit_a_run_waits_for_and_its_place_in_line(tmp_path):
    release, holding = asyncio.Event(), asyncio.Event()

    @executor(id="call", limits=["openai"])
    async def call(tenant: str, ctx: WorkflowContext) -> None:
        holding.set()
        await release.wait()
        ctx.yield_output(tenant)

    limit = CallLimit("openai", concurrency=1)
    workflow = WorkflowBuilder(call, name="asks", limits=[limit]).build()
    cli = Cli(tmp_path)
    store = SqliteStore(cli.db)
    try:
        runs = [asyncio.ensure_future(workflow.run("first", store=store, run_id="first"))]
        await asyncio.wait_for(holding.wait(), 60)
        for run_id in ("second", "third"):  # one after another: the line keeps their order
            runs.append(asyncio.ensure_future(workflow.run(run_id, store=store, run_id=run_id)))
            deadline = asyncio.get_running_loop().time() + 60
            while not await store.line_waits([run_id]):
                assert asyncio.get_running_loop().time() < deadline, f"{run_id} never waited"
                await asyncio.sleep(0.01)

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

        release.set()
        await asyncio.gather(*runs)
        rows = {r["run_id"]: r for r in cli.json("runs")["runs"]}
        assert [rows[r]["waiting_for"] for r in ("first", "second", "third")] == [[], [], []]
        assert "waiting" not in cli("runs").stdout
    finally:
        await store.close()
