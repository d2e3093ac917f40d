"""A refund agent whose ``refund`` tool needs approval, for tests in this process and others.

``desk`` is the workflow, for ``treadle`` commands and the server: it counts
each refund in the side SQLite table the environment names when the refund
is made (``REFUND_SIDE``), so another process counts in the same one. The
model asks for one refund of 5000 cents on order A1, then reads back what
the tool (or the refusal) said.
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from scripted import Call, count, last_tool_return, scripted

from treadle import WorkflowBuilder
from treadle.agents import AgentExecutor


def build(side: str | None = None, **rules: object):
    """The refund desk; ``rules``: ``approvers`` and ``four_eyes`` for its tool approvals."""
    model = scripted(
        [Call("refund", {"order": "A1", "cents": 5000}, id="refund-1")],
        lambda messages: f"Done: {last_tool_return(messages)}",
    )
    agent = Agent(model, name="billing", instructions="You refund orders.")

    @agent.tool_plain
    def refund(order: str, cents: int) -> str:
        """Refund ``cents`` on ``order``."""
        made = count(side or os.environ["REFUND_SIDE"], "refund")
        return f"refunded {cents} on {order} (refund #{made})"

    executor = AgentExecutor(agent, approve_tools=["refund"], **rules)  # type: ignore[arg-type]
    return WorkflowBuilder(executor, name="desk").build()


desk = build()
