"""An agent's conversation as people read it: one entry per message, in short.

The conversation is kept in the run's state in the agent library's JSON
form (pydantic-ai's messages: ``kind`` ``"request"`` or ``"response"``,
each with ``parts`` of a ``part_kind``), which is complete but hard to
read. :func:`transcript` reads that form without importing the library:
each message becomes ``{"role", "text", "tool_calls", "tool_results"}``,
so the server can show a conversation without knowing any agent library.
A message in another form is shown whole, as JSON, rather than dropped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

_TEXT_PARTS: Final[Mapping[str | None, str]] = {
    "system-prompt": "system",
    "user-prompt": "user",
    "text": "assistant",
}
_SHOWN = 2000
"""Characters of a text, a tool's arguments or its result an entry keeps."""


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _entry(message: Any) -> dict[str, Any]:
    """One message as an entry (its role: user, assistant, system, tool, or unknown)."""
    parts = message.get("parts") if isinstance(message, dict) else None
    kind = message.get("kind") if isinstance(message, dict) else None
    if kind not in ("request", "response") or not isinstance(parts, list):
        return {
            "role": "unknown",
            "text": _short(_as_text(message)),
            "tool_calls": [],
            "tool_results": [],
        }
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    roles: set[str] = set()
    for part in parts:
        if not isinstance(part, dict):
            continue
        part_kind = part.get("part_kind")
        if part_kind in _TEXT_PARTS:
            roles.add(_TEXT_PARTS[part_kind])
            texts.append(_as_text(part.get("content", "")))
        elif part_kind == "tool-call":
            args = part.get("args")
            shown = args if isinstance(args, str) else _as_text(args or {})
            calls.append(
                {
                    "tool": part.get("tool_name"),
                    "args": _short(shown),
                    "call_id": part.get("tool_call_id"),
                }
            )
        elif part_kind in ("tool-return", "retry-prompt"):
            content = _as_text(part.get("content", ""))
            results.append(
                {
                    "tool": part.get("tool_name"),
                    "content": _short(content),
                    "call_id": part.get("tool_call_id"),
                    "retry": part_kind == "retry-prompt",
                }
            )
    if kind == "response":
        role = "assistant"
    elif "user" in roles:
        role = "user"
    elif results:
        role = "tool"
    else:
        role = "system" if "system" in roles else "user"
    text = "\n\n".join(t for t in texts if t)
    return {
        "role": role,
        "text": _short(text) if text else None,
        "tool_calls": calls,
        "tool_results": results,
    }


def transcript(messages: Any) -> list[dict[str, Any]]:
    """A conversation (the list kept in the run's state) as entries, oldest first."""
    if not isinstance(messages, list):
        return []
    return [_entry(message) for message in messages]
