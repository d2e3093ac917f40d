"""Reading Server-Sent Events as a client does, for the stream tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


@dataclass(frozen=True)
class Message:
    """One SSE message: its id (``None``: it had none), event name and JSON data."""

    id: int | None
    event: str
    data: Any


def messages(lines: Iterable[str]) -> Iterator[Message]:
    """The messages in a stream's lines (comments, such as keep-alive pings, skipped)."""
    fields: dict[str, list[str]] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                raw_id = fields.get("id", [None])[-1]
                yield Message(
                    None if raw_id is None else int(raw_id),
                    fields.get("event", ["message"])[-1],
                    json.loads("\n".join(fields["data"])),
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))
