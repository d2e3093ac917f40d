"""Agents as steps of a workflow (``pip install 'treadle[agents]'``, on pydantic-ai).

An :class:`AgentExecutor` is an executor whose every message is one turn
of an agent::

    from pydantic_ai import Agent
    from treadle import WorkflowBuilder
    from treadle.agents import AgentExecutor

    triage = AgentExecutor(Agent("openai:gpt-4o-mini", name="triage"))
    workflow = WorkflowBuilder(triage, store=SqliteStore("runs.sqlite")).build()

Each model request and each tool call of a turn is journaled the moment it
returns, so a run killed in the middle of a turn resumes without paying for
a model request twice or calling a payment tool twice; the pieces of a
reply stream as :class:`treadle.events.AgentDelta` events as they arrive;
tools named in ``approve_tools`` wait for a :class:`ToolDecision` answered
from any process (``treadle respond``, the HTTP API); agents hand the
conversation to each other (``add_handoff``); a session agent waits for
the user's next message. The conversation and the token usage live in the
run's state. See ``docs/agents.md``.

Another agent library plugs in through :class:`AgentAdapter`.

This module imports pydantic-ai; ``import treadle`` never does.
"""

from __future__ import annotations

from treadle._extras import importing_extra
from treadle._public import publish

with importing_extra("treadle.agents", "agents"):
    from treadle._agents._adapter import (
        AgentAdapter,
        AgentTurn,
        HandoffTarget,
        TurnResult,
        TurnSteps,
    )
    from treadle._agents._executor import AgentExecutor
    from treadle._agents._pydantic_ai import PydanticAIAdapter
    from treadle._agents._steps import idempotency_key
    from treadle._agents._values import (
        AgentHandoff,
        AgentOptions,
        ToolApproval,
        ToolDecision,
        add_usage,
    )

__all__ = [
    "AgentAdapter",
    "AgentExecutor",
    "AgentHandoff",
    "AgentOptions",
    "AgentTurn",
    "HandoffTarget",
    "PydanticAIAdapter",
    "ToolApproval",
    "ToolDecision",
    "TurnResult",
    "TurnSteps",
    "add_usage",
    "idempotency_key",
]

publish(__name__, globals(), __all__)
