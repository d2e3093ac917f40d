"""What live events cost the process that drives a run, with and without a follower.

    python benchmarks/live_events.py [--events 20000] [--repeats 5] [--postgres DSN]

One executor raises ``--events`` ephemeral events (as an agent's token
deltas are) in a loop, on a SQLite file (and on PostgreSQL when ``--postgres``
is given or ``TREADLE_BENCH_POSTGRES`` names one). The run's wall time is
taken three ways, each ``--repeats`` times (the median is reported):

* ``no feed``: the store's live feed replaced by one that drops everything,
  the floor (the events are still built and handed on, as before this feed
  existed);
* ``feed, nobody follows``: the store's own feed (the side file's writer on
  SQLite, ``NOTIFY`` on PostgreSQL);
* ``feed, a follower``: the same with a follower in another process
  (this script with ``--follow``), which counts what reached it.

The figures go to ``benchmarks/LIVE.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.events import WorkflowEvent
from treadle.stores import PostgresStore, SqliteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

BENCH = Path(__file__).resolve().parent
REPORT = BENCH / "LIVE.md"


@dataclass(slots=True, kw_only=True)
class Token(WorkflowEvent):
    """A piece of a reply: live, never logged."""

    ephemeral = True
    text: str = ""


@executor(id="speak")
async def speak(count: int, ctx: WorkflowContext[str]) -> None:
    for n in range(count):
        ctx.emit(Token(run_id=ctx.run_id, superstep=ctx.superstep, executor_id="speak", text="w "))
        if n % 100 == 99:
            await asyncio.sleep(0)  # a model's stream yields to the loop between chunks
    ctx.yield_output(count)


speaker = WorkflowBuilder(speak, name="speaker").build()


class NoFeed:
    """A live feed that drops everything: the floor."""

    def publish(self, run_id: str, entry: Any) -> None:
        """Drop it."""

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[Any]:
        """Nothing to follow."""
        yield None

    async def close(self) -> None:
        """Nothing to stop."""


def open_store(url: str) -> Any:
    if url.startswith("postgres"):
        return PostgresStore(url, schema=os.environ["TREADLE_SCHEMA"])
    return SqliteStore(url)


async def follow(url: str, run_id: str, expected: int) -> None:
    """The follower: count the run's live events until ``expected`` or 60 s without one."""
    store = open_store(url)
    seen = 0
    try:
        async with store.live.follow(run_id) as follower:
            print("ready", flush=True)
            while seen < expected:
                try:
                    async with asyncio.timeout(60):
                        await follower.get()
                except TimeoutError:
                    break
                seen += 1
    finally:
        await store.close()
    print(seen, flush=True)


async def one_run(url: str, run_id: str, events: int, mode: str) -> tuple[float, int | None]:
    """The run's wall time in ``mode``; and what a follower saw, if one followed."""
    store = open_store(url)
    follower = None
    if mode == "nofeed":
        store.live = NoFeed()
    try:
        if mode == "follower":
            follower = subprocess.Popen(  # noqa: ASYNC220 - before the measured part
                [sys.executable, __file__, "--follow", url, run_id, str(events)],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ},
            )
            ready = follower.stdout.readline().strip() if follower.stdout else ""
            if ready != "ready":
                raise RuntimeError(f"the follower did not start: {ready!r}")
        began = time.perf_counter()
        result = await speaker.run(events, store=store, run_id=run_id)
        took = time.perf_counter() - began
        if result.outputs != [events]:
            raise RuntimeError(f"the run went wrong: {result}")
    finally:
        await store.close()
    seen = None
    if follower is not None:
        out, _ = follower.communicate(timeout=120)
        seen = int(out.split()[-1])
    return took, seen


async def measure(url: str, events: int, repeats: int) -> dict[str, Any]:
    """Each mode's median time (and the fewest events a follower got), modes interleaved."""
    modes = ("nofeed", "feed", "follower")
    await one_run(url, f"warm-{os.getpid()}", events, "feed")  # schema, imports, caches
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    seen: list[int] = []
    for n in range(repeats):
        for mode in modes:
            took, got = await one_run(url, f"{mode}-{n}-{os.getpid()}", events, mode)
            times[mode].append(took)
            if got is not None:
                seen.append(got)
    return {mode: (statistics.median(times[mode]), min(seen) if seen else None) for mode in modes}


def render(rows: list[tuple[str, dict[str, Any]]], events: int, repeats: int, command: str) -> str:
    lines = [
        "# Live events: what the driving process pays",
        "",
        "Written by `benchmarks/live_events.py`; do not edit by hand. One executor raises",
        f"{events:,} ephemeral events (as token deltas are) in one superstep; the run's wall",
        f"time is the median of {repeats}. See the script's docstring.",
        "",
        f"    {command}",
        "",
        (
            "| store | no feed (floor) | feed, nobody follows | feed, a follower elsewhere"
            " | per event, nobody follows | per event, a follower | reached the follower |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, figures in rows:
        floor, _ = figures["nofeed"]
        alone, _ = figures["feed"]
        followed, seen = figures["follower"]
        lines.append(
            f"| {name} | {floor * 1000:.0f} ms | {alone * 1000:.0f} ms ({alone / floor:.2f}x) "
            f"| {followed * 1000:.0f} ms ({followed / floor:.2f}x) "
            f"| {(alone - floor) / events * 1e6:.1f} µs "
            f"| {(followed - floor) / events * 1e6:.1f} µs "
            f"| {seen:,} of {events:,} |"
        )
    lines += [
        "",
        "The driver hands each event to a bounded queue and goes on; a thread sends it (an",
        "insert into the side file on SQLite, `pg_notify` on PostgreSQL). A follower changes",
        "nothing for the driver but the CPU it takes on the same machine. 'reached the",
        "follower' counts what it received: fewer than raised means the driver's queue or",
        "the follower's dropped the oldest (live events are best-effort).",
        "",
        (
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs,"
            f" Python {platform.python_version()}, {platform.system()}."
        ),
        "",
    ]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("TREADLE_BENCH_POSTGRES"))
    parser.add_argument("--follow", nargs=3, metavar=("STORE", "RUN", "EVENTS"))
    args = parser.parse_args()
    if args.follow:
        url, run_id, expected = args.follow
        await follow(url, run_id, int(expected))
        return
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        rows.append(
            (
                "SQLite",
                await measure(str(Path(directory) / "runs.sqlite"), args.events, args.repeats),
            )
        )
    if args.postgres:
        schema = os.environ["TREADLE_SCHEMA"] = f"treadle_bench_live_{os.getpid()}"
        try:
            rows.append(("PostgreSQL", await measure(args.postgres, args.events, args.repeats)))
        finally:
            import psycopg  # noqa: PLC0415 - only with --postgres

            with psycopg.connect(args.postgres, autocommit=True) as db:
                db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    command = "python benchmarks/live_events.py " + " ".join(sys.argv[1:])
    REPORT.write_text(render(rows, args.events, args.repeats, command.strip()), encoding="utf-8")
    print(REPORT.read_text(encoding="utf-8"))


if __name__ == "__main__":
    asyncio.run(main())
