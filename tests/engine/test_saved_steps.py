"""``ctx.saved_step``: a step's result checkpointed as it returns, replayed ever after."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from gates import wait_for_file
from treadle import (
    ExponentialBackoff,
    RetryPolicy,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

HERE = Path(__file__).parent


def calls(side: Path) -> dict[str, int]:
    with sqlite3.connect(side) as db:
        rows = db.execute("SELECT name, COUNT(*) FROM calls GROUP BY name").fetchall()
    return dict(rows)


def test_a_sigkill_between_two_saved_steps_repeats_neither_completed_one(tmp_path):
    store, side = tmp_path / "runs.sqlite", tmp_path / "side.sqlite"
    script = str(HERE / "saved_step_app.py")
    marker = Path(str(side) + ".shipping")
    child = subprocess.Popen([sys.executable, script, "run", str(store), str(side), "kill-me"])
    wait_for_file(marker, child, what="the second step started")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert calls(side) == {"charge": 1, "ship": 1}

    resumed = subprocess.run(
        [sys.executable, script, "resume", str(store), str(side), "kill-me"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    # The charge was saved before the kill: replayed, not made again. The
    # shipment was in flight: made again (once), then the mail, once.
    assert calls(side) == {"charge": 1, "ship": 2, "mail": 1}
    assert resumed.stdout.strip() == "['order-7', 'charge-1', 'ship-2', 'mail-1']"


async def test_a_retried_invocation_replays_its_saved_steps(tmp_path):
    charged: list[int] = []
    attempts: list[int] = []
    clock = FakeClock(start=1000.0)

    @executor(retry=RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(initial=1, jitter=0)))
    async def pay(order: str, ctx: WorkflowContext[str]) -> None:
        receipt = await ctx.saved_step("charge", lambda: charged.append(1) or f"r{len(charged)}")
        attempts.append(1)
        if len(attempts) < 3:
            msg = "the mail server is down"
            raise ConnectionError(msg)
        ctx.yield_output(receipt)

    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        workflow = WorkflowBuilder(pay, clock=clock).build()
        result = await clock.run(workflow.run("order", store=store))
        assert (result.outputs, len(charged), len(attempts)) == (["r1"], 1, 3)
    finally:
        await store.close()


async def test_saved_steps_outlive_a_durable_wait_and_go_when_the_invocation_completes(tmp_path):
    charged: list[str] = []

    @executor(id="pay")
    async def pay(order: str, ctx: WorkflowContext[str]) -> None:
        async def charge() -> str:
            charged.append(order)
            return f"charged {order}"

        first, second = await asyncio.gather(  # different keys may run at once
            ctx.saved_step("charge", charge), ctx.saved_step("quote", lambda: 42)
        )
        ok = await ctx.request({"confirm": first}, bool)
        ctx.yield_output([first, second, ok])

    workflow = WorkflowBuilder(pay).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        rested = await workflow.run("book", store=store, run_id="o1")
        restored = workflow.codec.decode(await store.load_checkpoint("o1"), run_id="o1")
        (steps,) = restored.waits.saved.values()
        assert steps == {"charge": "charged book", "quote": 42}
        (request,) = rested.pending_requests
        done = await workflow.respond("o1", {request.request_id: True}, store=store)
        assert done.outputs == [["charged book", 42, True]]
        assert charged == ["book"]  # the re-execution after the answer replayed it
        restored = workflow.codec.decode(await store.load_checkpoint("o1"), run_id="o1")
        assert restored.waits.saved == {}  # gone with the completed invocation
        again = await workflow.run("book", store=store)  # a new invocation: a new step
        assert (again.status.value, charged) == ("awaiting_input", ["book", "book"])
    finally:
        await store.close()


async def test_without_a_store_a_saved_step_runs_once_per_invocation():
    seen: list[str] = []

    @executor
    async def greet(name: str, ctx: WorkflowContext[str]) -> None:
        text = await ctx.saved_step("greet", lambda: seen.append(name) or f"hi {name}")
        ctx.yield_output(text)

    result = await WorkflowBuilder(greet).build().run("ada")
    assert (result.outputs, seen) == (["hi ada"], ["ada"])
