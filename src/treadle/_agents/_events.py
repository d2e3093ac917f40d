"""The event an agent publishes as its model streams: :class:`AgentDelta`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from treadle._engine._events import WorkflowEvent


@dataclass(slots=True, kw_only=True)
class AgentDelta(WorkflowEvent):
    """A piece of an agent's reply, published the moment the model streams it.

    ``kind`` says what grows: ``"text"`` (``delta`` is the next characters
    of the reply) or ``"tool_call"`` (``delta`` is the next characters of a
    tool call's JSON arguments; ``tool`` names the tool once known).
    ``part`` is the index of the part of the model's response the delta
    belongs to, so a consumer can reassemble parallel tool calls.

    Deltas are for watching a reply as it forms: in an ``OFF_THREAD`` stream
    the first one arrives before the model has finished. They are
    *ephemeral*: never kept in a stored run's event log (the completed
    reply is, in the conversation state), and a replayed model request
    (after a crash or a durable wait) publishes none.
    """

    ephemeral: ClassVar[bool] = True
    """Tells the event log to skip this class: deltas are not history."""

    agent: str = ""
    kind: Literal["text", "tool_call"] = "text"
    delta: str = ""
    part: int = 0
    tool: str | None = None
