"""An agent's turn as an executor: scripted replies, journaled steps, live deltas, state."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from scripted import Call, last_tool_return, scripted

from treadle import (
    ExecutionMode,
    ExponentialBackoff,
    RetryPolicy,
    RunResult,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.agents import AgentExecutor, PydanticAIAdapter, idempotency_key
from treadle.events import AgentDelta, ExecutorCompleted, OutputEvent
from treadle.stores import SqliteStore
from treadle.testing import FakeClock


def adder(model) -> Agent:
    agent = Agent(model, name="adder")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


async def test_a_turn_calls_tools_outputs_the_reply_and_keeps_conversation_and_usage(tmp_path):
    model = scripted([Call("add", {"a": 1, "b": 2})], "The sum is 3.")
    workflow = WorkflowBuilder(AgentExecutor(adder(model)), name="sums").build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await workflow.run("What is 1 + 2?", store=store, run_id="s1")
    finally:
        await store.close()
    assert (result.status, result.outputs) == (RunStatus.COMPLETED, ["The sum is 3."])
    conversation = result.state["conversation"]
    kinds = [(m["kind"], [p["part_kind"] for p in m["parts"]]) for m in conversation]
    assert kinds == [
        ("request", ["user-prompt"]),
        ("response", ["tool-call"]),
        ("request", ["tool-return"]),
        ("response", ["text"]),
    ]
    assert conversation[2]["parts"][0]["content"] == 3
    usage = result.state["usage"]
    assert (usage["requests"], usage["tool_calls"]) == (2, 1)
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0


async def test_the_output_goes_along_the_agents_edges_typed_as_its_output(tmp_path):
    model = scripted("forty-two")
    seen: list[str] = []

    @executor
    async def shout(text: str, ctx: WorkflowContext[str]) -> None:
        seen.append(text)
        ctx.yield_output(text.upper())

    agent = AgentExecutor(Agent(model, name="oracle"))
    workflow = WorkflowBuilder(agent).add_edge(agent, shout).build()
    result = await workflow.run("the answer?")
    assert (result.outputs, seen) == (["FORTY-TWO"], ["forty-two"])


async def _bought_with_one_retry(agent: Agent, tmp_path) -> RunResult:
    """A stored run of ``agent`` on "buy", its turn retried once (a second after a failure)."""
    clock = FakeClock(start=1000.0)
    retry = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(initial=1, jitter=0))
    workflow = WorkflowBuilder(AgentExecutor(agent, retry=retry), clock=clock).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        return await clock.run(workflow.run("buy", store=store))
    finally:
        await store.close()


async def test_a_retried_turn_replays_its_model_requests_and_finished_tool_calls(tmp_path):
    requests: list[int] = []
    charged: list[int] = []
    shipped: list[int] = []
    model = scripted(
        [Call("charge", {"cents": 500})],
        [Call("ship", {"to": "ann"})],
        "Charged and shipped.",
        on_request=requests.append,
    )
    agent = Agent(model, name="shop")

    @agent.tool_plain
    def charge(cents: int) -> str:
        charged.append(cents)
        return f"receipt-{len(charged)}"

    @agent.tool_plain
    def ship(to: str) -> str:
        shipped.append(1)
        if len(shipped) == 1:
            msg = "the courier's API is down"
            raise ConnectionError(msg)
        return f"parcel for {to}"

    result = await _bought_with_one_retry(agent, tmp_path)
    assert result.outputs == ["Charged and shipped."]
    # The first attempt died in ship: its two model requests and the charge were
    # journaled, so the second attempt made only the third request and ship again.
    assert (requests, charged, len(shipped)) == ([0, 1, 2], [500], 2)
    returns = [
        part["content"]
        for message in result.state["conversation"]
        for part in message["parts"]
        if part["part_kind"] == "tool-return"
    ]
    assert returns == ["receipt-1", "parcel for ann"]


async def test_a_stream_sees_the_first_token_before_the_reply_ends():
    first_seen = asyncio.Event()

    async def hold(request: int, chunk: int) -> None:
        # The rest of the reply waits until the consumer has seen its first piece:
        # if deltas were not published live, this would never happen.
        await asyncio.wait_for(first_seen.wait(), timeout=30)

    model = scripted("Hello there, traveller.", pause=hold)
    workflow = WorkflowBuilder(AgentExecutor(Agent(model, name="greeter"))).build()
    order: list[str] = []
    deltas: list[AgentDelta] = []
    async with workflow.stream("hi", mode=ExecutionMode.OFF_THREAD) as events:
        async for event in events:
            match event:
                case AgentDelta():
                    deltas.append(event)
                    order.append("delta")
                    first_seen.set()
                case ExecutorCompleted(executor_id="greeter"):
                    order.append("completed")
                case OutputEvent(value=value):
                    order.append(f"output {value}")
    assert order[0] == "delta"
    assert order[-2:] == ["completed", "output Hello there, traveller."]
    assert "".join(d.delta for d in deltas) == "Hello there, traveller."
    assert {(d.agent, d.kind, d.part, d.executor_id) for d in deltas} == {
        ("greeter", "text", 0, "greeter")
    }


async def test_tool_call_deltas_name_the_tool_and_stream_its_arguments():
    model = scripted([Call("add", {"a": 4, "b": 5})], "9")
    workflow = WorkflowBuilder(AgentExecutor(adder(model))).build()
    result = await workflow.run("4 + 5?", options=None)
    assert result.outputs == ["9"]
    async with workflow.stream("4 + 5?", mode=ExecutionMode.LOCKSTEP) as events:
        deltas = [e for e in [e async for e in events] if isinstance(e, AgentDelta)]
    calls = [d for d in deltas if d.kind == "tool_call"]
    assert calls[0].tool == "add"
    assert "".join(d.delta for d in calls) == '{"a": 4, "b": 5}'
    assert "".join(d.delta for d in deltas if d.kind == "text") == "9"


async def test_deltas_are_not_kept_in_a_stored_runs_event_log(tmp_path):
    model = scripted("streamed, then forgotten")
    workflow = WorkflowBuilder(AgentExecutor(Agent(model, name="quiet"))).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        async with workflow.stream("hi", store=store, run_id="q1") as events:
            live = [e async for e in events if isinstance(e, AgentDelta)]
        logged = {entry.kind for entry in await store.read_events("q1")}
    finally:
        await store.close()
    assert live  # the stream had them
    assert "agent_delta" not in logged
    assert {"executor_completed", "output"} <= logged


def test_an_agent_without_a_name_needs_an_id():
    with pytest.raises(ValueError, match="has no name"):
        AgentExecutor(Agent(scripted("x")))
    assert AgentExecutor(Agent(scripted("x")), id="anon").id == "anon"


async def test_a_model_that_does_not_stream_is_called_whole_and_publishes_no_deltas():
    def whole(messages, info) -> ModelResponse:
        return ModelResponse(parts=[TextPart("all at once")])

    streaming = scripted("streamed").stream_function
    for agent in (
        AgentExecutor(Agent(FunctionModel(whole), name="plain")),
        AgentExecutor(
            PydanticAIAdapter(
                Agent(FunctionModel(whole, stream_function=streaming), name="both"), stream=False
            )
        ),
    ):
        async with WorkflowBuilder(agent).build().stream("hi") as events:
            seen = [e async for e in events]
        assert [e for e in seen if isinstance(e, AgentDelta)] == []
        assert [e.value for e in seen if isinstance(e, OutputEvent)] == ["all at once"]


async def test_a_call_id_the_model_gives_again_is_another_call_run_and_replayed_as_such(tmp_path):
    """Some models number their tool calls afresh in each response: call_0 again is a new call."""
    charged: list[tuple[int, str]] = []
    model = scripted(
        [Call("charge", {"cents": 100}, id="call_0")],
        [Call("charge", {"cents": 200}, id="call_0")],
        lambda messages: f"Done: {last_tool_return(messages)}",
    )
    agent = Agent(model, name="shop")

    @agent.tool_plain
    def charge(cents: int) -> str:
        charged.append((cents, idempotency_key()))
        if len(charged) == 2:  # the first attempt dies in the second charge
            msg = "the payment API is down"
            raise ConnectionError(msg)
        return f"receipt for {cents}"

    result = await _bought_with_one_retry(agent, tmp_path)
    assert result.outputs == ["Done: receipt for 200"]
    # Each charge ran for its own arguments under a key of its own; the retry replayed
    # the first from the journal and ran the second again, under the same key.
    (first, key_1), (second, key_2), (again, key_3) = charged
    assert (first, second, again) == (100, 200, 200)
    assert key_1.endswith("/call_0")
    assert key_2.endswith("/call_0#2")
    assert key_3 == key_2
