"""Answer a support ticket: a small graph with every kind of edge treadle has.

    receive ─chain─▶ normalise ─chain─▶ triage ─switch─┬─ case 1 ─▶ page on-call
                                                       ├─ case 2 ─▶ billing desk
                                                       └─ default ▶ research
    page on-call ┄handoff┄▶ research
    billing desk ┄handoff (approval)┄▶ refunds
    research ─fan-out─▶ search docs, search forum ─fan-in─▶ draft reply ─▶ check
    check ─if not good─▶ draft reply (a loop);  check ─if good─▶ send reply
    send reply ─fan-out (selector)─▶ email, sms (sms for urgent tickets only)
    sms ┄on error┄▶ sms failed (once the gateway's retries are spent)

It exists to be drawn: ``scripts/render_graph_picture.py`` renders it to
``docs/graph.png``, and ``tests/graph/test_render.py`` checks that Mermaid
and Graphviz both accept its pictures. Run it to answer one question.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from treadle import (
    Case,
    Default,
    Executor,
    ExecutorFailure,
    HandoffRefused,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)

if TYPE_CHECKING:
    from collections.abc import Sequence


@dataclass(frozen=True)
class Ticket:
    text: str
    kind: str  # "outage", "billing" or "question"
    urgent: bool = False


@dataclass(frozen=True)
class Note:
    source: str
    text: str


@dataclass(frozen=True)
class Reply:
    ticket: Ticket
    text: str
    drafts: int


@executor
async def receive(ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
    ctx.send_message(ticket)


@executor
async def normalise(ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
    ctx.send_message(replace(ticket, text=" ".join(ticket.text.split())))


@executor
async def triage(ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
    ctx.send_message(ticket)


@executor(id="page on-call")
async def page_on_call(ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
    ctx.yield_output(f"paged on-call about {ticket.text!r}")
    ctx.handoff("research", ticket, reason="the customer still needs an answer")


class BillingDesk(Executor):
    """Hands refunds over, once someone approves each one."""

    def __init__(self) -> None:
        super().__init__(id="billing desk")

    @handler
    async def on_ticket(self, ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
        ctx.handoff("refunds", ticket, reason="asks for money back")

    @handler
    async def on_refusal(self, refusal: HandoffRefused, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"refund refused: {refusal.payload.text!r}")


@executor
async def refunds(ticket: Ticket, ctx: WorkflowContext) -> None:
    ctx.yield_output(f"refunded: {ticket.text!r}")


@executor
async def research(ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
    ctx.state.set("ticket", ticket)
    ctx.send_message(ticket)


def searcher(where: str) -> Executor:
    @executor(id=f"search {where}")
    async def search(ticket: Ticket, ctx: WorkflowContext[Note]) -> None:
        ctx.send_message(Note(where, f"{where} on {ticket.text.split()[0].lower()}"))

    return search


class DraftReply(Executor):
    """Writes a reply from the research notes, and again when the check fails."""

    def __init__(self) -> None:
        super().__init__(id="draft reply")

    @handler
    async def first(self, notes: list[Note], ctx: WorkflowContext[Reply]) -> None:
        text = "; ".join(note.text for note in notes)
        ctx.send_message(Reply(ctx.state["ticket"], f"see {text}", drafts=1))

    @handler
    async def again(self, reply: Reply, ctx: WorkflowContext[Reply]) -> None:
        ctx.send_message(replace(reply, text=f"Hello! {reply.text}.", drafts=reply.drafts + 1))


@executor
async def check(reply: Reply, ctx: WorkflowContext[Reply]) -> None:
    ctx.send_message(reply)


def is_good(reply: Reply) -> bool:
    return reply.text.startswith("Hello")


@executor(id="send reply")
async def send_reply(reply: Reply, ctx: WorkflowContext[Reply]) -> None:
    ctx.send_message(reply)


def channels(reply: Reply, targets: Sequence[str]) -> list[str]:
    return [t for t in targets if t == "email" or reply.ticket.urgent]


@executor
async def email(reply: Reply, ctx: WorkflowContext) -> None:
    ctx.yield_output(f"email after {reply.drafts} drafts: {reply.text}")


@executor
async def sms(reply: Reply, ctx: WorkflowContext) -> None:
    ctx.yield_output(f"sms: {reply.text[:40]}")


@executor(id="sms failed")
async def sms_failed(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
    ctx.yield_output(f"no sms ({failure.message}); the email went out")


searchers = [searcher("docs"), searcher("forum")]

workflow = (
    WorkflowBuilder(start=receive, name="support-ticket")
    .add_chain([receive, normalise, triage])
    .add_switch(
        triage,
        [
            Case(lambda t: t.kind == "outage", page_on_call),
            Case(lambda t: t.kind == "billing", BillingDesk),
            Default(research),
        ],
    )
    .add_handoff(page_on_call, [research])
    .add_handoff("billing desk", [refunds], require_approval=True)
    .add_fan_out(research, searchers)
    .add_fan_in(searchers, DraftReply)
    .add_edge("draft reply", check)
    .add_edge(check, "draft reply", condition=lambda r: not is_good(r))
    .add_edge(check, send_reply, condition=is_good)
    .add_fan_out(send_reply, [email, sms], selector=channels)
    .add_error_edge(sms, sms_failed)
    .build()
)


async def main() -> list[str]:
    result = await workflow.run(Ticket("Export   fails with CSV files", "question"))
    for output in result.outputs:
        print(output)
    return list(result.outputs)


if __name__ == "__main__":
    asyncio.run(main())
