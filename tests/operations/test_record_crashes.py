"""The record survives SIGKILL (issue 29): never an effect without its entry, nor an entry
without its effect, on SQLite and PostgreSQL, with a real process killed at random moments."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import forked
from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle._operations._audit import verify
from treadle.errors import TreadleError
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from forked import Forked
    from treadle.stores import Store

APP = Path(__file__).parent / "record_app.py"
KILLS = int(os.environ.get("TREADLE_RECORD_KILLS", "3"))
SOAK_KILLS = 30


def _forked(target: str, *args: object, env: dict[str, str], stdin: bool = False) -> Forked:
    """``record_app``'s ``target`` in a process of its own, forked with treadle imported."""
    env = {**env, "PYTHONPATH": str(APP.parent)}
    return forked.start(f"record_app:{target}", *args, env=env, stdin=stdin)


async def _kill_at_random(where: str, env: dict[str, str], rng: random.Random) -> None:
    """Start the acting process, let it act for a random while, SIGKILL it."""
    with _forked("act_in_a_process", "kill", where, 4, env=env) as process:
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), timeout=60)
        assert line.strip() in {"ready", ""}
        await asyncio.sleep(rng.uniform(0.05, 0.6))
        process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(process.wait, 30)


async def _check_record(store: Store) -> None:
    """Each action's effect has its entries, and each entry its effect."""
    found = await verify(store)
    assert found.problems == []
    audit = await store.read_audit()
    present = {run.run_id: run for run in await store.list_runs()}
    for run_id, run in present.items():
        logged = [e for e in await store.read_events(run_id) if "actor" in e.data]
        # A run deleted and started again under its id keeps its earlier life's entries.
        ended = max(
            (e.seq for e in audit if e.run_id == run_id and e.action == "run_deleted"), default=0
        )
        entries = [e for e in audit if e.run_id == run_id and e.seq > ended]
        # The run's log and the audit log hold the same actions, in the same order.
        assert [(e.kind, e.data["audit"]["seq"]) for e in logged] == [
            (e.action, e.seq) for e in entries
        ]
        answered = {e.data["request_id"] for e in logged if e.kind == "request_answered"}
        assert answered == await _answers(store, run_id), (
            run_id
        )  # an answer kept has its entry, an entry its answer
        cancelled = any(e.kind == "run_cancelled" for e in logged)
        assert cancelled == (run.status == "cancelled"), run_id


async def _answers(store: Store, run_id: str) -> set[str]:
    """The requests of the run (asked in its log) whose answer the store kept."""
    asked = {
        e.data.get("request_id") for e in await store.read_events(run_id) if e.kind == "request"
    }
    return {rid for rid in asked if rid and await store.answer_of(run_id, rid) is not None}


@pytest.mark.integration
async def test_sigkill_never_splits_an_action_from_its_record_on_sqlite(tmp_path: Path) -> None:
    where = str(tmp_path / "record.sqlite")
    rng = random.Random()
    for _ in range(KILLS):
        await _kill_at_random(where, dict(os.environ), rng)
    store = SqliteStore(where)
    try:
        await _check_record(store)
        assert len(await store.read_audit()) > 4  # it got to act before it was killed
    finally:
        await store.close()


@pytest.mark.integration
async def test_sigkill_never_splits_an_action_from_its_record_on_postgres() -> None:
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    dsn = postgres_dsn()
    schema = fresh_schema()
    env = {**os.environ, "RECORD_SCHEMA": schema}
    rng = random.Random()
    store = PostgresStore(dsn, schema=schema)
    try:
        for _ in range(KILLS):
            await _kill_at_random(dsn, env, rng)
        await _check_record(store)
        assert len(await store.read_audit()) > 4
    finally:
        await store.close()
        await drop_schemas([schema])


