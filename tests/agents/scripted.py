"""Scripted models for the agent tests: pydantic-ai's ``FunctionModel``, offline.

:func:`scripted` makes a model whose n-th request of a conversation
(n counted from the responses already in its history, so a replayed
conversation asks for the same n) streams ``replies[n]``: text in small
chunks, or tool calls. Counting happens in a side SQLite table when a path
is given, so a test can count calls made by another process.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic_ai.models
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

if TYPE_CHECKING:
    from pathlib import Path

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False  # for the subprocess apps that import this


@dataclass(frozen=True)
class Call:
    """A tool call a scripted reply makes."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str = ""


Reply = str | Sequence[Call] | Callable[[list[ModelMessage]], str]


def last_tool_return(messages: list[ModelMessage]) -> str:
    """What the last tool call returned, as the model reads it (for replies that echo it)."""
    part = messages[-1].parts[-1]
    return part.model_response_str() if hasattr(part, "model_response_str") else str(part)


def count(side: str | Path, name: str) -> int:
    """Record one call of ``name`` in the side table; how many it has had, this one included."""
    with sqlite3.connect(side, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS calls (name TEXT)")
        db.execute("INSERT INTO calls VALUES (?)", (name,))
        return int(db.execute("SELECT COUNT(*) FROM calls WHERE name = ?", (name,)).fetchone()[0])


def counted(side: str | Path) -> dict[str, int]:
    """Every name the side table counted, with its count."""
    with sqlite3.connect(side, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS calls (name TEXT)")
        rows = db.execute("SELECT name, COUNT(*) FROM calls GROUP BY name").fetchall()
    return dict(rows)


def chunks(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def scripted(
    *replies: Reply,
    name: str = "scripted",
    on_request: Callable[[int], None] | None = None,
    pause: Callable[[int, int], Any] | None = None,
) -> FunctionModel:
    """A streaming model whose n-th request in a conversation gets ``replies[n]``.

    ``on_request(n)`` is told of each request made; ``pause(n, chunk)``,
    awaited between the chunks of a text reply, lets a test hold a reply
    half-streamed.
    """

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if on_request is not None:
            on_request(n)
        reply = replies[n] if n < len(replies) else f"(no reply scripted for request {n})"
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, str):
            for i, chunk in enumerate(chunks(reply)):
                if i and pause is not None:
                    await pause(n, i)
                yield chunk
            return
        yield {
            i: DeltaToolCall(call.tool, json.dumps(call.args), tool_call_id=call.id or f"c{n}.{i}")
            for i, call in enumerate(reply)
        }

    return FunctionModel(stream_function=stream, model_name=name)
