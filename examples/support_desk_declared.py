"""The support desk of ``support_desk.py``, loaded from ``support_desk.yaml``.

The definition holds the graph (who hands off to whom, which tool needs
approval, the sessions, the state); this module holds what only Python can:
the agents, their scripted models and the refund tool. ``treadle.load``
joins them by name. ``python examples/support_desk_declared.py`` runs Ann's
conversation offline, as ``support_desk.py`` does.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from pydantic_ai import Agent
from support_desk import INSTRUCTIONS, Payments, model_for, show

import treadle
from treadle.agents import ToolDecision, idempotency_key
from treadle.stores import SqliteStore

DEFINITION = Path(__file__).with_name("support_desk.yaml")


def agents(payments: Payments) -> dict[str, Agent[None, str]]:
    """The three agents, by the names the definition's nodes use."""

    def agent(role: str, description: str) -> Agent[None, str]:
        return Agent(
            model_for(role), name=role, description=description, instructions=INSTRUCTIONS[role]
        )

    billing = agent("billing", "charges, invoices and refunds")

    @billing.tool_plain
    def refund(order: str, cents: int) -> str:
        """Refund ``cents`` on ``order``; returns the refund's id."""
        return f"refund {payments.refund(idempotency_key(), order, cents)} of {cents} cents"

    return {
        "triage": agent("triage", "routes customers"),
        "billing": billing,
        "technical": agent("technical", "problems with the app"),
    }


def build(payments: Payments) -> treadle.Workflow:
    return treadle.load(DEFINITION, agents=agents(payments))


async def main() -> None:
    payments = Payments()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "desk.sqlite")
        workflow = build(payments)
        try:
            print("ann: I was charged twice for order A-1042.")
            ann = await workflow.run(
                "I was charged twice for order A-1042.", store=store, run_id="ann"
            )
            show(ann)
            decisions = {r.request_id: ToolDecision.approve() for r in ann.pending_requests}
            ann = await workflow.respond("ann", decisions, store=store)
            show(ann)
            ann = await workflow.send_message("ann", None, store=store)
        finally:
            await store.close()
    print(f"{ann.status.value}; refunds made: {len(payments.refunds)}")


if __name__ == "__main__":
    asyncio.run(main())
