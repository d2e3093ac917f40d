"""Review a document: analyse it in parallel, aggregate, revise until approved.

    intake ──fan-out──▶ readability ─┐
                   ├──▶ facts ───────┼──fan-in──▶ aggregate ──▶ review ──switch──▶ publish
                   └──▶ tone ────────┘                            ▲          │
                                                                  └─ revise ◀┘ (not approved)

Run it with ``make demo``. The analysers stand in for slow model calls: they
sleep, report progress and run concurrently in one superstep; the fan-in
hands ``aggregate`` their findings as one list, always in the same order.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from treadle import Case, Default, Executor, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.events import (
    CustomEvent,
    ExecutorCompleted,
    OutputEvent,
    ProgressEvent,
    StatusChanged,
    SuperstepCompleted,
    SuperstepStarted,
    WorkflowEvent,
)
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class Document:
    title: str
    text: str


@dataclass(frozen=True)
class Finding:
    aspect: str
    score: float
    note: str


@dataclass(frozen=True)
class Draft:
    document: Document
    findings: tuple[Finding, ...]
    revision: int


@dataclass(frozen=True)
class Review:
    draft: Draft
    approved: bool
    weakest: str
    comment: str


@executor
async def intake(doc: Document, ctx: WorkflowContext[Document]) -> None:
    ctx.state.set("title", doc.title)
    ctx.send_message(doc)


def analyser(aspect: str, score_of: Callable[[str], tuple[float, str]]) -> Executor:
    @executor(id=aspect)
    async def analyse(doc: Document, ctx: WorkflowContext[Finding]) -> None:
        for done in range(1, 4):  # a slow model call, reported as it goes
            await asyncio.sleep(random.uniform(0.02, 0.08))
            ctx.report_progress(done, 3, f"{aspect}: pass {done} of 3")
        score, note = score_of(doc.text)
        ctx.send_message(Finding(aspect, score, note))

    return analyse


def readability(text: str) -> tuple[float, str]:
    words = text.split()
    average = sum(map(len, words)) / max(len(words), 1)
    return (1.0 if average < 6 else 0.6), f"average word length {average:.1f}"


def facts(text: str) -> tuple[float, str]:
    numbers = sum(ch.isdigit() for ch in text)
    return (0.9 if numbers else 0.5), f"{numbers} figures cited"


def tone(text: str) -> tuple[float, str]:
    shouting = text.count("!")
    return (0.4 if shouting > 1 else 0.95), f"{shouting} exclamation marks"


@executor
async def aggregate(findings: list[Finding], ctx: WorkflowContext[Draft]) -> None:
    ctx.state.set("findings", [f"{f.aspect}={f.score:.2f}" for f in findings])
    doc = Document(ctx.state["title"], ctx.state["text"])
    ctx.send_message(Draft(doc, tuple(findings), revision=0))


@executor
async def review(draft: Draft, ctx: WorkflowContext[Review]) -> None:
    weakest = min(draft.findings, key=lambda f: f.score)
    approved = weakest.score >= 0.8 or draft.revision >= 3
    comment = "looks good" if approved else f"improve {weakest.aspect} ({weakest.note})"
    ctx.add_event(f"review of revision {draft.revision}: {comment}")
    ctx.send_message(Review(draft, approved, weakest.aspect, comment))


@executor
async def revise(verdict: Review, ctx: WorkflowContext[Draft]) -> None:
    draft = verdict.draft
    text = draft.document.text.replace("!", ".", 1)
    findings = tuple(
        Finding(f.aspect, min(1.0, f.score + 0.25), f"{f.note}, revised")
        if f.aspect == verdict.weakest
        else f
        for f in draft.findings
    )
    ctx.state.update("revisions", lambda n: n + 1)
    ctx.send_message(Draft(Document(draft.document.title, text), findings, draft.revision + 1))


@executor
async def publish(verdict: Review, ctx: WorkflowContext) -> None:
    ctx.yield_output(
        f"'{verdict.draft.document.title}' approved after {verdict.draft.revision} "
        f"revision(s): {verdict.comment}"
    )


analysers = [analyser("readability", readability), analyser("facts", facts), analyser("tone", tone)]

workflow = (
    WorkflowBuilder(start=intake, name="document-review")
    .add_fan_out(intake, analysers)
    .add_fan_in(analysers, aggregate)
    .add_edge(aggregate, review)
    .add_switch(review, [Case(lambda r: r.approved, publish), Default(revise)])
    .add_edge(revise, review)
    .add_state("revisions", default=0)
    .build()
)


def describe(event: WorkflowEvent) -> str | None:
    """One line per interesting event; None for the ones not worth a line."""
    match event:
        case SuperstepStarted(superstep=n, executor_ids=ids):
            return f"── superstep {n}: {', '.join(ids)}"
        case ProgressEvent(message=message):
            return f"   … {message}"
        case ExecutorCompleted(executor_id=who):
            return f"   ✓ {who}"
        case CustomEvent(data=data):
            return f"   ✎ {data}"
        case OutputEvent(value=value):
            return f"   ⇒ output: {value}"
        case SuperstepCompleted(superstep=n):
            return f"   committed superstep {n}"
        case StatusChanged(status=status):
            return f"== run {status.value}"
    return None


async def main(store_path: str = "treadle-demo.sqlite") -> int:
    text = "Revenue grew 12% this year! Costs fell! The team shipped 40 releases."
    doc = Document("Annual report", text)
    store = SqliteStore(store_path)  # the embedded default: every barrier is a checkpoint
    try:
        async with workflow.stream(doc, state={"text": text}, store=store) as events:
            print(f"run {events.run_id}, checkpointed to {store_path}")
            async for event in events:
                line = describe(event)
                if line:
                    print(line)
        result = events.result
        history = await workflow.history(result.run_id, store=store)
    finally:
        await store.close()
    print()
    print(f"status:      {result.status.value} after {result.superstep} supersteps")
    print(f"outputs:     {result.outputs}")
    print(
        f"state:       revisions={result.state['revisions']}, findings={result.state['findings']}"
    )
    steps = ", ".join(str(c.superstep) for c in history.checkpoints)
    print(f"checkpoints: {len(history.checkpoints)} (supersteps {steps})")
    print()
    for line in time_travel(result.run_id, store_path):
        print(line)
    return 0 if result.status is RunStatus.COMPLETED else 1


def time_travel(run_id: str, store_path: str) -> list[str]:
    """How to go back in the run just made: from Python, then from a shell.

    The run was started from Python, so it does not record where its
    workflow lives: ``treadle fork`` is told with ``--app`` (this file); the
    fork records it, so ``treadle resume`` needs no ``--app``.
    """
    here = Path(__file__).resolve()
    app = os.path.relpath(here) if here.is_relative_to(Path.cwd()) else str(here)
    store = f"--store {store_path}"
    return [
        "time travel, from Python:",
        f"  await workflow.history({run_id!r}, store=store)",
        f"  await workflow.fork({run_id!r}, checkpoint_id=..., store=store)  # or .resume(...)",
        "from a shell:",
        f"  treadle history {run_id} {store}",
        f"  treadle fork {run_id} --superstep 4 --app {app} {store}",
        f"  treadle resume FORK_ID {store}  # FORK_ID: the run fork made",
    ]


if __name__ == "__main__":
    # Run as the module `document_review`, not as `__main__`: the classes it
    # checkpoints are then named document_review.Document and so on, the names
    # `treadle fork --app <this file>` finds when it loads this file.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    demo = importlib.import_module("document_review")
    sys.exit(asyncio.run(demo.main(*sys.argv[1:])))
