"""People in the loop: a question answered days later, a chat session, a cancellation.

1. ``expense`` opens a ticket in a ``ctx.step``, then asks a manager with
   ``ctx.request(payload, Decision)``. The run rests as AWAITING_INPUT; three
   days later a new process answers with ``workflow.respond(run_id,
   {request_id: answer})``. The handler re-executes from the top: the ticket
   step is replayed from the journal, not run again. It ends the run with
   an outcome (``ctx.set_outcome``): ``approved`` or ``rejected``, shown
   beside the run's status wherever runs are listed.
2. ``Chat`` is a session: one handler replies, another waits for the next
   message (``ctx.wait_for_input()``), sent with ``workflow.send_message``.
   Replying and waiting are separate invocations because whatever a
   suspended invocation yields or sends is discarded.
3. A run resting on a question is cancelled with ``workflow.cancel(run_id)``.

Run it with ``python examples/long_running_human_input.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from treadle import Clock, Executor, WorkflowBuilder, WorkflowContext, executor, handler
from treadle.errors import RunCancelledError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1_772_438_400.0  # 2026-03-02 08:00 UTC


@dataclass(frozen=True)
class Expense:
    who: str
    euros: int


@dataclass(frozen=True)
class Decision:
    approved: bool
    by: str


@dataclass(frozen=True)
class Listen:
    pass


@dataclass
class Tickets:
    opened: list[str] = field(default_factory=list)

    def open(self, claim: Expense) -> str:
        self.opened.append(claim.who)
        return f"T-{len(self.opened)}"


class Chat(Executor):
    @handler
    async def reply(self, text: str, ctx: WorkflowContext[Listen]) -> None:
        ctx.state.update("turns", lambda n: n + 1)
        ctx.yield_output(f"echo: {text}")
        if text != "bye":
            ctx.send_message(Listen())  # wait for the next message in a new invocation

    @handler
    async def listen(self, _: Listen, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(await ctx.wait_for_input())


def build(store: SqliteStore, tickets: Tickets, clock: Clock):
    @executor
    async def expense(claim: Expense, ctx: WorkflowContext) -> None:
        ticket = await ctx.step("open ticket", tickets.open, claim)
        decision = await ctx.request({"ticket": ticket, "euros": claim.euros}, Decision)
        verdict = "approved" if decision.approved else "rejected"
        # The run's outcome, shown beside its status: not a bare "completed".
        ctx.set_outcome(verdict, f"{claim.euros} EUR for {claim.who}, {verdict} by {decision.by}")
        ctx.yield_output(f"{ticket}: {verdict} by {decision.by}")

    approvals = (
        WorkflowBuilder(start=expense, name="expenses", store=store, clock=clock)
        .register_type(Decision)  # a response type no handler names must be registered
        .build()
    )
    chat = (
        WorkflowBuilder(start=Chat, name="chat", store=store, clock=clock)
        .add_edge("Chat", "Chat")
        .add_state("turns", default=0)
        .build()
    )
    return approvals, chat


async def main(path: str | None = None, clock: Clock | None = None) -> dict:
    clock = clock or FakeClock(start=START)
    tickets = Tickets()
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(path or Path(tmp) / "runs.sqlite")
        store = SqliteStore(file)
        approvals, chat = build(store, tickets, clock)
        try:
            asked = await approvals.run(Expense("ann", 420), run_id="exp-1")
            dear = await approvals.run(Expense("cid", 1200), run_id="exp-3")
            (question,) = asked.pending_requests
            print(f"exp-1: {asked.status.value}, asks {question.payload} ({question.request_id})")
            bob = await approvals.run(Expense("bob", 9000), run_id="exp-2")
            await approvals.cancel("exp-2")
        finally:
            await store.close()
        if isinstance(clock, FakeClock):
            await clock.advance(3 * 24 * 3600)  # three days later, in another process:
        store = SqliteStore(file)
        approvals, chat = build(store, tickets, clock)
        try:
            answer = {"approved": True, "by": "maria"}  # e.g. JSON from a web form
            done = await approvals.respond("exp-1", {question.request_id: answer})
            print(f"exp-1: {done.status.value} ({done.outcome}), {done.outputs}")
            no = {"approved": False, "by": "maria"}
            refused = await approvals.respond("exp-3", {dear.pending_requests[0].request_id: no})
            print(f"exp-3: {refused.status.value} ({refused.outcome}: {refused.outcome_summary})")
            try:
                await approvals.respond("exp-2", {bob.pending_requests[0].request_id: answer})
            except RunCancelledError as error:
                print(f"exp-2: {error}")
            session = await chat.run("hello", run_id="chat-1")
            for text in ("still there?", "bye"):
                print(f"chat-1: {session.status.value}, said {session.outputs[-1]!r}")
                session = await chat.send_message("chat-1", text)
            print(f"chat-1: {session.status.value}, {session.outputs}")
        finally:
            await store.close()
    return {
        "approval": (done.status, done.outputs),
        "outcomes": [
            (done.outcome, done.outcome_summary),
            (refused.outcome, refused.outcome_summary),
        ],
        "tickets": tickets.opened,
        "chat": (session.status, session.outputs, session.state["turns"]),
    }


if __name__ == "__main__":
    asyncio.run(main())
