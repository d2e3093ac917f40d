"""How much of ``many_durable_runs`` is Python's cyclic garbage collector: ``python gc_share.py``.

Runs 3,000 durable runs of ``many_durable_runs``' 5-executor chain on a
SQLite file in /dev/shm (so the fsyncs cost next to nothing and what shows
is CPU), 100 or 1,000 at a time, each way in a subprocess of its own:
with the collector as Python sets it, and with it off. It times the
collector's passes by generation (``gc.callbacks``), counts the objects
each in-flight run keeps at the moment a group commit starts, and counts
what a collection finds unreachable after the runs end (cyclic garbage,
which only the collector frees). Writes ``GC.md`` beside this file.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = 3_000


def _measure(concurrency: int, collector: str) -> dict[str, object]:
    sys.path.insert(0, str(HERE))
    from durable_superstep import _chain  # noqa: PLC0415 - in the child only

    from treadle._stores import _sqlite_transactions  # noqa: PLC0415
    from treadle.stores import SqliteStore  # noqa: PLC0415

    passes: collections.Counter[int] = collections.Counter()
    seconds: collections.Counter[int] = collections.Counter()
    started: list[float] = []

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        else:
            passes[info["generation"]] += 1
            seconds[info["generation"]] += time.perf_counter() - started.pop()

    kept: dict[str, float] = {}
    grouped = _sqlite_transactions.each_together

    def each_together(works, connection):  # type: ignore[no-untyped-def]
        if len(works) >= concurrency // 2 and "per_run" not in kept:
            alive = len(gc.get_objects())
            kept["per_run"] = (alive - kept["before"]) / concurrency
        return grouped(works, connection)

    _sqlite_transactions.each_together = each_together

    async def main() -> dict[str, object]:
        store = SqliteStore(Path(tempfile.mkdtemp(dir="/dev/shm")) / "runs.sqlite")
        workflow = _chain(5)
        await asyncio.gather(*(workflow.run(0, store=store) for _ in range(10)))
        gc.collect()
        kept["before"] = len(gc.get_objects())
        if collector == "off":
            gc.disable()
        gc.callbacks.append(timed)
        t0 = time.perf_counter()
        for _ in range(RUNS // concurrency):
            results = await asyncio.gather(
                *(workflow.run(0, store=store, durability="sync") for _ in range(concurrency))
            )
            assert all(r.outputs == [4] for r in results)  # noqa: S101
        wall = time.perf_counter() - t0
        gc.callbacks.remove(timed)
        del results
        gc.enable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        cyclic = gc.collect()
        gc.set_debug(0)
        gc.garbage.clear()
        await store.close()
        return {
            "concurrency": concurrency,
            "collector": collector,
            "us_per_run": wall / RUNS * 1e6,
            "gc_s": sum(seconds.values()),
            "wall_s": wall,
            "passes": dict(passes),
            "objects_per_run_at_commit": kept.get("per_run"),
            "cyclic_per_run": cyclic / concurrency,
        }

    return asyncio.run(main())


def main() -> None:
    if len(sys.argv) == 3:
        print(json.dumps(_measure(int(sys.argv[1]), sys.argv[2])))
        return
    rows = []
    for concurrency in (100, 1_000):
        for collector in ("on", "off"):
            out = subprocess.run(
                [sys.executable, __file__, str(concurrency), collector],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rows.append(json.loads(out))
    lines = [
        "# The cyclic garbage collector in `many_durable_runs`",
        "",
        f"`python benchmarks/profiles/gc_share.py` ({RUNS:,} runs of a 5-executor chain,",
        'durability="sync", SQLite in /dev/shm; one process per row).',
        "",
        (
            "| runs at a time | collector | µs per run | collector's share | passes (gen 0/1/2) "
            "| objects a run keeps at its commit | cyclic garbage per run |"
        ),
        "|---:|---|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        passes = row["passes"]
        share = row["gc_s"] / row["wall_s"]
        lines.append(
            f"| {row['concurrency']:,} | {row['collector']} | {row['us_per_run']:,.0f} "
            f"| {share:.0%} | {passes.get('0', 0)}/{passes.get('1', 0)}/{passes.get('2', 0)} "
            f"| {row['objects_per_run_at_commit'] or 0:.0f} | {row['cyclic_per_run']:.1f} |"
        )
    (HERE / "GC.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    os.environ.pop("PROFILE_INLINE", None)
    main()
