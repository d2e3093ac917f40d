"""The protocol shared by every engine file: workload specs, counting, timing, one JSON line.

An engine file (``engines/<name>.py``) defines one *factory* per workload it can express::

    async def chain() -> RunFn: ...        # builds the graph once, returns "do one run"

and a module-level ``ABSENT = {"workload": "why this engine cannot express it"}``.
The factory's node bodies do ``calls.n += 1``; the harness resets the counter before
every run and fails loudly when the count differs from the workload's expectation.

``idle_runs`` is not a timed run but a park-then-wake cycle: its factory returns a
:class:`Parking` (start run *i* until it rests durably; wake every parked run), and the
harness measures memory, store size and time around it (:func:`_idle`).

``growing_state`` is one long run too: its factory returns a :class:`Growing` (run *n*
supersteps that each append :func:`item` to a durable list), the node body also does
``stamps.append(time.perf_counter())``, and the harness turns those entry times into the
cost of the first and of the last 100 supersteps (:func:`_growing`).

An engine that runs a workload at another size than the spec's ``units`` (fewer runs in
``many_durable_runs``, say) lists it in a module-level ``UNITS = {"workload": n}``; the
expected invocation count scales with it, and the line reports ``n``.

A child process is started by ``run.py`` as::

    benchmarks/.venv/bin/python -c "import _workload; _workload.main()" ENGINE WORKLOAD [--quick]

with ``benchmarks/`` as its working directory, so ``engines.<name>`` and ``_workload`` import
cleanly and no engine file can shadow the package it benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

RunFn = Callable[[], Awaitable[Any]]
Factory = Callable[[], Awaitable[RunFn]]

CHAIN_NODES = 100
FANOUT_WIDTH = 100
LOOP_ITERATIONS = 1_000
MANY_RUNS = 1_000
MANY_RUNS_CHAIN = 3
CKPT_NODES = 100
CKPT_BLOB_BYTES = 300
IDLE_RUNS = 100_000
IDLE_SLEEP_S = 3_600
IDLE_BATCH = 100  # runs started at once (asyncio.gather) while parking
IDLE_CALLS_PER_RUN = 2  # the handler runs once to park and once more when woken
GROWING_STEPS = 1_500  # supersteps of the one `growing_state` run
GROWING_QUICK_STEPS = 400  # with --quick
GROWING_ITEM_CHARS = 1_000  # each superstep appends one string this long (1 KB)
GROWING_WINDOW = 100  # the first and the last this many supersteps are compared
DURABLE_RUNS = 1_000  # concurrent runs in `many_durable_runs`
DURABLE_RUN_STEPS = 5  # nodes in each run's chain, one durable superstep each


@dataclass(frozen=True)
class Workload:
    name: str
    units: int  # what one timed run is divided by
    unit: str  # what a unit is, for the tables
    expected_calls: int  # node-body invocations one run must make
    runs: int  # timed runs per child (upper bound; see budget_s)
    quick_runs: int
    warmup: int = 3
    budget_s: float = 3.0  # stop timing early once this much time is spent (min 3 runs)
    description: str = ""
    # "timed": warm-up then timed runs; "idle": one park-then-wake cycle; "growing": one
    # long run timed superstep by superstep
    kind: str = "timed"
    max_repeat: int | None = None  # repetitions at most, whatever --repeat says
    timeout_s: int = 300  # the runner kills a child after this long
    # Figures beyond ``value`` shown as rows of their own: (key, unit label, ratio to floor?)
    extra: tuple[tuple[str, str, bool], ...] = ()


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "chain",
            CHAIN_NODES,
            "µs/node step",
            CHAIN_NODES,
            runs=30,
            quick_runs=5,
            description=f"{CHAIN_NODES} nodes in a line, one message passed along",
        ),
        Workload(
            "fanout",
            FANOUT_WIDTH,
            "µs/parallel node",
            FANOUT_WIDTH + 2,
            runs=30,
            quick_runs=5,
            description=f"1 -> {FANOUT_WIDTH} parallel -> fan-in 1; total time / {FANOUT_WIDTH}",
        ),
        Workload(
            "loop",
            LOOP_ITERATIONS,
            "µs/iteration",
            2 * LOOP_ITERATIONS,
            runs=10,
            quick_runs=3,
            description=f"2-node cycle A->B->A, exit after {LOOP_ITERATIONS} round trips",
        ),
        Workload(
            "many_runs",
            MANY_RUNS,
            "µs/run",
            MANY_RUNS * MANY_RUNS_CHAIN,
            runs=5,
            quick_runs=3,
            warmup=2,
            description=f"{MANY_RUNS} concurrent runs (asyncio.gather) of a "
            f"{MANY_RUNS_CHAIN}-node chain on one workflow object",
            extra=(("runs_per_s", "runs/s", False), ("maxrss_mb", "peak RSS, MB", True)),
        ),
        Workload(
            "many_durable_runs",
            DURABLE_RUNS,
            "µs/run",
            DURABLE_RUNS * DURABLE_RUN_STEPS,
            runs=5,
            quick_runs=3,
            warmup=1,
            description=f"{DURABLE_RUNS:,} concurrent runs (asyncio.gather) of a "
            f"{DURABLE_RUN_STEPS}-node chain on one SQLite file, every superstep durable "
            '(`durability="sync"`, fsync\'d) before the run goes on; the headline is durable '
            f"supersteps per second ({DURABLE_RUNS * DURABLE_RUN_STEPS:,} / wall time; an "
            "engine running fewer runs says so in its runs row)",
            timeout_s=900,
            extra=(
                ("supersteps_per_s", "durable supersteps/s", False),
                ("n", "concurrent runs", False),
            ),
        ),
        Workload(
            "ckpt_chain",
            CKPT_NODES,
            "µs/node step",
            CKPT_NODES,
            runs=10,
            quick_runs=3,
            description=f"`chain` of {CKPT_NODES} nodes, durably checkpointed (fsync'd SQLite, "
            "WAL, synchronous=FULL) after every step; each step waits for its commit",
        ),
        Workload(
            "ckpt_chain_background",
            CKPT_NODES,
            "µs/node step",
            CKPT_NODES,
            runs=10,
            quick_runs=3,
            description="`ckpt_chain` with the commit of a step's checkpoint overlapping the "
            'next step (at most one commit in flight; treadle `durability="background"`, '
            'LangGraph `durability="async"`); the floor is the same fsync\'d insert per step',
        ),
        Workload(
            "ckpt_chain_batched",
            CKPT_NODES,
            "µs/node step",
            CKPT_NODES,
            runs=10,
            quick_runs=3,
            description="`ckpt_chain` with steps going on while up to 16 commits queue, written "
            'in shared fsync\'d transactions (treadle `durability="batched"`: a crash loses at '
            "most the last 16 steps' checkpoints); the floor inserts every step and commits "
            "(fsync) every 16th",
        ),
        Workload(
            "idle_runs",
            IDLE_RUNS,
            "µs/run to wake",
            IDLE_CALLS_PER_RUN,  # per parked run
            runs=1,
            quick_runs=1,
            warmup=0,
            description=f"{IDLE_RUNS:,} runs (a tenth with --quick) parked on a durable "
            f"{IDLE_SLEEP_S} s timer in a SQLite store, started {IDLE_BATCH} at a time; "
            "memory and store size while parked, then the time to wake and complete them all "
            "(one cycle, no warm-up)",
            kind="idle",
            max_repeat=1,
            timeout_s=1_800,
            extra=(
                ("wake_s", "s to wake all", False),
                ("park_us", "µs/run to park", True),
                ("peak_rss_b", "peak RSS growth while parking, bytes/parked run", True),
                ("marginal_rss_b", "RSS growth over the last 90% parked, bytes/parked run", False),
                ("store_b", "store file size, bytes/parked run", True),
                ("n", "parked runs", False),
            ),
        ),
        Workload(
            "growing_state",
            GROWING_STEPS,
            f"µs/superstep, last {GROWING_WINDOW}",
            GROWING_STEPS,
            runs=1,
            quick_runs=1,
            warmup=0,
            description=f"one executor looping on itself for {GROWING_STEPS:,} supersteps "
            f"({GROWING_QUICK_STEPS} with --quick), each appending a distinct "
            f"{GROWING_ITEM_CHARS:,}-character string to a declared list state key with an "
            '`operator.add` reducer, on a SQLite file store, `durability="sync"`; a superstep '
            "costs the time from its node's entry to the next one's (the last: to the run's "
            f"return); the first and the last {GROWING_WINDOW} supersteps, their ratio, and "
            "the store's size (file plus `-wal`) after the run (one run, no warm-up)",
            kind="growing",
            max_repeat=1,
            timeout_s=1_200,
            extra=(
                ("early_us", f"µs/superstep, first {GROWING_WINDOW}", True),
                ("growth", f"last {GROWING_WINDOW} / first {GROWING_WINDOW}", False),
                ("store_mb", "store file at the end, MB", True),
                ("n", "supersteps", False),
            ),
        ),
    )
}


def item(i: int) -> str:
    """The 1 KB string superstep ``i`` appends in ``growing_state`` (distinct per step)."""
    head = f"item {i:06d} "
    return head + "abcdefghij"[i % 10] * (GROWING_ITEM_CHARS - len(head))


@dataclass(frozen=True)
class Parking:
    """What an engine gives ``idle_runs``: how to park run *i*, how to wake them all.

    ``park(i)`` starts run *i* and returns once it rests in the store, raising
    ``WorkloadError`` if it did not. ``wake_all(n)`` moves time past the timers, wakes
    the ``n`` parked runs and returns how many completed. ``store_path`` is the store's
    file (its ``-wal`` file is counted too). ``n`` is how many runs this engine parks
    (the harness parks a tenth of it with ``--quick``).
    ``stored_completed()``, if given, counts the completed runs in the store (untimed).
    """

    park: Callable[[int], Awaitable[None]]
    wake_all: Callable[[int], Awaitable[int]]
    store_path: str
    n: int = IDLE_RUNS
    stored_completed: Callable[[], Awaitable[int]] | None = None


@dataclass(frozen=True)
class Growing:
    """What an engine gives ``growing_state``: how to run ``n`` supersteps, where the store is.

    ``run(n)`` makes one durable run whose one node runs ``n`` times, appending ``item(i)``
    to a list in the run's state at superstep ``i`` (its body does ``calls.n += 1`` and
    ``stamps.append(time.perf_counter())`` on entry), and returns the length of the list
    the run ends with. ``store_path`` is the store's file (its ``-wal`` file is counted).
    """

    run: Callable[[int], Awaitable[int]]
    store_path: str


class Calls:
    """Node-body invocation counter. Engines do ``calls.n += 1`` in every node body."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


