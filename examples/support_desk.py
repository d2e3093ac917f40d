"""A support desk of three agents: triage hands each customer to billing or technical.

    triage ──handoff──▶ billing  (refund tool: a supervisor approves each call)
       └────handoff──▶ technical

Every agent is a session: it replies, then waits for the customer's next
message (``workflow.send_message``; ``None`` ends the conversation). The
conversation lives in the run's state, so the agent a customer is handed
to reads everything said so far. Each model request and each tool call is
journaled: kill the process mid-turn and the resumed run pays for no
request twice and refunds nobody twice.

1. Ann was charged twice. Triage hands her to billing, whose model calls
   ``refund``: the run rests as AWAITING_INPUT on a ``ToolApproval``. A
   supervisor approves it (here in a new store handle, as another process
   would; or ``treadle respond RUN REQUEST '{"action": "approve"}'``).
   Billing refunds and replies; Ann thanks it; the session ends.
2. Bob's export crashes. Triage hands him to technical, which answers.

It runs offline on pydantic-ai's ``FunctionModel`` with scripted replies
(``python examples/support_desk.py``), or on a real model when one is
named: ``TREADLE_MODEL=openai:gpt-4o-mini python examples/support_desk.py``
(the provider's key in its usual variable, e.g. ``OPENAI_API_KEY``).
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from treadle import RunResult, WorkflowBuilder
from treadle.agents import AgentExecutor, ToolDecision, add_usage, idempotency_key
from treadle.stores import SqliteStore

# -- the payments system billing's tool calls (it deduplicates by idempotency key) --------


class Payments:
    def __init__(self) -> None:
        self.refunds: dict[str, tuple[str, int]] = {}

    def refund(self, key: str, order: str, cents: int) -> str:
        if key not in self.refunds:
            self.refunds[key] = (order, cents)
        return f"R-{list(self.refunds).index(key) + 1:04d}"


# -- scripted models: what a real one would answer, offline --------------------------------


def said(messages: list[ModelMessage]) -> list[str]:
    """What the customer said so far."""
    return [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


def answered(messages: list[ModelMessage]) -> ToolReturnPart | None:
    """The tool return the model is reading now, if that is what it reads."""
    last = messages[-1].parts[-1]
    return last if isinstance(last, ToolReturnPart) else None


def words(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


def call_id(messages: list[ModelMessage]) -> str:
    return f"call-{sum(isinstance(m, ModelResponse) for m in messages)}"


async def triage_script(messages: list[ModelMessage], info: AgentInfo):
    text = said(messages)[-1].lower()
    billing = any(w in text for w in ("charge", "invoice", "refund", "bill"))
    target = "billing" if billing else "technical"
    reason = "a payment question" if billing else "a problem with the app"
    args = json.dumps({"reason": reason})
    yield {0: DeltaToolCall(f"handoff_to_{target}", args, tool_call_id=call_id(messages))}


async def billing_script(messages: list[ModelMessage], info: AgentInfo):
    result = answered(messages)
    if result is not None and result.tool_name == "handoff_to_billing":
        order = re.search(r"[A-Z]-\d+", said(messages)[0])
        args = json.dumps({"order": order.group() if order else "?", "cents": 1999})
        yield {0: DeltaToolCall("refund", args, tool_call_id=call_id(messages))}
        return
    if result is not None and result.tool_name == "refund":
        reply = f"Sorry about that! {result.model_response_str()}. Anything else?"
    else:
        reply = "You're welcome. It shows on your card within 3 to 5 days."
    for word in words(reply):
        yield word


async def technical_script(messages: list[ModelMessage], info: AgentInfo):
    if answered(messages) is not None:
        reply = "Sorry about the crash: version 2.4.1 fixes exports. Please update."
    else:
        reply = "Glad that helped!"
    for word in words(reply):
        yield word


SCRIPTS = {"triage": triage_script, "billing": billing_script, "technical": technical_script}

INSTRUCTIONS = {
    "triage": "You route customers: hand billing questions to billing, app problems to "
    "technical. Do not answer them yourself.",
    "billing": "You handle charges and refunds. Refund a double charge of 19.99 at once "
    "with the refund tool (amounts in cents), then tell the customer.",
    "technical": "You fix problems with the app. Exports crash before version 2.4.1.",
}


def model_for(role: str) -> Any:
    """The model named by TREADLE_MODEL, else the role's scripted one."""
    return os.environ.get("TREADLE_MODEL") or FunctionModel(
        stream_function=SCRIPTS[role], model_name=f"scripted-{role}"
    )


def build(payments: Payments):
    def agent(role: str, description: str) -> Agent[None, str]:
        return Agent(
            model_for(role), name=role, description=description, instructions=INSTRUCTIONS[role]
        )

    billing_agent = agent("billing", "charges, invoices and refunds")

    @billing_agent.tool_plain
    def refund(order: str, cents: int) -> str:
        """Refund ``cents`` on ``order``; returns the refund's id."""
        return f"refund {payments.refund(idempotency_key(), order, cents)} of {cents} cents"

    triage = AgentExecutor(agent("triage", "routes customers"), session=True)
    billing = AgentExecutor(billing_agent, session=True, approve_tools=["refund"])
    technical = AgentExecutor(agent("technical", "problems with the app"), session=True)
    builder = WorkflowBuilder(triage, name="support_desk")
    for desk in (triage, billing, technical):
        builder.add_edge(desk, desk)  # a session waits for the next message along it
    return (
        builder.add_handoff(triage, [billing, technical])
        .add_state("conversation", default=[], reducer=operator.add)
        .add_state("usage", default={}, reducer=add_usage)
        .build()
    )


def show(run: RunResult, *, since: int = 0) -> None:
    for reply in run.outputs[since:]:
        print(f"   agent: {reply}")
    for request in run.pending_requests:
        print(f"   waits: {request.payload} ({request.request_id})")


async def main(path: str | None = None) -> dict[str, Any]:
    payments = Payments()
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(path or Path(tmp) / "desk.sqlite")
        store = SqliteStore(file)
        workflow = build(payments)
        try:
            print("ann: I was charged twice for order A-1042.")
            ann = await workflow.run(
                "I was charged twice for order A-1042.", store=store, run_id="ann"
            )
            show(ann)
        finally:
            await store.close()

        # A supervisor, in another process, approves the refund the run waits on.
        store = SqliteStore(file)
        workflow = build(payments)
        try:
            decisions = {r.request_id: ToolDecision.approve() for r in ann.pending_requests}
            if decisions:
                print("supervisor: approve")
                ann = await workflow.respond("ann", decisions, store=store)
                show(ann)
            for text in ("Thanks! When will I see it?", None):
                print(f"ann: {text if text is not None else '(leaves)'}")
                before = len(ann.outputs)
                ann = await workflow.send_message("ann", text, store=store)
                show(ann, since=before)

            print("bob: The app crashes when I export my data.")
            bob = await workflow.run(
                "The app crashes when I export my data.", store=store, run_id="bob"
            )
            show(bob)
            bob = await workflow.send_message("bob", None, store=store)
        finally:
            await store.close()
    print(f"refunds made: {len(payments.refunds)}; ann's usage: {ann.state['usage']}")
    return {
        "ann": (ann.status, ann.outputs, ann.state["usage"]),
        "bob": (bob.status, bob.outputs),
        "refunds": list(payments.refunds.values()),
        "handed": [m["parts"][0].get("tool_name") for m in ann.state["conversation"][1:3]],
    }


if __name__ == "__main__":
    asyncio.run(main())
