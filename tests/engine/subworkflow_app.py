"""A parent run whose sub-workflow asks for approval, as scripts for separate processes.

    python subworkflow_app.py start   STORE LOG RUN_ID   # runs until the approval; prints it
    python subworkflow_app.py pending STORE LOG RUN_ID   # prints the pending requests (JSON)
    python subworkflow_app.py respond STORE LOG RUN_ID REQUEST_ID VERDICT
        # answers through the parent run; prints the outcome, or "refused <error class>"
    python subworkflow_app.py resume  STORE LOG RUN_ID   # resumes; prints the outcome

The parent is ``intake -> review -> publish``; ``review`` is the
sub-workflow ``legal``: ``check -> draft -> approve``, where ``approve``
asks for a verdict. Each invocation appends ``executor@superstep`` to LOG
before it does anything, so a test counts executions across processes.
With ``CRASH_AT=<executor>`` in the environment, that executor SIGKILLs its
own process the first time it runs (a marker file next to LOG says it did).

STORE is a SQLite path, or ``postgresql://...#schema`` for a PostgreSQL schema.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RequestError
from treadle.stores import PostgresStore, SqliteStore

LOG = Path(os.devnull)


@dataclass(frozen=True)
class Doc:
    title: str
    body: str


@dataclass(frozen=True)
class Verdict:
    title: str
    approved: bool
    trail: tuple[str, ...]


def note(ctx: WorkflowContext[object]) -> None:
    """Log this execution, then crash here if asked to (once)."""
    with LOG.open("a") as log:
        log.write(f"{ctx.executor_id}@{ctx.superstep}\n")
    marker = LOG.with_suffix(".crashed")
    if os.environ.get("CRASH_AT") == ctx.executor_id and not marker.exists():
        marker.write_text("crashed")
        os.kill(os.getpid(), signal.SIGKILL)


@executor(id="check")
async def check(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
    note(ctx)
    ctx.state.set("trail", ["checked"])
    ctx.send_message(Doc(doc.title, doc.body.strip()))


@executor(id="draft")
async def draft(doc: Doc, ctx: WorkflowContext[Doc]) -> None:
    note(ctx)
    ctx.state.set("trail", ["drafted"])
    ctx.send_message(Doc(doc.title, doc.body + " (drafted)"))


@executor(id="approve")
async def approve(doc: Doc, ctx: WorkflowContext[object]) -> None:
    note(ctx)
    approved = await ctx.request({"title": doc.title, "body": doc.body}, bool)
    ctx.state.set("trail", ["approved" if approved else "rejected"])
    ctx.yield_output(Verdict(doc.title, approved, (*ctx.state.get("trail"), doc.body)))


legal = (
    WorkflowBuilder(check, name="legal")
    .add_edge(check, draft)
    .add_edge(draft, approve)
    .add_state("trail", default=[], reducer=operator.add)
    .build()
)


@executor(id="intake")
async def intake(title: str, ctx: WorkflowContext[Doc]) -> None:
    note(ctx)
    ctx.send_message(Doc(title, f"  body of {title}  "))


@executor(id="publish")
async def publish(verdict: Verdict, ctx: WorkflowContext[object]) -> None:
    note(ctx)
    ctx.yield_output({"title": verdict.title, "approved": verdict.approved, "trail": verdict.trail})


def build(store=None):
    return (
        WorkflowBuilder(intake, name="parent", store=store)
        .add_workflow(legal, id="review", outputs=Verdict)
        .add_edge(intake, "review")
        .add_edge("review", publish)
        .build()
    )


def outcome(result) -> str:
    return json.dumps({"status": result.status.value, "outputs": result.outputs}, sort_keys=True)


def open_store(where: str):
    if where.startswith("postgresql://"):
        dsn, schema = where.split("#")
        return PostgresStore(dsn, schema=schema)
    return SqliteStore(where)


async def main(mode: str, where: str, run_id: str, *rest: str) -> None:
    store = open_store(where)
    workflow = build(store)
    try:
        if mode == "start":
            result = await workflow.run("contract", run_id=run_id)
            print(outcome(result), flush=True)
        elif mode == "pending":
            result = await workflow.resume(run_id)
            asked = [[r.request_id, r.executor_id, r.payload] for r in result.pending_requests]
            print(json.dumps(asked), flush=True)
        elif mode == "respond":
            request_id, verdict = rest
            try:
                result = await workflow.respond(run_id, {request_id: verdict == "yes"}, wait=True)
            except RequestError as error:
                print("refused", type(error).__name__, flush=True)
            else:
                print(outcome(result), flush=True)
        else:
            print(outcome(await workflow.resume(run_id)), flush=True)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    global LOG  # noqa: PLW0603 - the process's one log, which every executor appends to
    LOG = Path(sys.argv[3])
    asyncio.run(main(sys.argv[1], sys.argv[2], *sys.argv[4:]))


if __name__ == "__main__":
    cli()
