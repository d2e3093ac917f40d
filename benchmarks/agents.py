"""An agent session of 200 turns: what each turn adds to the store, and how long it takes.

    python benchmarks/agents.py [--turns 200]

One session agent (``AgentExecutor(..., session=True)``) on a scripted
pydantic-ai ``FunctionModel`` (offline: no model is called) talks for
``--turns`` turns on a SQLite file: the run starts with the first message,
each later one arrives with ``send_message``, as a user's would. After each
turn the script sums what the store holds for the run's checkpoints (the
frames in ``treadle_checkpoints`` and the pieces in ``treadle_pieces``),
so the growth of each turn is known. The conversation state is declared
with an append reducer, as ``docs/agents.md`` advises; a second pass leaves
it undeclared. The figures go to ``benchmarks/AGENTS.md``.

What it shows: a turn stores what it added (its messages, its saved
model requests), not the conversation again, so the bytes per turn stay
flat as the conversation grows. The last column compares with a store
that wrote the whole conversation at each turn.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import operator
import platform
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import pydantic_ai.models
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from treadle import WorkflowBuilder
from treadle.agents import AgentExecutor, add_usage
from treadle.stores import SqliteStore

BENCH = Path(__file__).resolve().parent
REPORT = BENCH / "AGENTS.md"
REPLY = "Here is what I found about that, in a reply of a few sentences. " * 5  # ~330 chars

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False  # scripted replies only


async def reply(messages: list[ModelMessage], info: AgentInfo):
    n = sum(isinstance(m, ModelResponse) for m in messages)
    for start in range(0, len(REPLY), 40):
        yield (f"[{n}] " if start == 0 else "") + REPLY[start : start + 40]


def build(declared: bool):
    agent = AgentExecutor(Agent(FunctionModel(stream_function=reply), name="chat"), session=True)
    builder = WorkflowBuilder(agent, name="chat").add_edge(agent, agent)
    if declared:
        builder.add_state("conversation", default=[], reducer=operator.add)
        builder.add_state("usage", default={}, reducer=add_usage)
    return builder.build()


def stored_bytes(path: Path) -> int:
    with sqlite3.connect(path) as db:
        frames = db.execute("SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM treadle_checkpoints")
        pieces = db.execute("SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM treadle_pieces")
        return int(frames.fetchone()[0]) + int(pieces.fetchone()[0])


async def session(turns: int, declared: bool, directory: Path) -> dict:
    path = directory / f"chat-{'declared' if declared else 'undeclared'}.sqlite"
    workflow = build(declared)
    store = SqliteStore(path)
    sizes, seconds, whole = [], [], []
    try:
        started = time.perf_counter()
        result = await workflow.run("turn 0: hello", store=store, run_id="chat")
        seconds.append(time.perf_counter() - started)
        sizes.append(stored_bytes(path))
        whole.append(len(json.dumps(result.state["conversation"])))
        for turn in range(1, turns):
            started = time.perf_counter()
            result = await workflow.send_message("chat", f"turn {turn}: go on", store=store)
            seconds.append(time.perf_counter() - started)
            sizes.append(stored_bytes(path))
            whole.append(len(json.dumps(result.state["conversation"])))
    finally:
        await store.close()
    growth = [sizes[0], *(b - a for a, b in itertools.pairwise(sizes))]
    window = max(1, turns // 4)
    return {
        "declared": declared,
        "turns": turns,
        "messages": len(result.state["conversation"]),
        "first": statistics.mean(growth[1 : window + 1]),
        "last": statistics.mean(growth[-window:]),
        "window": window,
        "total": sizes[-1],
        "conversation": whole[-1],
        "rewriting": sum(whole),
        "turn_ms": statistics.median(seconds) * 1000,
        "buckets": [sum(growth[i : i + window]) / window for i in range(0, turns, window)],
    }


def render(results: list[dict]) -> str:
    turns = results[0]["turns"]
    window = results[0]["window"]
    spans = [f"{i * window + 1}-{(i + 1) * window}" for i in range(len(results[0]["buckets"]))]
    lines = [
        "# Agent sessions: checkpoint storage per turn",
        "",
        "Written by `benchmarks/agents.py`; do not edit by hand. One session agent on a",
        f"scripted model talks for {turns} turns on SQLite (each reply about {len(REPLY)}",
        "characters); after each turn the store's checkpoint frames and pieces are summed.",
        "See the script's docstring.",
        "",
        (
            f"| conversation state | bytes/turn, turns 2-{window + 1} | bytes/turn, last {window}"
            " | last / first | stored after all turns | the conversation itself"
            " | rewriting it every turn | median ms/turn |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        label = "declared, `operator.add`" if r["declared"] else "undeclared"
        lines.append(
            f"| {label} | {r['first']:,.0f} | {r['last']:,.0f} | {r['last'] / r['first']:.2f} | "
            f"{r['total']:,} | {r['conversation']:,} | {r['rewriting']:,} | {r['turn_ms']:.1f} |"
        )
    lines += [
        "",
        f"Bytes per turn, averaged over each {window} turns (declared):",
        "",
        "| turns | " + " | ".join(spans) + " |",
        "|---|" + "---:|" * len(spans),
        "| bytes/turn | " + " | ".join(f"{b:,.0f}" for b in results[0]["buckets"]) + " |",
        "",
        "A turn writes a few checkpoints: one as each saved step (the model request) returns,",
        "one at the barrier that commits the reply, one when the session rests again. Each",
        "names the unchanged pieces by id and stores only what is new: the turn's messages are",
        "appended to the conversation's piece chain, never rewritten, so the cost per turn does",
        "not grow with the conversation ('rewriting it every turn' is what storing the whole",
        "conversation at each turn would have cost).",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {platform.system()}.",
        "",
    ]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [await session(args.turns, declared, Path(tmp)) for declared in (True, False)]
    for r in results:
        print(
            f"{'declared' if r['declared'] else 'undeclared'}: {r['first']:,.0f} -> "
            f"{r['last']:,.0f} bytes/turn, {r['total']:,} stored, {r['turn_ms']:.1f} ms/turn"
        )
    REPORT.write_text(render(results), encoding="utf-8")
    print(f"wrote {REPORT}")


if __name__ == "__main__":
    asyncio.run(main())
