"""Two versions of one ``review`` workflow, for hosting them side by side.

Version 1: ``take`` hands the document to ``ask``, which asks a person for a
verdict and outputs ``"v1 <doc>: <verdict>"``. Version 2 puts ``triage``
between them (an executor version 1 lacks), which marks the document
``(triaged)``, and its ``ask`` outputs ``"v2 <doc> (triaged): <verdict>"``:
an output says which version produced it, and that the graph of that
version ran. A document starting ``later`` first sleeps a minute (a timer,
for a runtime to wake).
"""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor

NAP = 60.0
"""Seconds a ``later ...`` document sleeps before it is taken up."""


@executor(id="take")
async def take_v1(doc: str, ctx: WorkflowContext[str]) -> None:
    if doc.startswith("later"):
        await ctx.sleep(NAP)
    ctx.send_message(doc)


@executor(id="ask")
async def ask_v1(doc: str, ctx: WorkflowContext) -> None:
    verdict = await ctx.request({"doc": doc, "version": 1}, str)
    ctx.yield_output(f"v1 {doc}: {verdict}")


review_v1 = WorkflowBuilder(take_v1, name="review", version=1).add_edge(take_v1, ask_v1).build()


@executor(id="take")
async def take_v2(doc: str, ctx: WorkflowContext[str]) -> None:
    if doc.startswith("later"):
        await ctx.sleep(NAP)
    ctx.send_message(doc)


@executor(id="triage")
async def triage(doc: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(f"{doc} (triaged)")


@executor(id="ask")
async def ask_v2(doc: str, ctx: WorkflowContext) -> None:
    verdict = await ctx.request({"doc": doc, "version": 2}, str)
    ctx.yield_output(f"v2 {doc}: {verdict}")


review = (
    WorkflowBuilder(take_v2, name="review", version=2)
    .add_edge(take_v2, triage)
    .add_edge(triage, ask_v2)
    .build()
)
