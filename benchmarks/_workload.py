"""The protocol shared by every engine file: workload specs, counting, timing, one JSON line.

An engine file (``engines/<name>.py``) defines one *factory* per workload it can express::

    async def chain() -> RunFn: ...        # builds the graph once, returns "do one run"

and a module-level ``ABSENT = {"workload": "why this engine cannot express it"}``.
The factory's node bodies do ``calls.n += 1``; the harness resets the counter before
every run and fails loudly when the count differs from the workload's expectation.

A child process is started by ``run.py`` as::

    benchmarks/.venv/bin/python -c "import _workload; _workload.main()" ENGINE WORKLOAD [--quick]

with ``benchmarks/`` as its working directory, so ``engines.<name>`` and ``_workload`` import
cleanly and no engine file can shadow the package it benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
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
        ),
        Workload(
            "ckpt_chain",
            CKPT_NODES,
            "µs/node step",
            CKPT_NODES,
            runs=10,
            quick_runs=3,
            description=f"`chain` of {CKPT_NODES} nodes, durably checkpointed (fsync'd SQLite, "
            "WAL, synchronous=FULL) after every step",
        ),
    )
}


class Calls:
    """Node-body invocation counter. Engines do ``calls.n += 1`` in every node body."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


calls = Calls()
_exit_stack = contextlib.AsyncExitStack()


async def enter(cm: contextlib.AbstractAsyncContextManager[Any]) -> Any:
    """Enter an async context manager that stays open until the child finishes."""
    return await _exit_stack.enter_async_context(cm)


def scratch_path(name: str) -> str:
    """A file path inside a temporary directory removed when the child finishes."""
    import tempfile  # noqa: PLC0415

    tmp = _exit_stack.enter_context(tempfile.TemporaryDirectory(prefix="treadle-bench-"))
    return f"{tmp}/{name}"


class WorkloadError(AssertionError):
    pass


def expect(actual: Any, expected: Any, what: str) -> None:
    """Fail the workload loudly when a node sees something other than it should."""
    if actual != expected:
        raise WorkloadError(f"{what}: expected {expected!r}, got {actual!r}")


async def _measure(factory: Factory, spec: Workload, runs: int) -> list[int]:
    async with _exit_stack:
        run = await factory()
        for _ in range(spec.warmup):
            calls.n = 0
            await run()
            _check(spec, "warm-up")
        timings: list[int] = []
        deadline = time.perf_counter_ns() + int(spec.budget_s * 1e9)
        for i in range(runs):
            calls.n = 0
            t0 = time.perf_counter_ns()
            await run()
            timings.append(time.perf_counter_ns() - t0)
            _check(spec, f"timed run {i}")
            if i >= 2 and time.perf_counter_ns() > deadline:
                break
        return timings


def _check(spec: Workload, when: str) -> None:
    if calls.n != spec.expected_calls:
        raise WorkloadError(
            f"{spec.name}: expected {spec.expected_calls} node invocations per run, "
            f"counted {calls.n} ({when})"
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
    runs = spec.quick_runs if args.quick else spec.runs
    timings = asyncio.run(_measure(factory, spec, runs))
    median_ns = statistics.median(timings)
    line |= {
        "status": "ok",
        "unit": spec.unit,
        "value": median_ns / 1_000 / spec.units,
        "runs": len(timings),
        "median_run_ms": median_ns / 1e6,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    if spec.name == "many_runs":
        line["runs_per_s"] = spec.units / (median_ns / 1e9)
    note = getattr(module, "NOTES", {}).get(spec.name)
    if note:
        line["note"] = note
    print(json.dumps(line))
    sys.stdout.flush()
