"""Workflows the page's browser tests drive through `treadle serve`.

``approval`` drafts a proposal, asks a person to approve it (the answer is an
``Approval``: ``approved: bool`` and ``note: str``) and publishes the
verdict; ``failing`` raises in its only handler, so its run fails with a
traceback; ``charging`` charges in a saved step, so its history holds two
checkpoints of superstep 0 (the start, and the step saved during superstep 1);
``limited`` calls under the call limit ``api`` (one at a time) and holds
its slot until the file its input names exists, so a second run waits in line.
"""

import asyncio
import enum
from dataclasses import dataclass
from pathlib import Path

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Proposal:
    title: str
    amount: int


@dataclass(frozen=True)
class Approval:
    approved: bool
    note: str


@executor
async def draft(proposal: Proposal, ctx: WorkflowContext[str]) -> None:
    ctx.state.set("title", proposal.title)
    ctx.send_message(f"{proposal.title}: {proposal.amount} EUR")


@executor
async def review(text: str, ctx: WorkflowContext[dict]) -> None:
    verdict = await ctx.request({"proposal": text}, Approval)
    ctx.state.set("approved", verdict.approved)
    ctx.send_message({"text": text, "approved": verdict.approved, "note": verdict.note})


@executor
async def publish(verdict: dict, ctx: WorkflowContext) -> None:
    ctx.yield_output(verdict)


approval = (
    WorkflowBuilder(start=draft, name="approval")
    .add_edge(draft, review)
    .add_edge(review, publish)
    .register_type(Approval)
    .build()
)


def check_amount(amount: int) -> None:
    if amount > 100:
        raise ValueError(f"amount {amount} is over the limit of 100")


@executor
async def validate(amount: int, ctx: WorkflowContext) -> None:
    check_amount(amount)
    ctx.yield_output(amount)


failing = WorkflowBuilder(start=validate, name="failing").build()


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclass(frozen=True)
class Address:
    city: str
    floor: int


@dataclass(frozen=True)
class Survey:
    """An answer with every kind of field the page's form generator draws."""

    priority: Priority
    score: float
    address: Address
    tags: list[str]
    urgent: bool = False
    comment: str | None = None


@executor
async def ask_survey(topic: str, ctx: WorkflowContext) -> None:
    answer = await ctx.request({"topic": topic}, Survey)
    ctx.yield_output(
        {
            "priority": answer.priority.value,
            "score": answer.score,
            "address": {"city": answer.address.city, "floor": answer.address.floor},
            "tags": answer.tags,
            "urgent": answer.urgent,
            "comment": answer.comment,
        }
    )


survey = (
    WorkflowBuilder(start=ask_survey, name="survey")
    .register_type(Survey)
    .register_type(Address)
    .register_type(Priority)
    .build()
)


def make_receipt(amount: int) -> str:
    return f"receipt for {amount} EUR"


@executor
async def charge(amount: int, ctx: WorkflowContext) -> None:
    # A saved step is made durable at once: a checkpoint within the superstep.
    receipt = await ctx.saved_step("charge", make_receipt, amount)
    ctx.yield_output(receipt)


charging = WorkflowBuilder(start=charge, name="charging").build()


@executor(id="call_api", limits=["api"])
async def call_api(gate: str, ctx: WorkflowContext) -> None:
    # The test lets the calls go by writing the file.
    while not await asyncio.to_thread(Path(gate).exists):  # noqa: ASYNC110 - the test's file
        await asyncio.sleep(0.05)
    ctx.yield_output(gate)


limited = WorkflowBuilder(
    call_api, name="limited", limits=[CallLimit("api", concurrency=1)]
).build()
