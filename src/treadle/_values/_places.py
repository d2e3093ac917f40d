"""Where a problem sits in a value, as a refusal names it: a dotted path, cut when long.

A refusal is short whatever the value: a path (or a key) past
:data:`LONGEST_SHOWN` characters is quoted by its start and its length. The
walks of an answer (``_strict``, ``_decisions``) keep a :data:`Place` for
each container instead of its path, so what they hold stays the same size
however deep they go.
"""

from __future__ import annotations

LONGEST_SHOWN = 100
"""Characters of a key, or of a path of keys, a problem quotes."""


def cut(text: str) -> str:
    """``text``, or its start and its length: a key of megabytes is refused in one short line."""
    return text if len(text) <= LONGEST_SHOWN else _abridged(text, len(text))


def where(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a dotted path (``value`` for the whole), cut if long."""
    return cut(".".join(map(str, loc))) or "value"


Place = tuple[str, int]
"""Where a part of a value sits, as :func:`where` shows it: the start of its
path (all of it, up to what is shown of one) and the whole path's length.

Made from its parent's in constant time: the path of each container as a
tuple of its keys copied the whole path again a level down, and a value
nested 100,000 deep took 21 s to check (its square, halved, in copies).
"""

WHOLE: Place = ("", -1)
"""The value itself: no path."""


def inside(place: Place, key: int | str) -> Place:
    """The place of what ``key`` names in the container at ``place``."""
    start, length = place
    text = str(key)
    if length < 0:
        return text[:LONGEST_SHOWN], len(text)
    if len(start) < LONGEST_SHOWN:  # what is shown of a path is its start: kept that far
        start = f"{start}.{text[:LONGEST_SHOWN]}"
    return start, length + 1 + len(text)


def shown(place: Place, empty: str = "value") -> str:
    """:func:`where` of the path at ``place`` (``empty``: what a path of no text is shown as)."""
    start, length = place
    return _abridged(start, length) if length > LONGEST_SHOWN else start or empty


def _abridged(start: str, length: int) -> str:
    return f"{start[: LONGEST_SHOWN - 40]}... ({length:,} characters)"
