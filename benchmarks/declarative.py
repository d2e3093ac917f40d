"""What a declarative definition costs: loading it, and templates and conditions per node.

    python benchmarks/declarative.py [--repeat 5]

Three figures, each per node, written to ``benchmarks/DECLARATIVE.md``:

* loading: reading, checking and building a chain of N nodes, each with an
  ``input`` template and a CEL ``when`` on its edge (N = 10, 100, 500);
* resolving one node's ``input`` template and evaluating one condition,
  measured alone;
* a run along the chain: the definition against the same chain built in
  Python with plain executors and no conditions, so the difference is what
  templates and conditions add to each node's invocation.

Timings are medians of ``--repeat`` repetitions on this machine; they are
for comparing versions, not promises.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from treadle import WorkflowBuilder, WorkflowContext, executor

REPORT = Path(__file__).with_name("DECLARATIVE.md")


@executor
async def step(value: object, ctx: WorkflowContext[Any]) -> None:
    ctx.send_message(value)


@executor
async def end(value: object, ctx: WorkflowContext[Any]) -> None:
    ctx.yield_output(value)


def chain_definition(n: int) -> str:
    lines = ["name: chain", "start: s0", "inputs: {text: str}", "nodes:"]
    lines += [
        f'  s{i}: {{executor: "declarative:step", input: "{{{{inputs.text}}}} {i}"}}'
        for i in range(n)
    ]
    lines.append("  end: {step: output}")
    lines.append("edges:")
    lines += [f'  - {{from: s{i}, to: s{i + 1}, when: "size(message) > 0"}}' for i in range(n - 1)]
    lines.append(f"  - {{from: s{n - 1}, to: end}}")
    return "\n".join(lines) + "\n"


def python_chain(n: int):
    ids = [executor(id=f"s{i}")(step.__wrapped__) for i in range(n)]
    return WorkflowBuilder(ids[0], name="chain").add_chain([*ids, end]).build()


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def timed_async(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def measure(repeat: int) -> dict[str, Any]:
    # imported here: the module is imported again as "declarative" for its executors
    from treadle._declarative._conditions import compile_expression  # noqa: PLC0415
    from treadle._declarative._templates import compile_value, resolve  # noqa: PLC0415
    from treadle.declarative import loads  # noqa: PLC0415

    loads(chain_definition(2))  # builds CEL's parser once, as any first load does
    loading = {}
    for n in (10, 100, 500):
        text = chain_definition(n)
        loading[n] = timed(lambda text=text: loads(text), repeat) / n
    template = compile_value("{{inputs.text}} and {{state.a.b}}", [])
    data = {"inputs": {"text": "hello"}, "state": {"a": {"b": [1, 2, 3]}}}
    calls = 10_000
    resolving = timed(lambda: [resolve(template, data.__getitem__) for _ in range(calls)], repeat)
    condition = compile_expression("size(message) > 3 && message != 'x'", ["message"])
    evaluating = timed(
        lambda: [condition.evaluate({"message": "hello"}) for _ in range(calls // 10)], repeat
    )
    n = 200
    declared = loads(chain_definition(n))
    plain = python_chain(n)
    run_declared = await timed_async(lambda: declared.run({"text": "go"}), repeat)
    run_plain = await timed_async(lambda: plain.run("go"), repeat)
    return {
        "loading": loading,
        "resolve_us": resolving / calls * 1e6,
        "condition_us": evaluating / (calls // 10) * 1e6,
        "run_declared_us": run_declared / n * 1e6,
        "run_plain_us": run_plain / n * 1e6,
    }


def render(r: dict[str, Any]) -> str:
    lines = [
        "# Declarative definitions: what they cost per node",
        "",
        "Written by `python benchmarks/declarative.py` (part of `make bench`).",
        "",
        "| nodes in the chain | load time per node |",
        "|---:|---:|",
    ]
    lines += [f"| {n} | {t * 1e3:.2f} ms |" for n, t in r["loading"].items()]
    extra = r["run_declared_us"] - r["run_plain_us"]
    lines += [
        "",
        "| per node, at run time | time |",
        "|---|---:|",
        f"| resolving an `input` with two templates | {r['resolve_us']:.1f} µs |",
        f"| evaluating a CEL `when` (cel-python) | {r['condition_us']:.1f} µs |",
        f"| a node of the loaded chain (template + condition) | {r['run_declared_us']:.0f} µs |",
        f"| a node of the same chain built in Python | {r['run_plain_us']:.0f} µs |",
        f"| what the definition adds per node | {extra:.0f} µs |",
        "",
        "Loading is dominated by the checks (schema, CEL parsing, the builder's own",
        "validation), once per load: not per run. At run time a templated node pays for",
        "its template and its edge's condition; cel-python interprets its parse tree,",
        "which is the larger part.",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {platform.system()}.",
        "",
    ]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))  # "declarative:step" is this file
    result = await measure(args.repeat)
    for n, t in result["loading"].items():
        print(f"load, {n} nodes: {t * 1e3:.2f} ms/node")
    print(
        f"template {result['resolve_us']:.1f} µs, condition {result['condition_us']:.1f} µs; "
        f"run {result['run_declared_us']:.0f} vs {result['run_plain_us']:.0f} µs/node"
    )
    REPORT.write_text(render(result), encoding="utf-8")
    print(f"wrote {REPORT}")


if __name__ == "__main__":
    asyncio.run(main())
