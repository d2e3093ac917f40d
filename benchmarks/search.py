"""Filters over 100,000 runs with search fields: how long a ``--where`` query takes.

    python benchmarks/search.py [--runs 100000] [--repeat 20] [--no-postgres]

Writes 100,000 runs (a customer among 5,000, an amount, a region, a status)
into a SQLite file and a PostgreSQL schema with the tests' bulk loader
(``tests/search_support.py``: rows and fields in one transaction, then
ANALYZE on PostgreSQL), then times each filter below through the store's own
``search_runs`` (the first 50, newest first, as ``treadle runs --where``
lists them) and ``count_runs``: the median and the slowest of ``--repeat``
timed calls after one untimed call. Results go into ``benchmarks/SEARCH.md``
and ``benchmarks/search.json``. The target (issue 34): a selective filter
answers in under 50 ms on both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))

from search_support import BASE, SampleRun, populate_postgres, populate_sqlite  # noqa: E402
from treadle._values._filter import parse_filter  # noqa: E402
from treadle.stores import PostgresStore, SqliteStore  # noqa: E402

DSN = os.environ.get("TREADLE_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

FILTERS = (
    'fields.customer == "c42"',
    'fields.customer == "c42" && status == "awaiting_input"',
    'fields.amount >= 9990 && status == "awaiting_input"',
    'fields.amount > 5000 && fields.customer == "c7"',
    'fields.customer.startsWith("c499")',
    'fields.customer in ["c1", "c2"] || fields.amount < 2',
    'fields.region == "r3" && fields.vip && outcome == null && fields.customer == "c3"',
    'status == "failed" && created_at > timestamp("2026-01-02T00:00:00Z")',
)


def runs(count: int) -> list[SampleRun]:
    """``count`` runs: 20 per customer, amounts 0..9999, eight regions, a vip in seven."""
    draw = random.Random(1)
    statuses = ("completed", "waiting", "awaiting_input", "failed")
    return [
        SampleRun(
            run_id=f"run-{n:07d}",
            status=draw.choice(statuses),
            outcome=draw.choice((None, "approved", "rejected")),
            workflow=draw.choice(("orders", "refunds")),
            created_at=BASE + n,
            fields={
                "customer": f"c{n % 5000}",
                "amount": float((n * 37) % 10_000),
                "vip": n % 7 == 0,
                "region": f"r{n % 8}",
            },
        )
        for n in range(count)
    ]


async def timed(store: object, repeat: int) -> dict[str, dict[str, float]]:
    """Each filter's median and slowest listing and counting, in milliseconds."""
    figures: dict[str, dict[str, float]] = {}
    for text in FILTERS:
        where = parse_filter(text)
        listing, counting = [], []
        await store.search_runs(where, limit=50)  # type: ignore[attr-defined]
        for _ in range(repeat):
            started = time.perf_counter()
            found = await store.search_runs(where, limit=50)  # type: ignore[attr-defined]
            listing.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            count = await store.count_runs(where)  # type: ignore[attr-defined]
            counting.append((time.perf_counter() - started) * 1000)
        figures[text] = {
            "listed": len(found),
            "matched": count,
            "list_median_ms": round(statistics.median(listing), 2),
            "list_max_ms": round(max(listing), 2),
            "count_median_ms": round(statistics.median(counting), 2),
        }
    return figures


async def on_sqlite(data: list[SampleRun], repeat: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "search.sqlite")
        store = SqliteStore(path)
        await store.count_runs(parse_filter("true"))
        populate_sqlite(path, data)
        try:
            return await timed(store, repeat)
        finally:
            await store.close()


async def on_postgres(data: list[SampleRun], repeat: int) -> dict[str, dict[str, float]]:
    import psycopg  # noqa: PLC0415

    schema = f"treadle_bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(DSN, schema=schema)
    try:
        await store.count_runs(parse_filter("true"))
        await populate_postgres(DSN, schema, data)
        return await timed(store, repeat)
    finally:
        await store.close()
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as db:
            await db.execute(f'DROP SCHEMA "{schema}" CASCADE')


def report(results: dict[str, object], count: int, repeat: int) -> str:
    lines = [
        "# Search: filters over runs with search fields",
        "",
        (
            f"{count:,} runs, `python benchmarks/search.py --runs {count} --repeat {repeat}`"
            f" on {results['machine']}. Each figure is through the store's own `search_runs`"
            " (first 50, newest first) and `count_runs`; median of the timed calls (max in"
            " brackets), milliseconds."
        ),
        "",
        "| filter | backend | matched | list median (max) | count median |",
        "|---|---|---:|---:|---:|",
    ]
    for backend in ("sqlite", "postgres"):
        figures = results.get(backend)
        if not isinstance(figures, dict):
            continue
        for text, row in figures.items():
            lines.append(
                f"| `{text}` | {backend} | {row['matched']:,} | {row['list_median_ms']}"
                f" ({row['list_max_ms']}) | {row['count_median_ms']} |"
            )
    return "\n".join(lines) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args()
    data = runs(options.runs)
    results: dict[str, object] = {
        "runs": options.runs,
        "repeat": options.repeat,
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "sqlite": await on_sqlite(data, options.repeat),
    }
    if not options.no_postgres:
        results["postgres"] = await on_postgres(data, options.repeat)
    (BENCH / "search.json").write_text(json.dumps(results, indent=2) + "\n")
    (BENCH / "SEARCH.md").write_text(report(results, options.runs, options.repeat))
    print(report(results, options.runs, options.repeat))


if __name__ == "__main__":
    asyncio.run(main())
