"""A workflow whose answer type declares defaults: a decision's default never decides."""

from __future__ import annotations

import enum

from pydantic import BaseModel

from treadle import WorkflowBuilder, WorkflowContext, executor


class Route(enum.Enum):
    CARD = "card"
    VOUCHER = "voucher"


class Refund(BaseModel):
    approve: bool = False  # a decision: whoever answers says it, default or not
    route: Route = Route.CARD  # so is this
    reason: str = ""  # not a decision: may be left out


@executor(id="ask")
async def ask(amount: int, ctx: WorkflowContext[str]) -> None:
    refund = await ctx.request({"amount": amount}, Refund)
    ctx.yield_output(f"{refund.approve} {refund.route.value} {refund.reason!r}")


refund = WorkflowBuilder(start=ask, name="refund").register_type(Refund).build()
