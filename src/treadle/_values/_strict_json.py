r"""JSON from outside (a request's body, a command's argument), read as RFC 8259 has it.

Python's ``json`` reads more than JSON: ``NaN``, ``Infinity`` and
``-Infinity``, a number past what a float holds (``1e400`` comes back as
infinity), and an object that names a key twice (the last one wins). Each
once got past the API and the command line: a number that is not finite
was kept in a run, and written into its event log it failed every commit
once a webhook read the log; a key given twice let an approval say
``"approved": false, "approved": true`` and be read as the last. Each is
refused here, naming what was at fault. So is a string escaping half of a
surrogate pair (``"\ud800"``): JSON's grammar lets it through, but it
is no text (RFC 8259 leaves what it means open), and no store keeps it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from treadle._values._text import lone_surrogate


class NotJsonError(ValueError):
    """The text parses, but is not JSON: a bare constant, an infinite number, a key twice."""


def loads(document: str | bytes) -> Any:
    """``json.loads``, refusing what is not JSON (see the module docstring).

    Raises:
        ValueError: the text is not JSON (``NotJsonError`` for what the
            ``json`` module alone would have read).
    """
    value = json.loads(
        document, parse_constant=_constant, parse_float=_finite, object_pairs_hook=_object
    )
    _no_lone_surrogate(value)
    return value


def _no_lone_surrogate(value: Any) -> None:
    """Refuse a string (a key too) that holds half a surrogate pair; walked without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            at = lone_surrogate(item)
            if at is not None:
                shown = item.encode("utf-8", "backslashreplace").decode()[:60]
                msg = f"the string {shown!r} holds half a surrogate pair (\\u{ord(item[at]):04x})"
                raise NotJsonError(msg)
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


def _constant(name: str) -> Any:
    raise NotJsonError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotJsonError(f"the number {text[:40]} is past what a float holds")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise NotJsonError(f"the key {twice!r} appears twice in one object")
    return found
