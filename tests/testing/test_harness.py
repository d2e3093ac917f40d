"""The harness drives an approval workflow through both branches in no real time."""

from __future__ import annotations

import sys
from pathlib import Path

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.testing import FakeClock, Harness

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_app import Brief, Verdict, review

START = 1_800_000_000.0


async def test_the_review_workflow_is_driven_through_its_approved_branch() -> None:
    trace = await Harness(review, answers={"approve": Verdict(ok=True, note="fine")}).run(
        Brief("owls", 12)
    )
    assert trace.status is RunStatus.COMPLETED
    trace.assert_order(["write", "approve"])
    assert trace.outputs == [{"text": "12 words about owls", "approved": True, "note": "fine"}]
    assert [r["executor_id"] for r in trace.requests] == ["approve"]


async def test_the_rejected_branch_is_answered_by_type_from_the_payload() -> None:
    trace = await Harness(
        review, answers={Verdict: lambda payload: Verdict(ok=False, note=payload["text"])}
    ).run(Brief("bats", 3))
    assert trace.outputs == [
        {"text": "3 words about bats", "approved": False, "note": "3 words about bats"}
    ]


@executor
async def ask(text: str, ctx: WorkflowContext) -> None:
    await ctx.sleep(3600)  # an hour before the approver is asked
    try:
        verdict = await ctx.request({"text": text}, Verdict, timeout=86_400)
    except TimeoutError:
        ctx.yield_output("rejected: nobody answered within a day")
        return
    ctx.yield_output("approved" if verdict.ok else "rejected")


timed = WorkflowBuilder(start=ask, name="timed-review").register_type(Verdict).build()


async def test_timers_and_deadlines_pass_on_the_fake_clock() -> None:
    clock = FakeClock(start=START)
    trace = await Harness(timed, answers={"ask": Verdict(ok=True)}, clock=clock).run("memo")
    assert trace.outputs == ["approved"]
    assert clock.now() == START + 3600  # jumped to the timer, no further


async def test_an_unanswered_request_times_out_at_its_deadline_on_the_fake_clock() -> None:
    clock = FakeClock(start=START)
    trace = await Harness(timed, clock=clock).run("memo")
    assert trace.outputs == ["rejected: nobody answered within a day"]
    assert clock.now() == START + 3600 + 86_400
    assert trace.kinds().count("request") == 1
