"""Cluster benchmark: a CPU-bound fan-out in process (threads) and on a Dask LocalCluster.

    python benchmarks/cluster.py [--branches 64] [--rounds 1500000] [--repeat 3]
                                 [--workers 2] [--loops 200]

What it measures, on one workflow run two ways (``split`` -> ``--branches``
executors -> a fan-in ``gather``):

1. the wall time of a fan-out whose branches are CPU-bound pure Python
   (``--rounds`` of integer arithmetic each, about 40 ms on this machine),
   in process, where plain ``def`` handlers run in worker threads and share
   one GIL, and on a ``treadle.dask.DaskPool`` LocalCluster of ``--workers``
   processes with one thread each; the speed-up is their ratio, and the
   ideal on W cores is W;
2. the remote path's own cost with a trivial handler, two ways: the same
   fan-out with branches that do nothing (the cost per invocation when
   many are in flight at once), and a self-loop of ``--loops`` supersteps of
   one trivial invocation each (the round trip one invocation adds to its
   superstep: pack, submit, run on a worker, return, unpack), next to Dask's
   own cost for no-op tasks on the same cluster, in flight and one at a time.

Each measurement is repeated ``--repeat`` times, alternating in process and
on the cluster, after one untimed warm-up of each (the cluster is started
before, and its start-up reported apart); a figure is the median. Every run
is checked: both ways must give the same outputs and state, or the
benchmark fails.

Writes benchmarks/CLUSTER.md (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import operator
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.dask import DaskPool

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Slice:
    branch: int
    rounds: int


def burn(branch: int, rounds: int) -> int:
    value = branch
    for i in range(rounds):
        value = (value * 31 + i) % 1_000_003
    return value


@executor
async def split(rounds: int, ctx: WorkflowContext[Slice]) -> None:
    for branch in range(ctx.state["branches"]):
        ctx.send_message(Slice(branch, rounds), target=f"branch{branch}")


def crunch(part: Slice, ctx: WorkflowContext[int]) -> None:
    ctx.state.set("done", 1)
    ctx.send_message(burn(part.branch, part.rounds))


@executor
async def gather(values: list[int], ctx: WorkflowContext) -> None:
    ctx.yield_output(sum(values))


def fan_out(branches: int, pool: DaskPool | None):
    workers = [executor(id=f"branch{i}", pool=pool)(crunch) for i in range(branches)]
    return (
        WorkflowBuilder(start=split, name="fan-out")
        .add_fan_out(split, workers)
        .add_fan_in(workers, gather)
        .add_state("branches", default=branches)
        .add_state("done", default=0, reducer=operator.add)
        .build()
    )


def again(n: int, ctx: WorkflowContext[int]) -> None:
    if n > 0:
        ctx.send_message(n - 1)
    else:
        ctx.yield_output("done")


def self_loop(pool: DaskPool | None):
    looping = executor(id="loop", pool=pool)(again)
    return WorkflowBuilder(start=looping, max_supersteps=100_000).add_edge(looping, looping).build()


async def timed(workflow, message) -> tuple[float, object]:
    started = time.perf_counter()
    result = await workflow.run(message, record_events=False)
    return time.perf_counter() - started, result


async def compare(name: str, local, remote, message, repeat: int) -> dict[str, float]:
    """Median wall times of ``local`` and ``remote`` on ``message``; checks they agree."""
    await timed(local, message)  # warm-up: imports, first tasks on every worker
    await timed(remote, message)
    here, there = [], []
    for _ in range(repeat):
        seconds, local_result = await timed(local, message)
        here.append(seconds)
        seconds, remote_result = await timed(remote, message)
        there.append(seconds)
        if (local_result.outputs, local_result.state) != (
            remote_result.outputs,
            remote_result.state,
        ):
            sys.exit(f"{name}: the cluster committed something else than the process")
    print(f"{name}: in process {here}, on the cluster {there}", flush=True)
    return {"local": statistics.median(here), "remote": statistics.median(there)}


TIMES = "\N{MULTIPLICATION SIGN}"


def noop(value: int) -> int:
    return value


def dask_round_trip(client, count: int) -> float:
    """Seconds per no-op Dask task, submitted and awaited one at a time (Dask alone)."""
    for value in range(10):
        client.submit(noop, value, pure=False).result()
    started = time.perf_counter()
    for value in range(count):
        client.submit(noop, value, pure=False).result()
    return (time.perf_counter() - started) / count


def dask_in_flight(client, count: int) -> float:
    """Seconds per no-op Dask task when ``count`` are submitted at once, then awaited."""
    started = time.perf_counter()
    futures = [client.submit(noop, value, pure=False) for value in range(count)]
    for future in futures:
        future.result()
    return (time.perf_counter() - started) / count


def report(args, startup: float, cpu, trivial, loop, raw, took: float, load: float) -> str:
    versions = {
        name: importlib.metadata.version(name) for name in ("treadle", "distributed", "dask")
    }
    cores = os.cpu_count() or 1
    speedup = cpu["local"] / cpu["remote"]
    fan_cost = (trivial["remote"] - trivial["local"]) / args.branches
    trip = (loop["remote"] - loop["local"]) / (args.loops + 1)
    per_branch = cpu["local"] / args.branches
    date = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    stack = "; ".join(f"{name} {version}" for name, version in versions.items())
    lines = [
        "# Cluster results",
        "",
        "Generated by `benchmarks/cluster.py`; do not edit by hand. Its docstring says how",
        "it measures; `make bench` runs it.",
        "",
        f"- Date: {date} (the run took {took:.0f} s)",
        (
            f"- Machine: {cores} cores; load average (1 min) when the run started and "
            f"ended: {load:.2f}, {os.getloadavg()[0]:.2f} (the workers share the cores with "
            f"whatever else runs: a busy machine narrows the speed-up)"
        ),
        f"- {platform.platform()}; Python {platform.python_version()}; {stack}",
        (
            f"- Cluster: `DaskPool(n_workers={args.workers}, threads_per_worker=1)`, a "
            f"LocalCluster of {args.workers} worker processes on this machine, started in "
            f"{startup:.2f} s (in no figure below)."
        ),
        (
            f"- Each figure is the median of {args.repeat} runs, alternating in process and "
            f"on the cluster, after one untimed warm-up of each. Both ways committed the "
            f"same outputs and state in every run."
        ),
        "",
        f"## {args.branches}-branch CPU-bound fan-out",
        "",
        (
            f"`split` sends one slice to each of {args.branches} branches; each branch is a "
            f"plain `def` handler burning {args.rounds:,} rounds of integer arithmetic (pure "
            f"Python, holding the GIL: about {per_branch * 1000:.0f} ms of CPU); a fan-in "
            f"gathers their results."
        ),
        "",
        "| where the branches run | wall time (s) | speed-up |",
        "|---|---:|---:|",
        f"| in process, worker threads (one GIL) | {cpu['local']:.2f} | 1.00{TIMES} |",
        (
            f"| LocalCluster, {args.workers} worker processes | {cpu['remote']:.2f} | "
            f"{speedup:.2f}{TIMES} |"
        ),
        "",
        (
            f"The ceiling is {min(args.workers, cores)}{TIMES} ({args.workers} workers on "
            f"{cores} cores); the process that owns the run, with the Dask scheduler in it, "
            f"shares those cores with the workers, and every invocation pays the remote "
            f"path below."
        ),
        "",
        "## The remote path's own cost (trivial handler)",
        "",
        "| measurement | in process (s) | on the cluster (s) | remote path, per invocation |",
        "|---|---:|---:|---:|",
        (
            f"| {args.branches}-branch fan-out, trivial branches, all in flight at once | "
            f"{trivial['local']:.3f} | {trivial['remote']:.3f} | {fan_cost * 1000:.2f} ms |"
        ),
        (
            f"| self-loop: {args.loops + 1} supersteps of one trivial invocation each | "
            f"{loop['local']:.3f} | {loop['remote']:.3f} | {trip * 1000:.2f} ms |"
        ),
        (
            f"| Dask alone: {args.branches} no-op tasks in flight at once | | | "
            f"{raw['in flight'] * 1e3:.2f} ms |"
        ),
        (
            f"| Dask alone: one no-op task submitted and awaited at a time | | | "
            f"{raw['one at a time'] * 1e3:.2f} ms |"
        ),
        "",
        (
            "- Remote path, per invocation: (cluster - in process) / invocations. It holds "
            "packing the attempt (its message and the state it reads as serializer bytes, "
            "the handler by cloudpickle), one Dask task's round trip through the scheduler "
            "to a worker and back, and unpacking what the handler did into its context. "
            "The last rows are Dask alone on the same cluster, the same two ways: the "
            "difference is what treadle adds. Dask batches its messages (the client's "
            "every 10 ms, the scheduler's to workers every 5 ms), which is most of a lone "
            "round trip."
        ),
        (
            "- Send a handler to the cluster when its own work is well above the "
            f"one-at-a-time figure: here a CPU-bound branch took about {per_branch * 1000:.0f} "
            f"ms against a round trip of {trip * 1000:.1f} ms; with many invocations in "
            f"flight the round trips overlap ({fan_cost * 1000:.1f} ms each)."
        ),
        "",
    ]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1_500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--loops", type=int, default=200)
    args = parser.parse_args()
    began = time.perf_counter()
    load = os.getloadavg()[0]
    with DaskPool(n_workers=args.workers, threads_per_worker=1) as pool:
        started = time.perf_counter()
        client = await asyncio.to_thread(pool.connect)
        await asyncio.to_thread(client.wait_for_workers, args.workers)
        startup = time.perf_counter() - started
        cpu = await compare(
            "cpu fan-out",
            fan_out(args.branches, None),
            fan_out(args.branches, pool),
            args.rounds,
            args.repeat,
        )
        trivial = await compare(
            "trivial fan-out",
            fan_out(args.branches, None),
            fan_out(args.branches, pool),
            0,
            args.repeat,
        )
        loop = await compare("self-loop", self_loop(None), self_loop(pool), args.loops, args.repeat)
        raw = {
            "in flight": statistics.median(
                [await asyncio.to_thread(dask_in_flight, client, args.branches) for _ in range(3)]
            ),
            "one at a time": statistics.median(
                [await asyncio.to_thread(dask_round_trip, client, args.loops) for _ in range(3)]
            ),
        }
        await asyncio.to_thread(pool.close)
    text = report(args, startup, cpu, trivial, loop, raw, time.perf_counter() - began, load)
    (BENCH / "CLUSTER.md").write_text(text)
    print(text)


if __name__ == "__main__":  # worker processes import this module: start nothing there
    asyncio.run(main())