async def _cli_meanwhile(where: str, env: dict[str, str], stop: asyncio.Event) -> int:
    """Act on the same runs through ``treadle`` (the door ``cli``) until ``stop``; count done.

    It starts a run that is not there (yet, or deleted) and deletes one that
    ended, so it has something to do after the killed process cancelled its
    runs; after ``stop`` it goes on until it has done something (15 tries).
    """
    rng = random.Random()
    runs = [f"{env['RECORD_PREFIX']}{n}" for n in range(4)]
    done = tries_after = 0
    while not stop.is_set() or (done == 0 and tries_after < 15):
        tries_after += stop.is_set()
        run_id = rng.choice(runs)
        action = rng.choice(["run", "respond", "cancel", "pause", "unpause", "delete"])
        args = [action, run_id]
        if action == "run":
            args = ["run", str(APP), "--input", '"t"', "--run-id", run_id]
        elif action == "delete":
            args = ["delete", run_id, "--yes"]
        elif action == "respond":
            store = SqliteStore(where)
            try:
                logged = await store.read_events(run_id)
            except TreadleError:  # not there (yet, or any more)
                logged = []
            finally:
                await store.close()
            asked = [e.data["request_id"] for e in logged if e.kind == "request"]
            if not asked:
                continue
            args = ["respond", run_id, asked[0], "true", "--app", str(APP)]
        # A `treadle` process of its own, forked with the command line imported.
        command = forked.start(
            "treadle._cli._app:main", env={**env, "TREADLE_STORE": where}, argv=["treadle", *args]
        )
        with command:
            await asyncio.to_thread(command.communicate, 60)
        done += command.returncode in (0, 3)  # 3: it rests, waiting for input
    return done


async def _client_meanwhile(where: str, env: dict[str, str], stop: asyncio.Event) -> int:
    """Act on the same runs through the workers' client (door ``client``) until ``stop``."""
    with _forked("act_in_a_process", "client", where, 4, env=env, stdin=True) as process:
        assert process.stdin is not None
        ready = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), timeout=60)
        assert ready.strip() == "ready"
        await stop.wait()
        process.stdin.close()
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), timeout=60)
        done = int(line.strip())
        assert await asyncio.to_thread(process.wait, 60) == 0
    return done


async def _with_a_second_door(
    store: Store, where: str, env: dict[str, str], second, kills: int
) -> int:
    """SIGKILL the first process at random while a second acts on its runs through ``second``.

    Each round has runs of its own (both processes act on them from their
    start), so the second door has runs to act on, not only ended ones.
    """
    rng = random.Random()
    acted = 0
    await store.list_runs()  # its tables made before either process opens it
    for round_ in range(kills):
        env = {**env, "RECORD_PREFIX": f"k{round_}-"}
        stop = asyncio.Event()
        meanwhile = asyncio.create_task(second(where, env, stop))
        await _kill_at_random(where, env, rng)
        await asyncio.sleep(0.3)  # it acts on what the killed process left, too
        stop.set()
        acted += await meanwhile
    await _check_record(store)
    return acted


SECOND_DOORS = [
    pytest.param("sqlite", KILLS, marks=pytest.mark.integration, id="sqlite-cli"),
    pytest.param("postgres", KILLS, marks=pytest.mark.integration, id="postgres-client"),
    pytest.param("sqlite", SOAK_KILLS, marks=pytest.mark.soak, id="sqlite-cli-soak"),
    pytest.param("postgres", SOAK_KILLS, marks=pytest.mark.soak, id="postgres-client-soak"),
]


@pytest.mark.parametrize(("kind", "kills"), SECOND_DOORS)
async def test_sigkill_while_a_second_process_acts_through_another_door(
    tmp_path: Path, kind: str, kills: int
) -> None:
    if kind == "sqlite":
        where = str(tmp_path / "record.sqlite")
        store: Store = SqliteStore(where)
        env, second, door = dict(os.environ), _cli_meanwhile, "cli"
        schema = None
    else:
        from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

        where, schema = postgres_dsn(), fresh_schema()
        store = PostgresStore(where, schema=schema)
        env, second, door = {**os.environ, "RECORD_SCHEMA": schema}, _client_meanwhile, "client"
    try:
        await _with_a_second_door(store, where, env, second, kills)
        # The second door's actions are on the record (an action changing nothing, as
        # pausing a paused run, writes no entry: the count of its calls is no bound).
        assert any(e.door == door for e in await store.read_audit())
    finally:
        await store.close()
        if schema:
            await drop_schemas([schema])
