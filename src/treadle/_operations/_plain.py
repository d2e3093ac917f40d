"""Values as JSON-ready data, for what the command line prints and the server answers."""

from __future__ import annotations

from typing import Any, Literal


def plain(value: Any, *, nan: Literal["constants", "null"] = "constants") -> Any:
    """A value as JSON-ready data: dataclasses, models, datetimes, bytes, ...

    A value of a type with no JSON form becomes its ``repr``; nesting deeper
    than pydantic serializes is copied level by level. ``nan="null"`` turns
    NaN and infinities into ``null`` (strict JSON, for the HTTP API); by
    default they stay (Python's ``json`` prints them).
    """
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    try:
        return to_jsonable_python(value, fallback=repr, inf_nan_mode=nan)
    # Nested deeper than pydantic serializes (about 255 levels), or a dict keyed by what
    # pydantic takes for no key (a frozenset): copied level by level, each key made text.
    except (ValueError, TypeError):
        return _plain_deep(value, nan)


def _plain_deep(value: Any, nan: Literal["constants", "null"]) -> Any:
    """:func:`plain` without recursion: lists, tuples and dicts copied level by level."""
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        copied: Any
        if isinstance(item, dict):
            named = [(_key_text(k, nan), v) for k, v in item.items()]
            copied = dict.fromkeys(k for k, _ in named)
            stack.extend((copied, k, v) for k, v in named)
        elif isinstance(item, list | tuple):
            copied = [None] * len(item)
            stack.extend((copied, index, v) for index, v in enumerate(item))
        else:
            try:
                copied = to_jsonable_python(item, fallback=repr, inf_nan_mode=nan)
            except (ValueError, TypeError):  # a deep model or dataclass: its repr will do
                copied = repr(item)
        parent[key] = copied
    return root[0]


def _key_text(key: Any, nan: Literal["constants", "null"]) -> str:
    """A dict's key as text, as pydantic writes it where it can (``False``: ``"false"``)."""
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    if isinstance(key, str):
        return key
    try:
        (text,) = to_jsonable_python({key: None}, fallback=repr, inf_nan_mode=nan)
    except (ValueError, TypeError):  # no key to pydantic (a frozenset): its value's text
        return str(plain(key, nan=nan))
    return str(text)
