"""What SQLite itself charges for a durable superstep, by how its rows are laid out.

    python benchmarks/commit_layouts.py [--commits 1500] [--rounds 9]

Issue 33 asks ``ckpt_chain`` (one run, a durable superstep a step) to cost at
most 1.10 times its floor with the event log on. The floor
(``engines/raw_asyncio.py``) appends one 300-byte row to a table with no
index and commits: one page in the write-ahead log, one fsync. This script
leaves treadle's Python out and times only the transactions, on one file
system, in interleaved rounds, so each layout reads as a ratio to that
floor measured beside it:

* ``floor``: the floor's transaction.
* ``floor, 600 bytes``: the same with a row as long as a checkpoint and its
  events together, to tell bytes from pages.
* ``treadle's tables``: what a sync commit of a chain step wrote before
  schema step 20, on the tables treadle's own migrations made (an event
  row, a checkpoint row with its two indexes, the run row moved on under
  its lease), as raw SQL.
* ``treadle's tables, events in the checkpoint's row``: what it writes since
  (on SQLite): the checkpoint row holds the step's events, with one index
  by run beside its id's, and the run row moved on.
* ``one row a superstep, run row moved``: the checkpoint and its events in
  one row keyed by (run, superstep), and the run row moved on.
* ``one row a superstep, run row read``: the same, the lease checked by a
  read rather than a write (the run row written only when its status
  changes), the least a layout that keeps an event log and finds a run's
  checkpoints by run can write.

Writes ``benchmarks/LAYOUTS.md`` and ``benchmarks/layouts.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore

BENCH = Path(__file__).resolve().parent

RUN_ID = "01a2250da1537bf3bf4686af1d4f2634"
FLOOR_BYTES = 300  # the floor's row (_workload.CKPT_BLOB_BYTES)
CHECKPOINT_BYTES = 340  # a chain step's checkpoint, as treadle encodes it
EVENTS_TEXT = "x" * 215  # a chain step's five events, as treadle's log row holds them
OTHER_RUNS = 2_000  # rows beside the run's in the runs table

Step = Callable[[int], None]


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    return connection


def _id(number: int) -> str:
    return f"01a2250da15{number:021d}"


def floor(directory: Path, size: int) -> Step:
    connection = _connect(directory / f"floor-{size}.sqlite")
    connection.execute("CREATE TABLE checkpoints (run INTEGER, superstep INTEGER, blob BLOB)")
    blob = os.urandom(size)

    def step(number: int) -> None:
        connection.execute("BEGIN")
        connection.execute("INSERT INTO checkpoints VALUES (1, ?, ?)", (number, blob))
        connection.execute("COMMIT")

    return step


def _treadle_file(path: Path) -> None:
    """A file with treadle's schema and a leased run (made by treadle), then closed."""

    @executor(id="rest")
    async def rest(message: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(3600)

    async def make() -> None:
        store = SqliteStore(path)
        workflow = WorkflowBuilder(start=rest, name="layouts").build()
        for number in range(OTHER_RUNS):
            run_id = RUN_ID if number == OTHER_RUNS // 2 else _id(number)
            await workflow.run(number, store=store, run_id=run_id, record_events=False)
        await store.close()

    asyncio.run(make())
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(
        "UPDATE treadle_runs SET status = 'running', owner = 'me', lease_epoch = 7"
        " WHERE run_id = ?",
        (RUN_ID,),
    )
    connection.close()


def treadle_tables(directory: Path, *, events_in_checkpoint: bool) -> Step:
    path = directory / f"treadle-{int(events_in_checkpoint)}.sqlite"
    _treadle_file(path)
    connection = _connect(path)
    blob = os.urandom(CHECKPOINT_BYTES)

    def step(number: int) -> None:
        now = time.time()
        seqs = (1_000 + number * 5, 1_004 + number * 5)
        checkpoint = (_id(10_000_000 + number), RUN_ID, 100 + number, _id(9_999_999 + number))
        connection.execute("BEGIN IMMEDIATE")
        if events_in_checkpoint:
            connection.execute(
                "INSERT INTO treadle_checkpoints (checkpoint_id, run_id, superstep, status,"
                " parent_checkpoint_id, created_at, blob, first_seq, last_seq, events)"
                " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (*checkpoint, now, blob, *seqs, EVENTS_TEXT),
            )
        else:
            connection.execute(
                "INSERT INTO treadle_events (run_id, first_seq, last_seq, events)"
                " VALUES (?, ?, ?, ?)",
                (RUN_ID, *seqs, EVENTS_TEXT),
            )
            connection.execute(
                "INSERT INTO treadle_checkpoints (checkpoint_id, run_id, superstep, status,"
                " parent_checkpoint_id, created_at, blob) VALUES (?, ?, ?, 'running', ?, ?, ?)",
                (*checkpoint, now, blob),
            )
        moved = connection.execute(
            "UPDATE treadle_runs SET superstep = ?, checkpoint_id = ?, updated_at = ?"
            " WHERE run_id = ? AND owner = 'me' AND lease_epoch = 7",
            (100 + number, checkpoint[0], now, RUN_ID),
        )
        assert moved.rowcount == 1  # noqa: S101 - the fence held
        connection.execute("COMMIT")

    return step


def _one_row_file(path: Path) -> sqlite3.Connection:
    connection = _connect(path)
    connection.execute(
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, workflow TEXT, status TEXT,"
        " superstep INTEGER, checkpoint_id TEXT, updated_at REAL, owner TEXT,"
        " lease_epoch INTEGER, lease_until REAL, started_by TEXT)"
    )
    connection.execute("CREATE INDEX runs_status ON runs (status)")
    connection.executemany(
        "INSERT INTO runs VALUES (?, 'layouts', 'running', 0, NULL, 0, 'me', 7, 0, ?)",
        [
            (RUN_ID if n == OTHER_RUNS // 2 else _id(n), '{"kind":"python"}')
            for n in range(OTHER_RUNS)
        ],
    )
    connection.execute(
        "CREATE TABLE steps (run_id TEXT, superstep INTEGER, checkpoint_id TEXT, status TEXT,"
        " created_at REAL, blob BLOB, events TEXT, PRIMARY KEY (run_id, superstep))"
        " WITHOUT ROWID"
    )
    return connection


def one_row(directory: Path, *, move_run_row: bool) -> Step:
    connection = _one_row_file(directory / f"one-row-{int(move_run_row)}.sqlite")
    blob = os.urandom(CHECKPOINT_BYTES)

    def step(number: int) -> None:
        now = time.time()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "INSERT INTO steps VALUES (?, ?, ?, 'running', ?, ?, ?)",
            (RUN_ID, number, _id(number), now, blob, EVENTS_TEXT),
        )
        if move_run_row:
            fenced = connection.execute(
                "UPDATE runs SET superstep = ?, checkpoint_id = ?, updated_at = ?"
                " WHERE run_id = ? AND owner = 'me' AND lease_epoch = 7",
                (number, _id(number), now, RUN_ID),
            ).rowcount
        else:
            fenced = len(
                connection.execute(
                    "SELECT 1 FROM runs WHERE run_id = ? AND owner = 'me' AND lease_epoch = 7",
                    (RUN_ID,),
                ).fetchall()
            )
        assert fenced == 1  # noqa: S101 - the fence held
        connection.execute("COMMIT")

    return step


LAYOUTS: dict[str, Callable[[Path], Step]] = {
    "floor": lambda d: floor(d, FLOOR_BYTES),
    "floor, 600 bytes": lambda d: floor(d, CHECKPOINT_BYTES + len(EVENTS_TEXT)),
    "treadle's tables": lambda d: treadle_tables(d, events_in_checkpoint=False),
    "treadle's tables, events in the checkpoint's row": lambda d: treadle_tables(
        d, events_in_checkpoint=True
    ),
    "one row a superstep, run row moved": lambda d: one_row(d, move_run_row=True),
    "one row a superstep, run row read": lambda d: one_row(d, move_run_row=False),
}


def measure(commits: int, rounds: int, directory: Path) -> dict[str, list[float]]:
    """Microseconds a commit, per round, of each layout; rounds interleave the layouts."""
    steps = {name: make(directory) for name, make in LAYOUTS.items()}
    timings: dict[str, list[float]] = {name: [] for name in steps}
    for round_number in range(rounds):
        for name, step in steps.items():
            first = round_number * commits + 1
            began = time.perf_counter()
            for number in range(first, first + commits):
                step(number)
            timings[name].append((time.perf_counter() - began) / commits * 1e6)
    return timings


def report(timings: dict[str, list[float]], commits: int, rounds: int, where: str) -> str:
    floor_us = statistics.median(timings["floor"])
    rows = []
    for name, values in timings.items():
        median = statistics.median(values)
        spread = (max(values) - min(values)) / 2 / median * 100
        rows.append(f"| {name} | {median:,.1f} | {median / floor_us:.2f}x | ±{spread:.0f}% |")
    return "\n".join(
        [
            "# What SQLite charges for a durable superstep, by layout",
            "",
            "Generated by `benchmarks/commit_layouts.py`; do not edit by hand. Its docstring",
            "says what each layout writes.",
            "",
            f"- Date: {time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime())}",
            (
                f"- Machine: {os.cpu_count()} cores; {platform.platform()}; Python "
                f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}"
            ),
            f"- Files in {where}; WAL, synchronous=FULL (every commit fsync'd)",
            (
                f"- {rounds} rounds of {commits:,} commits per layout, interleaved; a cell is "
                "the median over rounds; spread is half the max-min range, as % of the median"
            ),
            "",
            "| layout | µs/commit | vs floor | spread |",
            "|---|---:|---:|---:|",
            *rows,
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1_500)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    root = os.environ.get("BENCH_SCRATCH") or None
    with tempfile.TemporaryDirectory(prefix="treadle-layouts-", dir=root) as scratch:
        directory = Path(scratch)
        timings = measure(args.commits, args.rounds, directory)
        text = report(timings, args.commits, args.rounds, str(directory.parent))
    (BENCH / "LAYOUTS.md").write_text(text, encoding="utf-8")
    (BENCH / "layouts.json").write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
