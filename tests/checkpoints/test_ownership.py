"""One owner per run: callers racing on one run, as coroutines and as processes.

Exactly-once holds against concurrency as it does against crashes: of N
answers to one request exactly one is applied and its caller alone is told
so; the others get a specific error; the step after the answer runs once
and the history holds one checkpoint per superstep.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest
import race_workflow

import forked
from postgres import drop_schemas_now, fresh_schema, postgres_dsn
from treadle import RunResult, RunStatus, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import (
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RequestError,
    RunBusyError,
    RunCancelledError,
)
from treadle.stores import MemoryStore, PostgresStore, SqliteStore
from treadle.testing import FakeClock

HERE = Path(__file__).parent
SCRIPT = HERE / "race_workflow.py"


def calls(side: Path) -> dict[tuple[str, int], int]:
    """How often each executor ran in each superstep, from the side table."""
    with sqlite3.connect(side) as db:
        rows = db.execute(
            "SELECT executor_id, superstep, COUNT(*) FROM calls GROUP BY executor_id, superstep"
        ).fetchall()
    return {(executor_id, superstep): count for executor_id, superstep, count in rows}


async def assert_one_checkpoint_per_superstep(store, run_id: str) -> None:
    checkpoints = await store.list_checkpoints(run_id)
    supersteps = [c.superstep for c in checkpoints]
    assert supersteps == sorted(set(supersteps)), supersteps  # no sibling checkpoints
    for parent, child in itertools.pairwise(checkpoints):
        assert child.parent_checkpoint_id == parent.checkpoint_id  # one chain


def decision(i: int) -> race_workflow.Decision:
    return race_workflow.Decision(f"a{i}")


def open_store(kind: str, tmp_path: Path):
    if kind == "memory":
        return MemoryStore()
    return SqliteStore(tmp_path / "runs.sqlite")


# --- answers racing, as coroutines -------------------------------------------------


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.integration)]
)
def any_store(request, tmp_path):
    """A fresh store of each backend; PostgreSQL in a schema of its own, dropped afterwards."""
    if request.param != "postgres":
        yield open_store(request.param, tmp_path)
        return
    dsn, schema = postgres_dsn(), fresh_schema()
    yield PostgresStore(dsn, schema=schema)
    drop_schemas_now([schema])


@pytest.mark.parametrize("racers", [2, 4, 8])
@pytest.mark.parametrize("wait", [False, True])
async def test_concurrent_answers_to_one_request_apply_exactly_one(
    tmp_path, any_store, racers, wait
):
    store, side = any_store, tmp_path / "side.sqlite"
    workflow = race_workflow.build(store, str(side), "ask")
    try:
        asked = await workflow.run("r1", run_id="r1")
        (request,) = asked.pending_requests
        outcomes = await asyncio.gather(
            *(
                workflow.respond("r1", {request.request_id: decision(i)}, wait=wait)
                for i in range(racers)
            ),
            return_exceptions=True,
        )
        wins = [o for o in outcomes if isinstance(o, RunResult)]
        losses = [o for o in outcomes if not isinstance(o, RunResult)]
        assert len(wins) == 1, outcomes
        (won,) = wins
        assert won.status is RunStatus.COMPLETED
        (answer,) = won.outputs
        refused = (RequestAlreadyAnsweredError, *(() if wait else (RunBusyError,)))
        assert all(isinstance(loss, refused) for loss in losses), losses
        for loss in losses:
            if isinstance(loss, RequestAlreadyAnsweredError):
                assert answer in loss.answer  # it names the answer that won
        # The steps after the answer ran once each, and the history is one chain.
        counted = calls(side)
        assert set(counted.values()) == {1}, counted
        assert len(counted) == 1 + race_workflow.CHAIN
        await assert_one_checkpoint_per_superstep(store, "r1")
        assert (await store.get_run("r1")).owner is None  # released with its last commit
    finally:
        await store.close()


@pytest.mark.parametrize("racers", [2, 4])
@pytest.mark.parametrize("wait", [False, True])
async def test_concurrent_messages_to_one_session_apply_exactly_one(
    tmp_path, any_store, racers, wait
):
    store, side = any_store, tmp_path / "side.sqlite"
    workflow = race_workflow.build(store, str(side), "chat")
    try:
        assert (await workflow.run("c1", run_id="c1")).status is RunStatus.AWAITING_INPUT
        outcomes = await asyncio.gather(
            *(workflow.send_message("c1", f"m{i}", wait=wait) for i in range(racers)),
            return_exceptions=True,
        )
        wins = [o for o in outcomes if isinstance(o, RunResult)]
        losses = [o for o in outcomes if not isinstance(o, RunResult)]
        assert len(wins) == 1, outcomes
        assert wins[0].status is RunStatus.COMPLETED
        # The others found the run owned, or (having waited) no longer waiting for input.
        assert all(isinstance(loss, RequestError) for loss in losses), losses
        counted = calls(side)
        assert set(counted.values()) == {1}, counted
        assert len(counted) == 1 + race_workflow.CHAIN
        await assert_one_checkpoint_per_superstep(store, "c1")
    finally:
        await store.close()


# --- answers, messages and resumes racing, as processes ---------------------------


def spawn(*args: str, env: dict[str, str] | None = None) -> forked.Forked:
    """The script run with ``args`` in a process of its own, forked with treadle imported."""
    return forked.start(
        "race_workflow:cli",
        env={**(os.environ if env is None else env), "PYTHONPATH": str(HERE)},
        cwd=HERE,
        argv=[str(SCRIPT), *args],
    )


def race(commands: list[list[str]], side: Path, env: dict[str, str] | None) -> list[dict]:
    """Start every command, wait until each is ready, let them go at once; their JSON lines."""
    with contextlib.ExitStack() as running:  # each killed if still running (a failed check)
        children = [running.enter_context(spawn(*command, env=env)) for command in commands]
        for child in children:
            line = child.stdout.readline()
            assert "ready" in line, (line, child.finish(60)[2])
        Path(str(side) + ".go").touch()
        ended = forked.communicate_all(children, timeout=60)
    results = []
    for code, out, err in ended:
        assert code == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def start(spec: str, side: Path, kind: str, run_id: str, env: dict[str, str] | None) -> dict:
    with spawn("start", spec, str(side), kind, run_id, env=env) as started:
        code, out, err = started.finish(60)
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def backend(request, tmp_path):
    """(store spec for the script, env, a store for the test to read with)."""
    if request.param == "sqlite":
        path = str(tmp_path / "runs.sqlite")
        yield path, None, lambda: SqliteStore(path)
        return
    dsn, schema = postgres_dsn(), fresh_schema()
    env = {**os.environ, "RACE_SCHEMA": schema}
    yield dsn, env, lambda: PostgresStore(dsn, schema=schema)
    drop_schemas_now([schema])


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("racers", [2, 4, 8])
async def test_concurrent_answers_from_separate_processes_apply_exactly_one(
    tmp_path, backend, racers
):
    spec, env, reader = backend
    side = tmp_path / "side.sqlite"
    asked = start(spec, side, "ask", "p1", env)
    (request_id,) = asked["requests"]
    commands = [
        ["respond", spec, str(side), "ask", "p1", request_id, f"a{i}"] for i in range(racers)
    ]
    results = race(commands, side, env)
    wins = [r for r in results if "ok" in r]
    assert len(wins) == 1, results
    assert wins[0]["ok"] == "completed"
    (answer,) = wins[0]["outputs"]
    losses = [r for r in results if "error" in r]
    assert {r["error"] for r in losses} <= {"RequestAlreadyAnsweredError", "RunBusyError"}
    assert len(losses) == racers - 1
    counted = calls(side)
    assert set(counted.values()) == {1}, counted
    store = reader()
    try:
        await assert_one_checkpoint_per_superstep(store, "p1")
        assert (await store.answer_of("p1", request_id))[0].count(answer) == 1
    finally:
        await store.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
async def test_concurrent_messages_from_separate_processes_apply_exactly_one(tmp_path, backend):
    spec, env, reader = backend
    side = tmp_path / "side.sqlite"
    assert start(spec, side, "chat", "s1", env)["ok"] == "awaiting_input"
    results = race([["send", spec, str(side), "chat", "s1", f"m{i}"] for i in range(4)], side, env)
    wins = [r for r in results if "ok" in r]
    assert len(wins) == 1, results
    assert wins[0]["ok"] == "completed"
    for lost in (r for r in results if "error" in r):
        # A sender that takes the run while the winner's turn runs is refused as busy; one slow
        # enough to take it after the winner completed it is told the run has ended.
        ended = lost["error"] == "RequestError" and "(completed)" in lost["message"]
        assert lost["error"] == "SessionBusyError" or ended, lost
    counted = calls(side)
    assert set(counted.values()) == {1}, counted
    store = reader()
    try:
        await assert_one_checkpoint_per_superstep(store, "s1")
    finally:
        await store.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("wait", [False, True])
async def test_two_processes_resuming_one_run_advance_it_once(tmp_path, backend, wait):
    spec, env, reader = backend
    side = tmp_path / "side.sqlite"
    napping = start(spec, side, "nap", "n1", env)
    assert napping["ok"] == "waiting"
    await asyncio.sleep(0.01)  # the 1 ms timer is due
    extra = ["wait"] if wait else []
    results = race([["resume", spec, str(side), "nap", "n1", *extra]] * 2, side, env)
    done = [r for r in results if r.get("ok") == "completed"]
    if wait:
        # The second waits for the first, then finds the run completed and runs nothing.
        assert len(done) == 2, results
    else:
        assert len(done) == 1, results
        (busy,) = [r for r in results if "error" in r]
        assert busy["error"] == "RunBusyError"
        assert "is owned by" in busy["message"]
    # Every superstep after the resume point committed once, every executor invoked once.
    counted = calls(side)
    assert set(counted.values()) == {1}, counted
    assert len(counted) == 1 + race_workflow.CHAIN
    store = reader()
    try:
        await assert_one_checkpoint_per_superstep(store, "n1")
    finally:
        await store.close()


@pytest.mark.integration
@pytest.mark.timeout(120)
async def test_timer_services_in_separate_processes_wake_each_due_run_once(tmp_path, backend):
    spec, env, reader = backend
    side = tmp_path / "side.sqlite"
    naps = [f"n{i}" for i in range(12)]
    for run_id in naps:
        assert start(spec, side, "nap", run_id, env)["ok"] == "waiting"
    await asyncio.sleep(0.01)  # every 1 ms timer is due
    results = race([["wake", spec, str(side), "nap", "-"]] * 3, side, env)
    woken = [run_id for r in results for run_id in r["ok"]]
    assert sorted(woken) == sorted(naps)  # each run woken by exactly one service
    with sqlite3.connect(side) as db:
        counts = db.execute(
            "SELECT run_id, executor_id, superstep, COUNT(*) FROM calls GROUP BY 1, 2, 3"
        ).fetchall()
    assert len(counts) == len(naps) * (1 + race_workflow.CHAIN)
    assert {count for *_, count in counts} == {1}, counts
    store = reader()
    try:
        for run_id in naps:
            assert (await store.get_run(run_id)).status == "completed"
            await assert_one_checkpoint_per_superstep(store, run_id)
    finally:
        await store.close()


# --- a timer service that meets runs it cannot load --------------------------------


def napper(name: str, store, clock):
    @executor(id="nap")
    async def nap(seconds: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(seconds)
        ctx.yield_output(f"{name} woke")

    return WorkflowBuilder(start=nap, store=store, clock=clock, name=name).build()


async def test_a_runtime_parks_runs_it_cannot_load_and_keeps_waking_its_own(tmp_path, caplog):
    clock = FakeClock()
    store = SqliteStore(tmp_path / "runs.sqlite")
    known, unknown = napper("known", store, clock), napper("unknown", store, clock)
    try:
        for i in range(3):
            await unknown.run(10, run_id=f"b{i}")
            await known.run(10 + i, run_id=f"a{i}")
        runtime = Runtime(store, [known], clock=clock)
        caplog.set_level(logging.ERROR, logger="treadle.runtime")
        for tick in range(3):
            await clock.advance(10 if tick == 0 else 1)
            woken = await runtime.wake_due()
            # Each of A's timers fires at the wake that follows it falling due.
            assert [r.run_id for r in woken] == [f"a{tick}"]
            assert woken[0].outputs == ["known woke"]
        for i in range(3):
            row = await store.get_run(f"b{i}")
            assert row.status == "waiting"  # nothing lost: it rests as it was
            assert row.parked is not None
            assert "no workflow 'unknown'" in row.parked
        parked_lines = [r for r in caplog.records if "parked run" in r.getMessage()]
        assert len(parked_lines) == 3  # once each, though the service woke three times
        # A resume by someone who has the workflow takes a parked run up.
        done = await unknown.resume("b0")
        assert done.status is RunStatus.COMPLETED
        assert (await store.get_run("b0")).parked is None
    finally:
        await store.close()


# --- leases: renewed while the owner lives, fencing once it is gone ------------------


def gated(store, gate: asyncio.Event, entered: asyncio.Event):
    @executor(id="slow")
    async def slow(n: int, ctx: WorkflowContext) -> None:
        entered.set()
        await gate.wait()
        ctx.yield_output(n)

    return WorkflowBuilder(start=slow, store=store, name="gated").build()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_lease_is_renewed_while_its_run_computes_longer_than_the_lease(tmp_path, kind):
    # 0.6 s: renewed a third of the way through, a lease survives a loop held up for
    # 0.4 s (a 0.3 s lease was lost on a machine at a load of 10).
    store = (
        MemoryStore(lease=0.6) if kind == "memory" else SqliteStore(tmp_path / "r.db", lease=0.6)
    )
    gate, entered = asyncio.Event(), asyncio.Event()
    workflow = gated(store, gate, entered)
    try:
        running = asyncio.create_task(workflow.run(1, run_id="long"))
        await entered.wait()
        for _ in range(3):  # 1.8 s in all: three times the lease
            await asyncio.sleep(0.6)
            with pytest.raises(RunBusyError):
                await store.acquire("long", "intruder", 30)
        gate.set()
        assert (await running).outputs == [1]
        assert (await store.get_run("long")).owner is None
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_an_owner_whose_run_was_taken_over_commits_nothing_more(tmp_path, kind):
    store = open_store(kind, tmp_path)
    gate, entered = asyncio.Event(), asyncio.Event()
    workflow = gated(store, gate, entered)
    try:
        running = asyncio.create_task(workflow.run(1, run_id="stale"))
        await entered.wait()
        owner = (await store.get_run("stale")).owner
        assert owner is not None
        taken = await store.acquire("stale", "successor", 30, replacing=owner)
        gate.set()
        with pytest.raises(LeaseLostError):
            await running
        row = await store.get_run("stale")
        assert (row.status, row.superstep, row.owner) == ("running", 0, "successor")
        assert [c.superstep for c in await store.list_checkpoints("stale")] == [0]
        await store.release(taken)
        # The successor's resume runs the superstep the stale owner's was never committed.
        assert (await workflow.resume("stale")).outputs == [1]
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_cancel_while_another_owner_computes_stops_it_at_its_next_commit(tmp_path, kind):
    store = open_store(kind, tmp_path)
    gate, entered = asyncio.Event(), asyncio.Event()
    workflow = gated(store, gate, entered)
    try:
        running = asyncio.create_task(workflow.run(1, run_id="doomed"))
        await entered.wait()
        await workflow.cancel("doomed")
        gate.set()
        with pytest.raises(RunCancelledError):
            await running
        row = await store.get_run("doomed")
        assert (row.status, row.superstep) == ("cancelled", 0)
        with pytest.raises(RunCancelledError):
            await workflow.resume("doomed")
    finally:
        await store.close()


async def test_leaving_a_runtime_detaches_the_runs_it_continues_and_the_next_takes_them_up(
    tmp_path,
):
    store = SqliteStore(tmp_path / "runs.sqlite")
    gate, entered = asyncio.Event(), asyncio.Event()

    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(0)
        ctx.send_message(n)

    @executor(id="slow")
    async def slow(n: int, ctx: WorkflowContext) -> None:
        entered.set()
        await gate.wait()
        ctx.yield_output(n)

    workflow = WorkflowBuilder(start=nap, store=store, name="napper").add_edge(nap, slow).build()
    try:
        assert (await workflow.run(7, run_id="w1")).status is RunStatus.WAITING
        async with Runtime(store, [workflow], poll_interval=0.01):
            await entered.wait()  # the service is continuing the run, inside a superstep
        row = await store.get_run("w1")
        assert row.status == "running"  # not cancelled: detached
        assert row.owner is None  # its lease was given up
        gate.set()
        (done,) = await Runtime(store, [workflow]).wake_due()  # an orphan: taken up at once
        assert (done.status, done.outputs) == (RunStatus.COMPLETED, [7])
        await assert_one_checkpoint_per_superstep(store, "w1")
    finally:
        await store.close()


def napping_gated(gate: asyncio.Event, entered: asyncio.Event):
    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(60)
        ctx.send_message(n)

    @executor(id="slow")
    async def slow(n: int, ctx: WorkflowContext) -> None:
        entered.set()
        await gate.wait()
        ctx.yield_output(n)

    return WorkflowBuilder(start=nap, name="napping").add_edge(nap, slow).build()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_runs_a_service_claimed_keep_their_leases_while_they_wait_for_a_slot(tmp_path, kind):
    # A service claims a batch and drives a few at once: a run waiting its turn past its
    # lease was fenced out of its own first write by its lateness (two processes on one
    # SQLite file: the survivor's takeovers failed their first call's entry in its line).
    store = (
        MemoryStore(lease=0.3) if kind == "memory" else SqliteStore(tmp_path / "r.db", lease=0.3)
    )
    gate, entered = asyncio.Event(), asyncio.Event()
    workflow = napping_gated(gate, entered)
    clock = FakeClock()
    try:
        for n in range(2):
            parked = await workflow.run(n, run_id=f"r{n}", store=store, clock=clock)
            assert parked.status is RunStatus.WAITING
        await clock.advance(61)
        service = Runtime(store, [workflow], clock=clock)
        waking = asyncio.create_task(service.wake_due(concurrency=1))
        await entered.wait()
        for _ in range(4):  # 1.2 s in all: one run computes, the other waits its turn
            await asyncio.sleep(0.3)
            for run_id in ("r0", "r1"):
                with pytest.raises(RunBusyError):
                    await store.acquire(run_id, "intruder", 30)
        gate.set()
        assert sorted(result.outputs for result in await waking) == [[0], [1]]
    finally:
        await store.close()
