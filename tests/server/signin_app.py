"""Requests addressed to people: an expense only finance may approve, never the person who
filed it (four eyes), and a purchase only the ops group may approve."""

from __future__ import annotations

from pydantic import BaseModel

from treadle import WorkflowBuilder, executor


class Expense(BaseModel):
    """An expense to approve.

    Attributes:
        title: What was bought.
        cents: How much.
    """

    title: str
    cents: int


class Decision(BaseModel):
    """Finance's decision.

    Attributes:
        approved: Whether it is paid.
    """

    approved: bool


@executor(id="ask")
async def ask(expense: Expense, ctx) -> None:
    decision = await ctx.request(expense, Decision, approvers=["group:finance"], four_eyes=True)
    ctx.yield_output("paid" if decision.approved else "refused")


expense = (
    WorkflowBuilder(start=ask, name="signed_expense")
    .register_type(Expense)
    .register_type(Decision)
    .build()
)


@executor(id="ask_ops")
async def ask_ops(expense: Expense, ctx) -> None:
    decision = await ctx.request(expense, Decision, approvers=["group:ops"])
    ctx.yield_output("bought" if decision.approved else "not bought")


ops_purchase = (
    WorkflowBuilder(start=ask_ops, name="ops_purchase")
    .register_type(Expense)
    .register_type(Decision)
    .build()
)
