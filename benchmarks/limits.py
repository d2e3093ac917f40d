"""What a call limit's slot costs: acquire and release, in one process and in the stores.

    python benchmarks/limits.py [--pairs 20000] [--store-pairs 300] [--no-postgres]

In one process (``LocalGate``, what runs without a store use): the time of
one acquire and release of a free slot, the median of 7 timed batches of
``--pairs`` pairs, beside the floor of the same machine in the same run
(an ``asyncio.Semaphore`` acquired and released as often) so the figure
reads as a ratio. In the stores (``take_slot`` + ``release_slot``, what
stored runs use, each one transaction): the median time of a pair on
SQLite and PostgreSQL, and how many statements each transaction sends
(each a batch sent as one query on PostgreSQL: one round trip; the pair
is two transactions). Results go into
``benchmarks/LIMITS.md`` and ``benchmarks/limits.json``. The target
(issue 31): at most 20 us a pair in process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))

from treadle import CallLimit  # noqa: E402
from treadle._engine._limiter import LocalGate, SlotRequest  # noqa: E402
from treadle._stores import _sql_limits  # noqa: E402
from treadle._stores._limit_roles import LimitTerms, SlotEntry  # noqa: E402
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord  # noqa: E402
from treadle.stores import PostgresStore, SqliteStore  # noqa: E402

DSN = os.environ.get("TREADLE_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
T0 = 1_700_000_000.0


async def in_process(pairs: int) -> tuple[float, float]:
    """Microseconds per acquire + release: the gate's, and a semaphore's (the floor)."""
    gate = LocalGate()
    request = SlotRequest(CallLimit("api", concurrency=20, rate="1000000/s"), "c", "r")
    semaphore = asyncio.Semaphore(20)

    async def gate_pairs() -> None:
        for _ in range(pairs):
            slot = gate.acquire(request)
            gate.release(slot)  # type: ignore[arg-type]

    async def floor_pairs() -> None:
        for _ in range(pairs):
            await semaphore.acquire()
            semaphore.release()

    gates, floors = [], []
    for _ in range(7):
        started = time.perf_counter()
        await gate_pairs()
        gates.append((time.perf_counter() - started) / pairs * 1e6)
        started = time.perf_counter()
        await floor_pairs()
        floors.append((time.perf_counter() - started) / pairs * 1e6)
    return statistics.median(gates), statistics.median(floors)


async def in_store(store, pairs: int) -> float:
    """Milliseconds per take_slot + release_slot of a free slot."""
    record = RunRecord("bench", "wf", "running", 0, None, None, None, T0, T0)
    info = CheckpointInfo("bench/0", "bench", 0, "running", None, T0, None)
    await store.create_run(record, b"graph", CheckpointRecord(info, b"blob"))
    lease = await store.acquire("bench", "me", 3600)
    terms = LimitTerms("api", concurrency=20, calls=1_000_000, per=1.0)
    times = []
    for n in range(pairs):
        started = time.perf_counter()
        await store.take_slot(terms, SlotEntry(f"c{n}"), lease, "g")
        await store.release_slot(terms, f"c{n}", lease, "g")
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--store-pairs", type=int, default=300)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    gate_us, floor_us = await in_process(args.pairs)
    lease = type("L", (), {"run_id": "r", "owner": "o", "epoch": 1})()
    terms = LimitTerms("api", 1)
    take = len(_sql_limits.take(terms, SlotEntry("c"), lease, "g", T0).steps)  # type: ignore[arg-type]
    release = len(_sql_limits.release(terms, "c", lease, "g", T0).steps)  # type: ignore[arg-type]
    results: dict[str, object] = {
        "in_process_us": round(gate_us, 2),
        "semaphore_floor_us": round(floor_us, 2),
        "ratio_to_floor": round(gate_us / floor_us, 2),
        "statements_take": take,
        "statements_release": release,
    }
    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore(Path(scratch) / "bench.sqlite")
        try:
            results["sqlite_pair_ms"] = round(await in_store(store, args.store_pairs), 3)
        finally:
            await store.close()
    if not args.no_postgres:
        schema = f"bench_limits_{uuid.uuid4().hex[:8]}"
        store = PostgresStore(DSN, schema=schema)
        try:
            results["postgres_pair_ms"] = round(await in_store(store, args.store_pairs), 3)
        finally:
            await store.close()
            import psycopg  # noqa: PLC0415

            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as db:
                await db.execute(f'DROP SCHEMA "{schema}" CASCADE')
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# Call limits: what a slot costs",
        "",
        (
            f"Run {when} by `python benchmarks/limits.py` on {platform.node()} "
            f"(Python {platform.python_version()}, {os.cpu_count()} cores, shared and loaded)."
        ),
        "",
        "| what | figure |",
        "|---|---:|",
        f"| acquire + release of a free slot, in process (LocalGate) | {gate_us:.2f} us |",
        f"| the floor: asyncio.Semaphore acquire + release | {floor_us:.2f} us |",
        f"| ratio to the floor | {gate_us / floor_us:.2f} |",
        f"| SQLite: take_slot + release_slot (2 transactions) | {results['sqlite_pair_ms']} ms |",
    ]
    if "postgres_pair_ms" in results:
        lines.append(
            f"| PostgreSQL: take_slot + release_slot (2 transactions) | "
            f"{results['postgres_pair_ms']} ms |"
        )
    lines += [
        f"| statements in take_slot's transaction, sent as one query | {take} |",
        f"| statements in release_slot's transaction, sent as one query | {release} |",
        "| round trips to PostgreSQL per take or release | 1 |",
        "",
        "Target (issue 31): at most 20 us in process, and one store round trip on",
        "PostgreSQL. A take or a release is one batch of statements none of which",
        "waits for another's answer (`_stores/_sql_limits.py`), sent by psycopg's",
        "client-side cursor as one query: one implicit transaction, one round trip",
        "(`_stores/_postgres_writes.run_batch`; `tests/stores/test_store_limits.py`",
        "counts the messages). The pair's time is mostly the two commits' WAL flushes.",
        "",
    ]
    (BENCH / "LIMITS.md").write_text("\n".join(lines))
    (BENCH / "limits.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
