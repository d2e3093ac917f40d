"""Executors that the definitions of these tests name by import path."""

from __future__ import annotations

import asyncio
import dataclasses
import operator
from typing import Any

from treadle import ExecutorFailure, WorkflowContext, executor


@executor
async def shout(text: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(text.upper())


@executor
async def echo(value: object, ctx: WorkflowContext[Any]) -> None:
    """Sends on exactly what it got: hostile text must arrive unchanged."""
    ctx.send_message(value)


@executor
async def keep(value: object, ctx: WorkflowContext[Any]) -> None:
    ctx.yield_output(value)


@executor
async def count(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.state.set("total", n)
    ctx.send_message(n)


@executor
async def remember(value: object, ctx: WorkflowContext[Any]) -> None:
    """Writes what it got to state, so templates and conditions read it back."""
    ctx.state.set("note", value)
    ctx.send_message(value)


@executor
async def fail(value: object, ctx: WorkflowContext[Any]) -> None:
    raise RuntimeError(f"failed on {value!r}")


@executor
async def recover(failure: ExecutorFailure, ctx: WorkflowContext[Any]) -> None:
    ctx.yield_output(f"recovered from {failure.executor_id}")


@executor
async def gather(values: list, ctx: WorkflowContext[Any]) -> None:
    ctx.yield_output(sorted(values))


@dataclasses.dataclass
class Ticket:
    title: str
    priority: int


@executor
async def ticket(title: str, ctx: WorkflowContext[Ticket]) -> None:
    ctx.send_message(Ticket(title, 3 if "urgent" in title else 1))


add = operator.add


@dataclasses.dataclass
class Decision:
    approved: bool


@executor
async def review(expense: dict, ctx: WorkflowContext[dict]) -> None:
    """Asks a person, then sends the expense on if they approved it."""
    decision = await ctx.request(f"approve {expense['amount']}?", Decision)
    if decision.approved:
        ctx.send_message(expense)


AT_ONCE = {"now": 0, "most": 0}  # what slow_call saw: calls under way at once


@executor
async def slow_call(value: dict, ctx: WorkflowContext[Any]) -> None:
    AT_ONCE["now"] += 1
    AT_ONCE["most"] = max(AT_ONCE["most"], AT_ONCE["now"])
    await asyncio.sleep(0.01)
    AT_ONCE["now"] -= 1
    ctx.yield_output(value["tenant"])
