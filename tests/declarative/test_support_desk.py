"""The support desk written in YAML runs to the same result as its Python form, in every mode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from treadle import ExecutionMode, RunStatus
from treadle.agents import ToolDecision
from treadle.stores import SqliteStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch):
    import pydantic_ai.models  # noqa: PLC0415 - the agents extra, for these tests only

    monkeypatch.setattr(pydantic_ai.models, "ALLOW_MODEL_REQUESTS", False)  # offline: scripted
    monkeypatch.delenv("TREADLE_MODEL", raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import support_desk  # noqa: PLC0415 - importable once the examples are on the path
    import support_desk_declared  # noqa: PLC0415

    yield support_desk, support_desk_declared
    for name in ("support_desk", "support_desk_declared"):
        sys.modules.pop(name, None)


async def first_turn(workflow, text, store, run_id, mode):
    if mode is None:
        return await workflow.run(text, store=store, run_id=run_id)
    async with workflow.stream(text, store=store, run_id=run_id, mode=mode) as events:
        async for _ in events:
            pass
    return events.result


async def scenario(build, payments_class, path: Path, mode) -> dict:
    payments = payments_class()
    store = SqliteStore(path)
    workflow = build(payments)
    try:
        ann = await first_turn(
            workflow, "I was charged twice for order A-1042.", store, "ann", mode
        )
        waiting = (ann.status, [r.payload.tool for r in ann.pending_requests])
        decisions = {r.request_id: ToolDecision.approve() for r in ann.pending_requests}
        ann = await workflow.respond("ann", decisions, store=store)
        ann = await workflow.send_message("ann", "Thanks! When will I see it?", store=store)
        ann = await workflow.send_message("ann", None, store=store)
        bob = await first_turn(
            workflow, "The app crashes when I export my data.", store, "bob", mode
        )
        bob = await workflow.send_message("bob", None, store=store)
    finally:
        await store.close()
    return {
        "waiting": waiting,
        "ann": (ann.status, ann.outputs, ann.state["usage"]),
        "conversation": [m["parts"][0].get("tool_name") for m in ann.state["conversation"]],
        "bob": (bob.status, bob.outputs),
        "refunds": list(payments.refunds.values()),
    }


@pytest.mark.parametrize(
    "mode",
    [None, ExecutionMode.LOCKSTEP, ExecutionMode.OFF_THREAD],
    ids=["run", "lockstep", "off_thread"],
)
async def test_the_yaml_support_desk_runs_to_the_python_result_in_every_mode(desk, tmp_path, mode):
    python_form, yaml_form = desk
    expected = await scenario(python_form.build, python_form.Payments, tmp_path / "py.sqlite", mode)
    loaded = await scenario(yaml_form.build, python_form.Payments, tmp_path / "yaml.sqlite", mode)
    assert loaded == expected
    assert expected["waiting"] == (RunStatus.AWAITING_INPUT, ["refund"])
    assert expected["ann"][0] is RunStatus.COMPLETED
    assert expected["ann"][1][0] == "Sorry about that! refund R-0001 of 1999 cents. Anything else?"
    assert expected["refunds"] == [("A-1042", 1999)]
    assert "version 2.4.1" in expected["bob"][1][0]


def test_the_yaml_support_desk_has_the_python_graph(desk):
    python_form, yaml_form = desk
    ours = yaml_form.build(python_form.Payments())
    theirs = python_form.build(python_form.Payments())
    assert ours.executor_ids == theirs.executor_ids
    assert ours.edges == theirs.edges
    assert set(ours.state_specs) == set(theirs.state_specs)
