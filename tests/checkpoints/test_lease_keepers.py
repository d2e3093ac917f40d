"""Leases are kept by whoever drives runs: stopping one driver detaches its runs only.

Two drivers share one process and one store; each drives runs of its own.
Stopping one leaves its runs as last committed, their leases given up (a
``resume`` takes each up from its last checkpoint), while the other's runs
keep their leases renewed past several lease lengths, commit and end.
"""

from __future__ import annotations

import asyncio
import collections

import pytest

from treadle import RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle._operations._background import open_new
from treadle._server._driver import Driver
from treadle._values._actors import Actor
from treadle.errors import RunBusyError
from treadle.stores import SqliteStore

LEASE = 0.3
STEPS = 3


class Gates:
    """One queue of tokens a run: each superstep of run ``name`` takes one to go on."""

    def __init__(self) -> None:
        self.tokens: collections.defaultdict[str, asyncio.Queue[None]] = collections.defaultdict(
            asyncio.Queue
        )
        self.reached: collections.defaultdict[str, asyncio.Queue[int]] = collections.defaultdict(
            asyncio.Queue
        )

    def let(self, name: str, steps: int = 1) -> None:
        for _ in range(steps):
            self.tokens[name].put_nowait(None)


async def opened(tmp_path) -> SqliteStore:
    """A store whose file is made already: its first write then takes no longer than any."""
    store = SqliteStore(tmp_path / "runs.sqlite", lease=LEASE)
    await store.list_runs()
    return store


def stepping(store: SqliteStore, gates: Gates, *, nap_first: bool = False):
    """Run ``(name, 0)`` takes STEPS supersteps, each waiting for a token of its own.

    With ``nap_first`` it first rests on a timer due at once, for a timer service to take up.
    """

    @executor(id="tick")
    async def tick(message: tuple[str, int], ctx: WorkflowContext) -> None:
        name, count = message
        await gates.reached[name].put(count)
        await gates.tokens[name].get()
        if count + 1 < STEPS:
            ctx.send_message((name, count + 1))
        else:
            ctx.yield_output(name)

    @executor(id="nap")
    async def nap(message: tuple[str, int], ctx: WorkflowContext) -> None:
        await ctx.sleep(0)
        ctx.send_message(message)

    if not nap_first:
        builder = WorkflowBuilder(start=tick, store=store, name="stepping")
    else:
        builder = WorkflowBuilder(start=nap, store=store, name="napping").add_edge(nap, tick)
    return builder.add_edge(tick, tick).build()


async def settled(store: SqliteStore, run_id: str) -> str:
    """The run's status once nobody holds it (its driver let go)."""
    while True:
        row = await store.get_run(run_id)
        if row.owner is None:
            return row.status
        await asyncio.sleep(0.01)


async def assert_held_through_several_leases(store: SqliteStore, run_id: str) -> None:
    for _ in range(4):  # four lease lengths: only a heartbeat keeps it
        await asyncio.sleep(LEASE)
        with pytest.raises(RunBusyError):
            await store.acquire(run_id, "intruder", 30)


async def test_two_drivers_in_one_process_stopping_one_leaves_the_others_runs_untouched(tmp_path):
    store = await opened(tmp_path)
    gates = Gates()
    workflow = stepping(store, gates)
    actor = Actor.python()
    stopped = Driver(store, [workflow], poll_interval=0.05)
    going = Driver(store, [workflow], poll_interval=0.05)
    try:
        async with going:
            await stopped.__aenter__()
            try:
                for driver, run_id in ((stopped, "s"), (going, "g")):
                    _, drive_on = await open_new(
                        workflow, (run_id, 0), store, run_id, actor=actor, leases=driver.leases
                    )
                    driver.spawn(run_id, drive_on)
                for run_id in ("s", "g"):
                    gates.let(run_id)  # superstep 1 commits; each run waits inside superstep 2
                    assert await gates.reached[run_id].get() == 0
                    assert await gates.reached[run_id].get() == 1
            finally:
                await stopped.__aexit__(None, None, None)

            # The stopped driver's run: as last committed, its lease given up.
            row = await store.get_run("s")
            assert (row.status, row.superstep, row.owner) == ("running", 1, None)

            # The other driver's run: still held, renewed, and it goes on to the end.
            await assert_held_through_several_leases(store, "g")
            gates.let("g", STEPS)
            assert await settled(store, "g") == "completed"
            assert [c.superstep for c in await store.list_checkpoints("g")] == [0, 1, 2, 3]

        # Whoever comes next takes the stopped driver's run up from its last checkpoint.
        gates.let("s", STEPS)
        resumed = await workflow.resume("s")
        assert (resumed.status, resumed.outputs) == (RunStatus.COMPLETED, ["s"])
        assert [c.superstep for c in await store.list_checkpoints("s")] == [0, 1, 2, 3]
    finally:
        await store.close()


async def test_stopping_a_server_driver_leaves_a_runtimes_claimed_run_going(tmp_path):
    store = await opened(tmp_path)
    gates = Gates()
    napping = stepping(store, gates)
    resting = stepping(store, gates, nap_first=True)
    try:
        assert (await resting.run(("w", 0), run_id="w")).status is RunStatus.WAITING
        async with Runtime(store, [resting], poll_interval=0.05):
            assert await gates.reached["w"].get() == 0  # the runtime claimed it and goes on
            driver = Driver(store, [napping], poll_interval=0.05)
            async with driver:
                _, drive_on = await open_new(
                    napping, ("d", 0), store, "d", actor=Actor.python(), leases=driver.leases
                )
                driver.spawn("d", drive_on)
                gates.let("d")
                assert await gates.reached["d"].get() == 0
                assert await gates.reached["d"].get() == 1
            row = await store.get_run("d")
            assert (row.status, row.superstep, row.owner) == ("running", 1, None)

            await assert_held_through_several_leases(store, "w")
            gates.let("w", STEPS)
            assert await settled(store, "w") == "completed"
    finally:
        await store.close()
