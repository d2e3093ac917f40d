"""What moving parked runs to a new version costs, against the store work it cannot avoid.

    python benchmarks/versions.py [--runs 1000] [--repeat 3]

``--runs`` runs of version 1 park on a question in a SQLite file (the
embedded default store); then, per run, on a copy of that file:

* **migrate**: ``treadle.versions.migrate`` moving every run to version 2
  (a rename and a new state key): lease, read, decode, migrate, check
  against the new graph, encode, write, in one transaction per run;
* **dry run**: the same, writing nothing and taking no lease;
* **floor**: what any per-run move must do on this store and nothing else:
  lease the run, read its latest checkpoint, and write one checkpoint (the
  bytes it read, under a new id) with the lease given up, one transaction
  per run, no decoding or encoding.

The report gives milliseconds per run (medians of ``--repeat``) and the
ratio of each to the floor measured in the same run, written to
``benchmarks/VERSIONS.md``. Figures are for comparing versions of treadle
on this machine, not promises.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from treadle.stores import SqliteStore
from treadle.versions import migrate

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "migrations"))
import migrate_app  # the two versions and the migration the tests use

REPORT = Path(__file__).with_name("VERSIONS.md")


async def park(path: Path, runs: int) -> None:
    store = SqliteStore(path)
    try:
        for n in range(runs):
            await migrate_app.intake_v1.run(f"draft {n}", run_id=f"r{n:05d}", store=store)
    finally:
        await store.close()


async def timed_migrate(path: Path, *, dry_run: bool) -> float:
    store = SqliteStore(path)
    try:
        start = time.perf_counter()
        report = await migrate(
            store,
            migrate_app.intake,
            [migrate_app.approve_becomes_review],
            from_version=1,
            previous=migrate_app.intake_v1,
            dry_run=dry_run,
        )
        elapsed = time.perf_counter() - start
        if not report.ok:
            refused = [r for r in report.runs if r.outcome not in ("moved", "would move")]
            raise RuntimeError(f"runs did not move: {refused[:3]}")
        return elapsed
    finally:
        await store.close()


async def timed_floor(path: Path) -> float:
    store = SqliteStore(path)
    try:
        rows = await store.list_runs(workflow="intake")
        start = time.perf_counter()
        for n, row in enumerate(rows):
            lease = await store.acquire(row.run_id, "bench:1:floor", 30)
            _, _, record = await store.load_resumable(row.run_id, None)
            if record is None:
                raise RuntimeError(f"run {row.run_id} has no checkpoint")
            info = dataclasses.replace(
                record.info,
                checkpoint_id=f"floor-{n}",
                parent_checkpoint_id=record.info.checkpoint_id,
                created_at=time.time(),
            )
            copy = dataclasses.replace(record, info=info, pieces=(), requires=record.refs)
            await store.commit_many((copy,), lease=lease, release=True)
        return time.perf_counter() - start
    finally:
        await store.close()


async def measure(runs: int, repeat: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"migrate": [], "dry run": [], "floor": []}
    with tempfile.TemporaryDirectory() as tmp:
        parked = Path(tmp) / "parked.sqlite"
        await park(parked, runs)
        for _ in range(repeat):
            for name, taken in timings.items():
                copy = Path(tmp) / f"{name.replace(' ', '_')}.sqlite"
                shutil.copy(parked, copy)
                if name == "floor":
                    elapsed = await timed_floor(copy)
                else:
                    elapsed = await timed_migrate(copy, dry_run=name == "dry run")
                taken.append(elapsed / runs * 1000)
                copy.unlink()
    return timings


def write_report(timings: dict[str, list[float]], runs: int, repeat: int) -> str:
    floor = statistics.median(timings["floor"])
    lines = [
        "# Moving parked runs to a new version",
        "",
        (
            f"`python benchmarks/versions.py --runs {runs} --repeat {repeat}` on "
            f"{platform.machine()}, Python {platform.python_version()}, a SQLite file "
            f"(WAL, synchronous=FULL). Milliseconds per run, medians of {repeat}."
        ),
        "",
        "| | ms per run | x floor |",
        "|---|---:|---:|",
    ]
    for name in ("migrate", "dry run", "floor"):
        median = statistics.median(timings[name])
        lines.append(f"| {name} | {median:.2f} | {median / floor:.2f} |")
    lines += [
        "",
        (
            "The floor leases each run, reads its checkpoint and writes it back under "
            "a new id with the lease given up, one transaction per run: the store work "
            "any per-run move needs. `migrate` adds decoding with version 1's codec, the "
            "migration function, the check against version 2's graph (a full encode and "
            "decode) and the encode it writes."
        ),
        "",
    ]
    REPORT.write_text("\n".join(lines))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    timings = asyncio.run(measure(args.runs, args.repeat))
    print(write_report(timings, args.runs, args.repeat))


if __name__ == "__main__":
    main()
