"""A workflow with search fields: a ticket's customer and amount (its input), its stage (state).

``intake`` records the stage and passes the ticket on; ``approve`` asks
whether to pay it (a ``str``), so each run rests, awaiting input, until
answered, and then says ``paid`` or ``refused``.
"""

from __future__ import annotations

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass
class Ticket:
    customer: str
    amount: float


@executor(id="intake")
async def intake(ticket: Ticket, ctx: WorkflowContext[Ticket]) -> None:
    ctx.state.set("stage", "review")
    ctx.send_message(ticket)


@executor(id="approve")
async def approve(ticket: Ticket, ctx: WorkflowContext) -> None:
    answer = await ctx.request({"pay": ticket.amount}, str)
    ctx.state.set("stage", "paid" if answer == "yes" else "refused")
    ctx.yield_output(answer)


workflow = (
    WorkflowBuilder(intake, name="tickets")
    .add_edge(intake, approve)
    .add_search_field("customer", str, input=lambda t: t.customer)
    .add_search_field("amount", float, input=lambda t: t.amount)
    .add_search_field("stage", str, state=lambda s: s.get("stage"))
    .build()
)
