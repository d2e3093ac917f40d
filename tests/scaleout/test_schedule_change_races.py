"""Changes to a schedule racing its ticks, as separate processes: none lost, none applied twice.

Two processes tick a schedule every second (two ``treadle serve`` on one
SQLite file; two ``treadle worker`` on PostgreSQL) while ``treadle
schedules update`` commands, each a process of its own (forked, the CLI
imported), change its input two at a time. Each tick and each change is
decided by the store against the revision it read, and the loser reads
again. Afterwards:

* every tick from the first to the last has one run of its own
  (:func:`schedule_processes.check_one_run_per_tick`);
* every change a command was told it made is in the record once, and the
  schedule holds the one recorded last;
* no run went back to an older input: in tick order, each run's input is
  the initial one or a change no older than its predecessor's.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest
from processes import wait_until
from schedule_processes import (
    Serve,
    check_one_run_per_tick,
    environment,
    start_worker,
    stop_all,
)

import forked
from treadle import Actor, Schedule, Schedules
from treadle.stores import PostgresStore, SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHANGES = 12  # update commands, two at a time
EVERY = 1.0


async def change_inputs(url: str, schema: str | None) -> list[str]:
    """Run the update commands, two at a time; the inputs of those that said they succeeded."""
    env = environment(schema)
    made: list[str] = []
    for pair in range(CHANGES // 2):
        values = [f"change-{pair}-{side}" for side in "ab"]
        racers = [
            forked.start(
                "treadle._cli._app:main",
                env=env,
                argv=[
                    "treadle",
                    "schedules",
                    "update",
                    "digest",
                    "--input",
                    json.dumps(value),
                    "--store",
                    url,
                    "--json",
                ],
            )
            for value in values
        ]
        for value, racer in zip(values, racers, strict=True):
            out, err = await asyncio.to_thread(racer.communicate, timeout=120)
            assert racer.returncode == 0, err
            assert json.loads(out)["input"] == value
            made.append(value)
        await asyncio.sleep(0.3)
    return made


async def outputs(store, run_ids: list[str]) -> list[str]:
    found = []
    for run_id in run_ids:
        events = await store.read_events(run_id)
        found.extend(e.data["value"] for e in events if e.kind == "output")
    return found


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_changes_racing_ticks_as_processes_are_each_applied_once(
    backend, tmp_path: Path, new_schema
) -> None:
    if backend == "postgres":
        from postgres import postgres_dsn  # noqa: PLC0415

        url, schema = postgres_dsn(), new_schema()
        store = PostgresStore(url, schema=schema)
    else:
        url, schema = f"sqlite:///{tmp_path / 'runs.db'}", None
        store = SqliteStore(tmp_path / "runs.db")
    schedules = Schedules(store, actor=Actor("user", "ann", "api", role=Actor.cli().role))
    digest = Schedule("digest", every=EVERY, input="initial", overlap="allow", catchup=60)
    await schedules.create(digest)
    if backend == "postgres":
        tickers = [start_worker(url, schema, tmp_path / "w.log", f"w{i}") for i in range(2)]
        servers: list[Serve] = []
    else:
        tickers = []
        servers = [Serve(url, tmp_path / f"serve{i}.log").start() for i in range(2)]
    try:

        async def ticked(count: int) -> bool:
            return len(await store.list_ticks("digest", limit=10_000)) >= count

        # The changes race ticks only once the tickers tick: on a loaded
        # machine their start-up can outlast all the changes.
        async with asyncio.timeout(120):
            await wait_until(lambda: ticked(1), interval=0.1)
        made = await change_inputs(url, schema)
        async with asyncio.timeout(120):
            await wait_until(lambda: ticked(3), interval=0.1)
        await schedules.pause("digest")

        async def settled() -> bool:
            if await store.list_ticks("digest", unstarted=True):
                return False
            runs = await store.list_runs(id_prefix="digest@")
            return all(run.status in {"completed", "failed", "cancelled"} for run in runs)

        async with asyncio.timeout(120):
            await wait_until(settled, interval=0.2)
        check_one_run_per_tick_nominals = await check_one_run_per_tick(store, "digest", EVERY)
        audit = [e for e in await store.read_audit() if e.detail.get("schedule") == "digest"]
        updates = [e for e in audit if e.action == "schedule_updated"]
        final = (await schedules.get("digest")).schedule.input
        ticks = sorted(await store.list_ticks("digest", limit=10_000), key=lambda t: t.nominal_at)
        inputs = await outputs(store, [t.run_id for t in ticks])
    finally:
        stop_all(tickers)
        for server in servers:
            server.stop()
        await store.close()
    assert len(check_one_run_per_tick_nominals) >= 3
    assert sorted(made) == sorted(f"change-{p}-{s}" for p in range(CHANGES // 2) for s in "ab")
    assert len(updates) == CHANGES  # each change the record has once: none lost, none twice
    assert all(e.actor["label"].startswith("cli:") for e in updates)
    # The schedule holds the change the store applied last.
    order = [e.detail["changed"]["input"][1] for e in updates]
    assert sorted(order) == sorted(made)
    assert final == order[-1]
    # In tick order, no run took an input older than its predecessor's.
    rank = {"initial": -1} | {value: i for i, value in enumerate(order)}
    ranks = [rank[text] for text in inputs]
    assert ranks == sorted(ranks)