calls = Calls()
stamps: list[float] = []  # `growing_state`: time.perf_counter() at every node entry
_exit_stack = contextlib.AsyncExitStack()


async def enter(cm: contextlib.AbstractAsyncContextManager[Any]) -> Any:
    """Enter an async context manager that stays open until the child finishes."""
    return await _exit_stack.enter_async_context(cm)


def on_exit(callback: Callable[[], Awaitable[Any]]) -> None:
    """Await ``callback()`` when the child finishes (before scratch files are removed)."""
    _exit_stack.push_async_callback(callback)


def scratch_path(name: str) -> str:
    """A file path in a temporary directory removed when the child finishes.

    The directory is made inside ``$BENCH_SCRATCH`` (the runner's one scratch directory
    for the whole run), so every engine's store and the floor's file share a filesystem.
    """
    import tempfile  # noqa: PLC0415

    root = os.environ.get("BENCH_SCRATCH") or None
    tmp = _exit_stack.enter_context(tempfile.TemporaryDirectory(prefix="child-", dir=root))
    return f"{tmp}/{name}"


class WorkloadError(AssertionError):
    pass


def expect(actual: Any, expected: Any, what: str) -> None:
    """Fail the workload loudly when a node sees something other than it should."""
    if actual != expected:
        raise WorkloadError(f"{what}: expected {expected!r}, got {actual!r}")


