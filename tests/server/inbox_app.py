"""A workflow asking one question, addressed as its input says: for the inbox tests.

Its input is ``{"approvers": [...], "four_eyes": bool}``; the question asks
for a :class:`Verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    approve: bool


@executor
async def ask(rules: dict[str, Any], ctx: WorkflowContext) -> None:
    verdict = await ctx.request(
        {"question": "pay?"},
        Verdict,
        approvers=rules.get("approvers", []),
        four_eyes=rules.get("four_eyes", False),
    )
    ctx.yield_output(verdict.approve)


inbox = WorkflowBuilder(ask, name="inbox").register_type(Verdict).build()
