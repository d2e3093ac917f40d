"""An expense workflow that ends with a named outcome: approved up to 1,000 EUR, else rejected.

Used by the outcome tests of the command line, the HTTP API and the page.
"""

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Claim:
    who: str
    euros: int


@executor
async def decide(claim: Claim, ctx: WorkflowContext) -> None:
    if claim.euros > 1000:
        ctx.set_outcome("rejected", f"{claim.euros} EUR for {claim.who} is over the 1000 EUR limit")
    else:
        ctx.set_outcome("approved")
    ctx.yield_output(claim.euros)


expense = WorkflowBuilder(start=decide, name="expense").build()
