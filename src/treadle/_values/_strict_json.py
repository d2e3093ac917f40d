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

Whether a value holds such a string is asked of the C encoder first
(:func:`is_plain_json`): a walk in Python, item by item, is left for the
value that holds one, to name it. A 16 MiB array of five million items was
walked in Python to find nothing, as long again as reading it took.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
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
    if not is_plain_json(value):  # numbers are finite here: a string holds half a pair
        _no_lone_surrogate(value)
    return value


def is_plain_json(value: Any) -> bool:
    """Whether ``value`` is JSON as it is: every float finite, every text (keys too) Unicode.

    Asked of the C encoder in one pass, no Python code run per item, so a
    value of millions of items is answered in a fraction of a walk's time.
    ``False`` also when the encoder cannot tell (a key it does not write, a
    cycle, a value nested past its stack): a walk looks then, and names what
    it finds. Other objects (a datetime, bytes) are not looked into, as
    such a walk does not: they are written as ``null`` here.
    """
    if sys.getrecursionlimit() > _C_STACK_SAFE:
        return False  # the encoder recurses on the C stack as deep as the limit lets it
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_not_looked_into)
    except (TypeError, ValueError, RecursionError):
        return False
    return lone_surrogate(text) is None


_C_STACK_SAFE = 20_000
"""The recursion limit up to which the C encoder is asked: a value nested deeper is refused
by it as too deep. A program that raised the limit further (to 1,000,000) had a value nested
100,000 deep overflow the C stack: the process died of SIGSEGV. The walk asks then."""


def _not_looked_into(other: object) -> list[Any] | None:
    """What the encoder writes for a value it does not know: a set's items are looked into.

    An iterator is not: it would be used up. It is no plain JSON (the walk names it).
    """
    if isinstance(other, Iterator):
        raise TypeError(other)
    return list(other) if isinstance(other, set | frozenset) else None


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
