"""An agent session interrupted mid-turn: never a tool call left without its result.

A turn of an agent is one invocation; ``interrupt`` stops a session only
at a superstep boundary, so a turn whose tool is running finishes it (the
call and its result are committed together), and a turn resting on a
tool's approval is dropped whole (its journaled model response, with the
call, goes with it). Either way the conversation holds every tool call
with its result. Offline: pydantic-ai's ``FunctionModel``.
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, UserPromptPart
from scripted import Call, last_tool_return, scripted

from treadle import InputPolicy, RunStatus, WorkflowBuilder
from treadle.agents import AgentExecutor, ToolDecision
from treadle.errors import UnknownRequestError
from treadle.stores import SqliteStore


def unanswered_calls(conversation: list[dict]) -> list[str]:
    """The ids of tool calls in the conversation that no tool return answers."""
    calls, returns = [], set()
    for message in conversation:
        for part in message["parts"]:
            if part["part_kind"] == "tool-call":
                calls.append(part["tool_call_id"])
            elif part["part_kind"] == "tool-return":
                returns.add(part["tool_call_id"])
    return [call for call in calls if call not in returns]


def tool_calls(conversation: list[dict]) -> list[str]:
    return [
        part["tool_name"]
        for message in conversation
        for part in message["parts"]
        if part["part_kind"] == "tool-call"
    ]


def session(model, tools, **kwargs):
    agent = AgentExecutor(Agent(model, name="chat", tools=tools), session=True, **kwargs)
    return (
        WorkflowBuilder(agent, name="chat", input_policy=InputPolicy.INTERRUPT)
        .add_edge(agent, agent)
        .build()
    )


@pytest.fixture
async def store(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    yield store
    await store.close()


async def test_an_interrupt_while_a_tool_runs_lets_the_call_finish_with_its_result_first(store):
    started, release = asyncio.Event(), asyncio.Event()

    async def lookup(q: str) -> str:
        started.set()
        await release.wait()
        return f"found {q}"

    model = scripted([Call("lookup", {"q": "otters"})], last_tool_return, "stopped, as asked")
    workflow = session(model, [lookup])
    turn = asyncio.create_task(workflow.run("look up otters", run_id="a1", store=store))
    await started.wait()  # the tool is running, inside the turn's one invocation
    told = await workflow.send_message("a1", "stop that", store=store)
    assert told.status is RunStatus.RUNNING  # taken by the process driving the turn
    release.set()
    result = await turn
    assert result.status is RunStatus.AWAITING_INPUT
    conversation = result.state["conversation"]
    assert tool_calls(conversation) == ["lookup"]
    assert unanswered_calls(conversation) == []  # the call finished, its result committed
    # The turn's reply was its last word; the interrupting message was the next turn's.
    assert result.outputs == ["found otters", "stopped, as asked"]


async def test_an_interrupt_drops_a_turn_waiting_on_a_tools_approval_and_its_journaled_call(
    store,
):
    async def lookup(q: str) -> str:
        return f"found {q}"

    def first(messages: list[ModelMessage]) -> object:
        # The turn's first request: the otters turn calls the tool; the interrupting one does not.
        said = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        return [Call("lookup", {"q": "otters"})] if "otters" in said[-1] else "stopped, as asked"

    model = scripted(first, last_tool_return)
    workflow = session(model, [lookup], approve_tools=["lookup"])
    asked = await workflow.run("look up otters", run_id="a2", store=store)
    (request,) = asked.pending_requests  # the model asked for the call; it waits for approval
    result = await workflow.send_message("a2", "never mind", store=store)
    assert result.status is RunStatus.AWAITING_INPUT
    assert result.pending_requests == []
    conversation = result.state["conversation"]
    assert tool_calls(conversation) == []  # the journaled call went with its turn
    assert unanswered_calls(conversation) == []
    assert result.outputs == ["stopped, as asked"]
    with pytest.raises(UnknownRequestError):
        await workflow.respond("a2", {request.request_id: ToolDecision.approve()}, store=store)


async def test_a_debounced_agent_session_takes_a_burst_of_messages_as_one_prompt(store):
    def echo(messages: list[ModelMessage]) -> str:
        said = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        return f"heard {said[-1]!r}"

    agent = AgentExecutor(Agent(scripted(echo, echo), name="chat"), session=True)
    workflow = (
        WorkflowBuilder(agent, name="chat", input_policy=InputPolicy.debounce(1.0))
        .add_edge(agent, agent)
        .build()
    )
    await workflow.run("hi", run_id="a3", store=store)
    first = asyncio.create_task(workflow.send_message("a3", "book a table", store=store))
    await asyncio.sleep(0.2)  # sent first; the next comes well inside the window
    second = await workflow.send_message("a3", "for two", store=store)
    told = [await first, second]
    done = max(told, key=lambda result: len(result.outputs))  # the one that drove the turn
    assert done.outputs == ["heard 'hi'", "heard 'book a table\\nfor two'"]
