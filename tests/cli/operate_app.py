"""Workflows whose answers have richer types: a model with an enum, dataclasses, a date."""

import datetime as dt
import enum
from dataclasses import dataclass

from pydantic import BaseModel

from treadle import WorkflowBuilder, WorkflowContext, executor


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclass(frozen=True)
class Reviewer:
    name: str
    email: str


class Decision(BaseModel):
    approved: bool
    priority: Priority
    reviewers: list[Reviewer]
    due: dt.date | None = None
    comment: str = ""


@dataclass(frozen=True)
class Order:
    item: str
    qty: int


@executor
async def intake(order: Order, ctx: WorkflowContext) -> None:
    decision = await ctx.request({"item": order.item, "qty": order.qty}, Decision, timeout=3600)
    ctx.yield_output(decision.model_dump(mode="json"))


decide = WorkflowBuilder(start=intake, name="decide").register_type(Decision).build()


@executor
async def triage(ticket: int | str, ctx: WorkflowContext) -> None:
    level = await ctx.request({"ticket": ticket}, Priority)
    ctx.yield_output(level.value)


rank = WorkflowBuilder(start=triage, name="rank").register_type(Priority).build()
