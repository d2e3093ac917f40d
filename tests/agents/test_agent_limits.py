"""Agent steps under a call limit: turns of many agents and runs share the model's slots."""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from treadle import CallLimit, WorkflowBuilder
from treadle.agents import AgentExecutor


async def test_agent_turns_of_many_runs_take_turns_for_the_models_slots():
    at_once = {"now": 0, "most": 0}

    async def reply(messages, info) -> ModelResponse:
        at_once["now"] += 1
        at_once["most"] = max(at_once["most"], at_once["now"])
        await asyncio.sleep(0.01)
        at_once["now"] -= 1
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(reply), name="helper")
    step = AgentExecutor(agent, limits=["model"])
    workflow = WorkflowBuilder(
        step, name="helps", limits=[CallLimit("model", concurrency=2)]
    ).build()
    results = await asyncio.gather(*(workflow.run(f"question {n}") for n in range(8)))
    assert [r.outputs for r in results] == [["done"]] * 8
    assert at_once["most"] == 2
