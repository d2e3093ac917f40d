"""What counting costs: a run with metrics against the same run without.

    python benchmarks/metrics.py [--supersteps 200] [--runs 20] [--rounds 5]

One workflow loops ``--supersteps`` supersteps (one handler, one message
each), with no store (the engine alone, where a per-superstep cost shows
most) and on a SQLite file (where a commit per superstep dwarfs it). Each
round runs it ``--runs`` times without metrics and ``--runs`` times with
``RunOptions(metrics=...)``: treadle's OpenTelemetry binding on the SDK's
meter provider read by the Prometheus exporter, as ``treadle serve`` and
``treadle worker`` have it. Rounds alternate the two, so a busy machine
slows both alike; the report gives microseconds per superstep (medians
over rounds) and their ratio, written to ``benchmarks/METRICS.md``.
A run without metrics is the engine as it was before metrics existed: its
cost against the commit before them is in ``benchmarks/RESULTS.md`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from treadle import RunOptions, WorkflowBuilder, WorkflowContext, executor
from treadle._operations._prometheus import PrometheusMetrics
from treadle.stores import SqliteStore

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Loop:
    to: int
    n: int = 0


@executor
async def step(loop: Loop, ctx: WorkflowContext[Loop]) -> None:
    if loop.n >= loop.to:
        ctx.yield_output(loop.n)
        return
    ctx.send_message(Loop(loop.to, loop.n + 1))


looping = WorkflowBuilder(start=step, name="looping").add_edge(step, step).build()


async def _time(supersteps: int, runs: int, store, options: RunOptions) -> float:
    """Microseconds per superstep, the median of ``runs`` runs."""
    each = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await looping.run(Loop(supersteps), store=store, options=options)
        each.append((time.perf_counter() - started) / result.superstep * 1e6)
    return statistics.median(each)


async def measure(supersteps: int, runs: int, rounds: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as scratch:
        store = SqliteStore(Path(scratch) / "runs.sqlite")
        exposed = PrometheusMetrics(store)
        limit = 5 * supersteps + 1
        plain = RunOptions(record_events=False, max_supersteps=limit)
        counted = RunOptions(record_events=False, max_supersteps=limit, metrics=exposed.metrics)
        found: dict[str, dict[str, list[float]]] = {}
        cases = (("no store", None, 5 * supersteps), ("SQLite", store, supersteps))
        for _ in range(rounds):
            for name, chosen, steps in cases:
                times = found.setdefault(name, {"without": [], "with": []})
                times["without"].append(await _time(steps, runs, chosen, plain))
                times["with"].append(await _time(steps, runs, chosen, counted))
        await exposed.scrape()  # the points are really there to read
        exposed.close()
        await store.close()
    return {
        name: {kind: statistics.median(values) for kind, values in times.items()}
        for name, times in found.items()
    }


def report(figures: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    lines = [
        "# What counting costs",
        "",
        "`python benchmarks/metrics.py` "  # noqa: ISC004 - one paragraph
        f"(--supersteps {args.supersteps} --runs {args.runs} --rounds {args.rounds}), "
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}. Microseconds per superstep, medians over rounds "
        "that alternate the two; figures compare versions of treadle on one machine.",
        "",
        "| store | without metrics | with metrics | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, kinds in figures.items():
        ratio = kinds["with"] / kinds["without"]
        lines.append(f"| {name} | {kinds['without']:.1f} | {kinds['with']:.1f} | {ratio:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--supersteps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    text = report(asyncio.run(measure(args.supersteps, args.runs, args.rounds)), args)
    (HERE / "METRICS.md").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
