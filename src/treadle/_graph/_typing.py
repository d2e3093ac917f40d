"""Reading message types out of handler annotations.

Routing and build-time validation both need to know which classes a handler
accepts and which it may send. Annotations are the single source of that
truth, so these helpers turn an annotation (``int``, ``A | B``,
``list[Doc]``, ``Optional[X]``, ``Any``) into a flat tuple of runtime classes
that ``isinstance`` and the MRO understand.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union, get_args, get_origin

if typing.TYPE_CHECKING:
    from collections.abc import Callable

_UNION_ORIGINS: tuple[object, ...] = (Union, types.UnionType)


def runtime_classes(annotation: object) -> tuple[type, ...]:
    """Flatten an annotation into the runtime classes a value may have.

    ``Any`` and ``object`` both mean "every message"; generic aliases are
    reduced to their origin (``list[int]`` is a ``list`` at run time).
    """
    if annotation is Any or annotation is object:
        return (object,)
    if annotation is None or annotation is type(None):
        return (type(None),)
    origin = get_origin(annotation)
    if origin in _UNION_ORIGINS:
        found: list[type] = []
        for member in get_args(annotation):
            for cls in runtime_classes(member):
                if cls not in found:
                    found.append(cls)
        return tuple(found)
    if origin is typing.Annotated:
        return runtime_classes(get_args(annotation)[0])
    if origin is typing.Literal:
        return tuple(dict.fromkeys(type(v) for v in get_args(annotation)))
    if origin is not None:
        return runtime_classes(origin)
    if isinstance(annotation, type):
        return (annotation,)
    msg = f"cannot route on the annotation {annotation!r}: use a class, a union or Any"
    raise TypeError(msg)


def resolve_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Resolve a function's annotations, naming the function when one fails."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        msg = (
            f"cannot resolve the annotations of handler {name}: {exc}. Define the types "
            f"at module level, or pass accepts=... to @handler / @executor"
        )
        raise TypeError(msg) from exc


def promotions(message_type: type) -> tuple[type, ...]:
    """Classes a message may also be handled as, per PEP 484's numeric tower.

    An ``int`` is acceptable where a ``float`` is annotated, and both where a
    ``complex`` is; these are tried only after the message's own MRO, so an
    exact handler always wins.
    """
    if issubclass(message_type, int):
        return (float, complex)
    if issubclass(message_type, float):
        return (complex,)
    return ()


def accepts_any_of(accepted: tuple[type, ...], offered: tuple[type, ...]) -> bool:
    """Whether some offered class can be handled by some accepted class."""
    if object in accepted or object in offered:
        return True
    return any(
        issubclass(o, a) or issubclass(a, o) or a in promotions(o)
        for o in offered
        for a in accepted
    )
