"""An agent that answers at length, for `treadle show` of a conversation: offline, scripted."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from pydantic_ai import Agent
from pydantic_ai.models.function import AgentInfo, FunctionModel

from treadle import WorkflowBuilder
from treadle.agents import AgentExecutor, add_usage

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

LONG_REPLY = "Here is everything about otters. " * 120  # about 4 KB, as a real model writes


async def _reply(messages: list[ModelMessage], info: AgentInfo):
    yield LONG_REPLY


agent = Agent(
    FunctionModel(stream_function=_reply, model_name="scripted"),
    name="writer",
    instructions="You write about otters. " * 40,
)
chat = (
    WorkflowBuilder(AgentExecutor(agent), name="chat")
    .add_state("conversation", default=[], reducer=operator.add)
    .add_state("usage", default={}, reducer=add_usage)
    .build()
)