async def _measure(factory: Factory, spec: Workload, runs: int, expected: int) -> list[int]:
    async with _exit_stack:
        run = await factory()
        for _ in range(spec.warmup):
            calls.n = 0
            await run()
            _check(spec, expected, "warm-up")
        timings: list[int] = []
        deadline = time.perf_counter_ns() + int(spec.budget_s * 1e9)
        for i in range(runs):
            calls.n = 0
            t0 = time.perf_counter_ns()
            await run()
            timings.append(time.perf_counter_ns() - t0)
            _check(spec, expected, f"timed run {i}")
            if i >= 2 and time.perf_counter_ns() > deadline:
                break
        return timings


def _rss_bytes() -> int:
    """The process's resident set size now (``ru_maxrss`` only ever grows)."""
    with open("/proc/self/statm") as f:  # noqa: PTH123
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _store_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))  # noqa: PTH110, PTH202


async def _idle(factory: Factory, spec: Workload, quick: bool) -> dict[str, Any]:
    """Park every run, measure memory and store size while they rest, time waking them."""
    async with _exit_stack:
        parking: Parking = await factory()  # type: ignore[assignment]
        n = parking.n // 10 if quick else parking.n
        calls.n = 0
        gc.collect()
        rss_before = _rss_bytes()
        samples: list[int] = []
        t0 = time.perf_counter_ns()
        for first in range(0, n, IDLE_BATCH):
            batch = range(first, min(n, first + IDLE_BATCH))
            await asyncio.gather(*(parking.park(i) for i in batch))
            samples.append(_rss_bytes())
        park_ns = time.perf_counter_ns() - t0
        expect(calls.n, n, "handler invocations while parking")
        gc.collect()
        rss_parked = _rss_bytes()
        tenth = samples[len(samples) // 10 - 1] if len(samples) >= 10 else rss_before
        store = _store_bytes(parking.store_path)
        t0 = time.perf_counter_ns()
        completed = await parking.wake_all(n)
        wake_ns = time.perf_counter_ns() - t0
        expect(completed, n, "runs completed after waking")
        if parking.stored_completed is not None:
            expect(await parking.stored_completed(), n, "runs the store says completed")
        if calls.n != spec.expected_calls * n:
            raise WorkloadError(
                f"{spec.name}: expected {spec.expected_calls * n} handler invocations, "
                f"counted {calls.n}"
            )
        return {
            "value": wake_ns / 1_000 / n,
            "wake_s": wake_ns / 1e9,
            "park_us": park_ns / 1_000 / n,
            "peak_rss_b": (max([*samples, rss_parked]) - rss_before) / n,
            "marginal_rss_b": (rss_parked - tenth) / (n - n // 10),
            "held_rss_b": (rss_parked - rss_before) / n,
            "store_b": store / n,
            "n": n,
            "runs": 1,
        }


async def _growing(factory: Factory, spec: Workload, quick: bool) -> dict[str, Any]:
    """One run of ``n`` supersteps; the cost of the first and of the last 100 of them."""
    async with _exit_stack:
        growing: Growing = await factory()  # type: ignore[assignment]
        n = GROWING_QUICK_STEPS if quick else GROWING_STEPS
        calls.n = 0
        stamps.clear()
        t0 = time.perf_counter()
        length = await growing.run(n)
        end = time.perf_counter()
        store = _store_bytes(growing.store_path)  # after the run, before the store closes
        expect(length, n, "items in the list the run ends with")
        _check(spec, n, "the run")
        expect(len(stamps), n, "node entries timestamped")
        # Superstep k (1-based) costs entries[k] - entries[k - 1]: from its node's entry to
        # the next superstep's, the last one's to the run's return.
        entries = [*stamps, end]
        w = GROWING_WINDOW
        early = (entries[w] - entries[0]) / w * 1e6
        late = (entries[n] - entries[n - w]) / w * 1e6
        return {
            "value": late,
            "early_us": early,
            "growth": late / early,
            "store_mb": store / 1e6,
            "n": n,
            "run_s": end - t0,
            "runs": 1,
        }


def _check(spec: Workload, expected: int, when: str) -> None:
    if calls.n != expected:
        raise WorkloadError(
            f"{spec.name}: expected {expected} node invocations per run, counted {calls.n} ({when})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine")
    parser.add_argument("workload")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    spec = WORKLOADS[args.workload]
    line: dict[str, Any] = {"engine": args.engine, "workload": spec.name}
    try:
        module = importlib.import_module(f"engines.{args.engine}")
    except Exception as exc:  # the engine is missing or broken: say so, do not crash the run
        line |= {"status": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(line))
        return
    absent: dict[str, str] = getattr(module, "ABSENT", {})
    factory: Factory | None = getattr(module, spec.name, None)
    if spec.name in absent or factory is None:
        reason = absent.get(spec.name, "no adapter written for this workload")
        line |= {"status": "absent", "reason": reason}
        print(json.dumps(line))
        return
    if spec.kind == "idle":
        line |= {"status": "ok", "unit": spec.unit} | asyncio.run(_idle(factory, spec, args.quick))
    elif spec.kind == "growing":
        line |= {"status": "ok", "unit": spec.unit}
        line |= asyncio.run(_growing(factory, spec, args.quick))
    else:
        units = getattr(module, "UNITS", {}).get(spec.name, spec.units)
        expected = spec.expected_calls * units // spec.units
        runs = spec.quick_runs if args.quick else spec.runs
        timings = asyncio.run(_measure(factory, spec, runs, expected))
        median_ns = statistics.median(timings)
        line |= {
            "status": "ok",
            "unit": spec.unit,
            "value": median_ns / 1_000 / units,
            "runs": len(timings),
            "median_run_ms": median_ns / 1e6,
        }
        if spec.name == "many_runs":
            line["runs_per_s"] = units / (median_ns / 1e9)
        if spec.name == "many_durable_runs":
            line["supersteps_per_s"] = units * DURABLE_RUN_STEPS / (median_ns / 1e9)
            line["n"] = units
    line["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    note = getattr(module, "NOTES", {}).get(spec.name)
    if note:
        line["note"] = note
    print(json.dumps(line))
    sys.stdout.flush()
