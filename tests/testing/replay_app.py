"""A small approval workflow, recorded by the replay tests, and an upgrade that swaps two steps."""

from __future__ import annotations

from dataclasses import dataclass

from treadle import Executor, Workflow, WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    ok: bool
    note: str = ""


def _stamp(text: str) -> str:
    return f"[{text}]"


@executor(id="draft")
async def draft(n: int, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(f"memo {n}")


@executor(id="approve")
async def approve(text: str, ctx: WorkflowContext) -> None:
    checked = await ctx.step("check", _stamp, text)
    filed = await ctx.step("file", _stamp, text)
    verdict = await ctx.request({"text": checked + filed}, Verdict)
    ctx.yield_output(verdict.ok)


@executor(id="approve")
async def approve_swapped(text: str, ctx: WorkflowContext) -> None:
    filed = await ctx.step("file", _stamp, text)  # the upgrade files first
    checked = await ctx.step("check", _stamp, text)
    verdict = await ctx.request({"text": checked + filed}, Verdict)
    ctx.yield_output(verdict.ok)


def build(handler: Executor) -> Workflow:
    """The workflow with ``handler`` as its approver (same name, same graph)."""
    return (
        WorkflowBuilder(start=draft, name="memo-approval")
        .add_edge(draft, handler)
        .register_type(Verdict)
        .build()
    )


workflow = build(approve)
upgraded = build(approve_swapped)
