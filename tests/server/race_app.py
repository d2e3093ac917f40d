"""An expense any approver may decide: two people on the page and a link race to answer it."""

from __future__ import annotations

from pydantic import BaseModel

from treadle import WorkflowBuilder, executor


class Claim(BaseModel):
    """An expense claim.

    Attributes:
        title: What was bought.
        cents: How much.
    """

    title: str
    cents: int


class Verdict(BaseModel):
    """The decision on it.

    Attributes:
        approved: Whether it is paid.
    """

    approved: bool


@executor(id="decide")
async def decide(claim: Claim, ctx) -> None:
    verdict = await ctx.request(claim, Verdict)
    ctx.yield_output("paid" if verdict.approved else "refused")


race = (
    WorkflowBuilder(start=decide, name="race").register_type(Claim).register_type(Verdict).build()
)
