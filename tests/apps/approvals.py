"""The tests' one approval app: an expense a person decides, addressed as each test needs.

Each workflow asks once for a :class:`Decision` on an :class:`Expense` and
ends with what was decided. They differ only in who may answer and how
the outcome reads: ``race`` lets any approver decide (two people on the
page and a link race to answer it), ``expense`` only finance and never the
person who filed it (four eyes), ``ops_purchase`` only the ops group.
``treadle serve --app approvals`` serves them all (``tests/apps`` on the
import path).
"""

from __future__ import annotations

from pydantic import BaseModel

from treadle import Workflow, WorkflowBuilder, WorkflowContext, executor


class Expense(BaseModel):
    """An expense to approve.

    Attributes:
        title: What was bought.
        cents: How much.
    """

    title: str
    cents: int


class Decision(BaseModel):
    """The decision on it.

    Attributes:
        approved: Whether it is paid.
    """

    approved: bool


def approval(
    name: str,
    asker: str,
    *,
    approvers: tuple[str, ...] | None = None,
    four_eyes: bool | None = None,
    outcomes: tuple[str, str] = ("paid", "refused"),
) -> Workflow:
    """The workflow ``name``: executor ``asker`` asks ``approvers`` once, then says the outcome.

    ``approvers`` and ``four_eyes`` left ``None`` are not passed: the request's defaults hold.
    """
    yes, no = outcomes
    addressed = None if approvers is None else list(approvers)

    @executor(id=asker)
    async def ask(expense: Expense, ctx: WorkflowContext) -> None:
        decision = await ctx.request(expense, Decision, approvers=addressed, four_eyes=four_eyes)
        ctx.yield_output(yes if decision.approved else no)

    return (
        WorkflowBuilder(start=ask, name=name).register_type(Expense).register_type(Decision).build()
    )


race = approval("race", "decide")
expense = approval("signed_expense", "ask", approvers=("group:finance",), four_eyes=True)
ops_purchase = approval(
    "ops_purchase", "ask_ops", approvers=("group:ops",), outcomes=("bought", "not bought")
)
shared_expense = approval("shared_expense", "ask", four_eyes=True)
