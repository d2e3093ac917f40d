"""A workflow's search fields are written by its commits, on every store (issue 34).

Input fields come from the run's input once, when the run is created; state
fields from the committed state at every commit, so what the index says is
what the run's latest checkpoint holds, also across a rest and a resume. A
field whose function fails or gives the wrong type is unset, never a failed run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._values._filter import parse_filter
from treadle.errors import WorkflowValidationError


@dataclass
class Expense:
    employee: str
    amount: float


@executor(id="submit")
async def submit(expense: Expense, ctx: WorkflowContext) -> None:
    ctx.state.set("stage", "review")
    ctx.send_message(expense)


@executor(id="approve")
async def approve(expense: Expense, ctx: WorkflowContext) -> None:
    answer = await ctx.request(f"approve {expense.amount}?", str)
    ctx.state.set("stage", "paid" if answer == "yes" else "refused")
    ctx.state.set("decided_at", datetime(2026, 3, 1, 12, tzinfo=UTC))
    ctx.yield_output(answer)


def _workflow():
    return (
        WorkflowBuilder(submit, name="expenses")
        .add_edge(submit, approve)
        .add_search_field("employee", str, input=lambda e: e.employee)
        .add_search_field("amount", float, input=lambda e: e.amount)
        .add_search_field("stage", "text", state=lambda s: s.get("stage"))
        .add_search_field("decided", datetime, state=lambda s: s.get("decided_at"))
        .add_search_field("big", bool, input=lambda e: e.amount > 1000)
        .add_search_field("broken", float, state=lambda s: s["missing"])
        .add_search_field("mistyped", float, input=lambda e: e.employee)
        .build()
    )


async def _ids(store, text):
    return sorted(run.run_id for run in await store.search_runs(parse_filter(text)))


async def test_commits_write_the_fields_the_run_holds(store, caplog):
    workflow = _workflow()
    with caplog.at_level(logging.WARNING, logger="treadle.search"):
        first = await workflow.run(Expense("ann", 1500.0), store=store, run_id="e1")
        await workflow.run(Expense("bob", 20.0), store=store, run_id="e2")
    fields = await store.run_fields("e1")
    assert {name: value.plain() for name, value in fields.items()} == {
        "employee": "ann",
        "amount": 1500.0,
        "stage": "review",
        "big": True,
    }
    assert "search field 'broken' raised KeyError" in caplog.text
    assert "search field 'mistyped' is a str, not a number" in caplog.text
    waiting = 'fields.stage == "review" && status == "awaiting_input"'
    assert await _ids(store, waiting) == ["e1", "e2"]
    assert await _ids(store, "fields.big") == ["e1"]

    # The answer's commit moves the state fields on; the input fields stay as written.
    request_id = first.pending_requests[0].request_id
    done = await workflow.respond("e1", {request_id: "yes"}, store=store)
    assert done.status.value == "completed"
    fields = await store.run_fields("e1")
    assert fields["stage"].plain() == "paid"
    assert fields["decided"].plain() == datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert fields["employee"].plain() == "ann"
    assert await _ids(store, waiting) == ["e2"]
    assert await _ids(store, 'fields.decided >= timestamp("2026-03-01T12:00:00Z")') == ["e1"]


async def test_a_state_field_set_to_none_is_unset(store):
    @executor(id="flip")
    async def flip(n: int, ctx: WorkflowContext) -> None:
        ctx.state.set("flag", "on" if n else None)

    workflow = (
        WorkflowBuilder(flip, name="flips")
        .add_search_field("flag", str, state=lambda s: s.get("flag"))
        .build()
    )
    await workflow.run(1, store=store, run_id="f1")
    assert (await store.run_fields("f1"))["flag"].text == "on"
    forked = await workflow.fork(
        "f1", (await store.get_run("f1")).checkpoint_id, {"flag": None}, store=store
    )
    assert "flag" not in await store.run_fields(forked)


@pytest.mark.parametrize(
    ("declare", "problem"),
    [
        (lambda b: b.add_search_field("Bad-Name", str, input=len), "lower-case letters"),
        (lambda b: b.add_search_field("n", list, input=len), "kind is one of"),
        (lambda b: b.add_search_field("n", str), "exactly one of input= and state="),
        (lambda b: b.add_search_field("n", str, input=len, state=len), "exactly one of"),
        (lambda b: b.add_search_field("n", str, input=42), "must be callable"),
        (
            lambda b: b.add_search_field("n", str, input=len).add_search_field("n", str, input=len),
            "declared twice",
        ),
    ],
)
def test_a_bad_declaration_is_a_build_problem(declare, problem):
    with pytest.raises(WorkflowValidationError, match=problem):
        declare(WorkflowBuilder(submit)).build()
