"""Handoffs between agent executors by name: the conversation goes along; approval may gate it."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scripted import Call, last_tool_return, scripted

from treadle import RunStatus, WorkflowBuilder
from treadle.agents import AgentExecutor, AgentHandoff, ToolDecision
from treadle.stores import MemoryStore, SqliteStore


def billing_model(seen: list[list[str]]) -> FunctionModel:
    """Billing replies naming what the user said first: it sees the whole conversation."""

    async def stream(messages: list[ModelMessage], info: AgentInfo):
        said = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        seen.append([t.name for t in info.function_tools])
        yield f"Billing here, about: {said[0]}"

    return FunctionModel(stream_function=stream)


def desk(triage_model, *, approve=(), require_approval=False, seen=None):
    triage = AgentExecutor(Agent(triage_model, name="triage"), approve_tools=approve)
    billing = AgentExecutor(
        Agent(
            billing_model(seen if seen is not None else []),
            name="billing",
            description="invoices and refunds",
        )
    )
    technical = AgentExecutor(Agent(scripted("Have you tried turning it off?"), name="technical"))
    return (
        WorkflowBuilder(triage, name="desk")
        .add_handoff(triage, [billing, technical], require_approval=require_approval)
        .build()
    )


def handing_off(tools_seen: list | None = None, then: str = "I will answer myself."):
    """Triage: hands off to billing first; seen again (refused), says ``then``."""

    async def stream(messages: list[ModelMessage], info: AgentInfo):
        if tools_seen is not None:
            tools_seen.append([(t.name, t.description) for t in info.function_tools])
        if not any(isinstance(m, ModelResponse) for m in messages):
            reply = [Call("handoff_to_billing", {"reason": "an invoice question"}, id="h1")]
            async for chunk in scripted(reply).stream_function(messages, info):
                yield chunk
        elif isinstance(messages[-1].parts[-1], ToolReturnPart):  # its handoff, refused
            yield f"{then} ({last_tool_return(messages)})"
        else:  # told the builder's approval refused it
            yield then

    return FunctionModel(stream_function=stream)


async def test_a_model_hands_the_conversation_to_another_agent_by_its_name(tmp_path):
    tools: list = []
    seen: list[list[str]] = []
    workflow = desk(handing_off(tools), seen=seen)
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await workflow.run("My invoice is wrong.", store=store)
    finally:
        await store.close()
    assert result.outputs == ["Billing here, about: My invoice is wrong."]
    (offered,) = tools
    assert [name for name, _ in offered] == ["handoff_to_billing", "handoff_to_technical"]
    assert "invoices and refunds" in offered[0][1]
    assert seen == [[]]  # billing has no handoff tools of its own
    kinds = [
        (m["kind"], [(p["part_kind"], p.get("tool_name")) for p in m["parts"]])
        for m in result.state["conversation"]
    ]
    assert kinds == [
        ("request", [("user-prompt", None)]),
        ("response", [("tool-call", "handoff_to_billing")]),
        ("request", [("tool-return", "handoff_to_billing")]),
        ("response", [("text", None)]),
    ]
    assert result.state["usage"]["requests"] == 2


async def test_a_handoff_named_in_approve_tools_waits_and_a_refusal_keeps_the_conversation():
    workflow = desk(handing_off(), approve=["handoff_to_billing"])
    store = MemoryStore()
    asked = await workflow.run("My invoice is wrong.", store=store, run_id="h1")
    assert asked.status is RunStatus.AWAITING_INPUT
    (request,) = asked.pending_requests
    assert (request.payload.tool, request.payload.args) == (
        "handoff_to_billing",
        {"reason": "an invoice question"},
    )
    refused = await workflow.respond(
        "h1", {request.request_id: ToolDecision.refuse("billing is closed")}, store=store
    )
    refusal = '{"error":"The call of handoff_to_billing was refused: billing is closed"}'
    assert refused.outputs == [f"I will answer myself. ({refusal})"]

    again = await workflow.run("My invoice is wrong.", store=store, run_id="h2")
    (request,) = again.pending_requests
    approved = await workflow.respond(
        "h2", {request.request_id: ToolDecision.approve()}, store=store
    )
    assert approved.outputs == ["Billing here, about: My invoice is wrong."]


async def test_a_handoff_the_builder_gates_is_approved_or_refused_like_any_handoff(tmp_path):
    workflow = desk(handing_off(then="Then I will help."), require_approval=True)
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await workflow.run("My invoice is wrong.", store=store, run_id="g1")
        (request,) = asked.pending_requests
        assert request.payload == {
            "handoff_from": "triage",
            "handoff_to": "billing",
            "reason": "an invoice question",
            "payload": AgentHandoff("triage", "an invoice question"),
        }
        refused = await workflow.respond("g1", {request.request_id: False}, store=store)
        # Refused: the triage agent is told so and answers itself.
        assert refused.status is RunStatus.COMPLETED
        assert refused.outputs == ["Then I will help."]
        prompts = [
            p["content"]
            for m in refused.state["conversation"]
            for p in m["parts"]
            if p["part_kind"] == "user-prompt"
        ]
        assert prompts == [
            "My invoice is wrong.",
            "Handing the conversation to billing was refused.",
        ]

        asked = await workflow.run("My invoice is wrong.", store=store, run_id="g2")
        (request,) = asked.pending_requests
        approved = await workflow.respond("g2", {request.request_id: True}, store=store)
    finally:
        await store.close()
    assert approved.outputs == ["Billing here, about: My invoice is wrong."]
