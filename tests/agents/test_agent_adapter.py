"""Another agent library behind ``AgentAdapter``: the executor journals whatever it routes."""

from __future__ import annotations

import json

from treadle import ExponentialBackoff, RetryPolicy, WorkflowBuilder
from treadle.agents import (
    AgentAdapter,
    AgentExecutor,
    AgentTurn,
    ToolApproval,
    ToolDecision,
    TurnResult,
    TurnSteps,
    idempotency_key,
)
from treadle.events import AgentDelta
from treadle.stores import SqliteStore
from treadle.testing import FakeClock


class Tiny:
    """A toy agent library: one model call, one tool call (approved first), a reply."""

    name = "tiny"
    description = "answers with the weather"
    output_types = (str,)

    def __init__(self, *, failures: int = 1, approval: bool = True) -> None:
        self.model_calls = 0
        self.tool_keys: list[str] = []
        self.failures_left = failures
        self.approval = approval

    async def run_turn(self, turn: AgentTurn, steps: TurnSteps) -> TurnResult:
        async def think() -> str:
            self.model_calls += 1
            steps.delta("text", "Let me ", 0)
            steps.delta("text", "look.", 0)
            return json.dumps({"city": turn.prompt})

        plan = json.loads(await steps.model_request(think))
        if self.approval:
            decision = await steps.approve(ToolApproval(turn.agent, "weather", plan, "w1"))
            assert decision == ToolDecision.approve()

        async def weather() -> str:
            self.tool_keys.append(idempotency_key())
            return json.dumps(f"sunny in {plan['city']}")

        forecast = json.loads(await steps.tool_call("w1", weather))
        if self.failures_left:  # fails once after both steps: the retry replays them
            self.failures_left -= 1
            msg = "the library crashed"
            raise RuntimeError(msg)
        message = {"said": turn.prompt, "answered": forecast}
        usage = {"requests": 1, "input_tokens": 3, "output_tokens": 2, "tool_calls": 1}
        return TurnResult(forecast, [message], usage)


async def test_an_adapter_routes_its_calls_through_the_steps_and_they_are_journaled(tmp_path):
    tiny = Tiny()
    assert isinstance(tiny, AgentAdapter)
    clock = FakeClock(start=1000.0)
    retry = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(initial=1, jitter=0))
    workflow = WorkflowBuilder(AgentExecutor(tiny, retry=retry), clock=clock).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await workflow.run("Oslo", store=store, run_id="t1")
        (request,) = asked.pending_requests
        assert request.payload == ToolApproval("tiny", "weather", {"city": "Oslo"}, "w1")
        answer = {request.request_id: ToolDecision.approve()}
        done = await clock.run(workflow.respond("t1", answer, store=store))
    finally:
        await store.close()
    assert done.outputs == ["sunny in Oslo"]
    # Asked once, then re-executed on the answer, then retried after the crash:
    # the model call and the tool call each ran once, with one idempotency key.
    assert tiny.model_calls == 1
    assert tiny.tool_keys == ["t1:tiny:0.-1.0.0/w1"]
    assert done.state["conversation"] == [{"said": "Oslo", "answered": "sunny in Oslo"}]
    assert done.state["usage"] == {
        "requests": 1,
        "input_tokens": 3,
        "output_tokens": 2,
        "tool_calls": 1,
    }


async def test_an_adapters_deltas_are_events():
    tiny = Tiny(failures=0, approval=False)
    workflow = WorkflowBuilder(AgentExecutor(tiny)).build()
    async with workflow.stream("Rome") as events:
        seen = [e async for e in events]
    deltas = [e.delta for e in seen if isinstance(e, AgentDelta)]
    assert deltas == ["Let me ", "look."]
