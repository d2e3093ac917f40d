"""Naming each public class and function after the module that documents it.

Every implementation module is private, so without help a class reports
where it was written: ``treadle._engine._result.RunStatus`` in reprs,
tracebacks and pickles. Each public module calls :func:`publish` on its
``__all__`` once it has imported them, so they report ``treadle.RunStatus``,
``treadle.errors.RunBusyError``, and so on: names a user can import.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


def publish(module: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Set ``__module__`` to ``module`` on each class and function among ``names``.

    Args:
        module: The public module's name (its ``__name__``).
        namespace: The public module's globals.
        names: Its ``__all__``. A name not yet in ``namespace`` (one the
            module imports lazily) is skipped; the module publishes it when
            it loads it. Other values (type aliases) keep their ``__module__``.
    """
    for name in names:
        value = namespace.get(name)
        if isinstance(value, type):
            _resolve_annotations(value)
            value.__module__ = module
        elif isinstance(value, types.FunctionType):
            value.__module__ = module  # its annotations resolve in __globals__, not __module__


def _resolve_annotations(cls: type) -> None:
    """Replace the class's own string annotations by what they name, where they resolve.

    ``typing.get_type_hints``, and pydantic reading a dataclass's fields,
    evaluate a class's string annotations in the module its ``__module__``
    names. Once that is the public module, the names the private module
    imported (``Any``, ``datetime``) are missing there; resolving the
    annotations first, where they were written, keeps those tools working.
    A class whose hints did not resolve before (names imported only for the
    type checker) is left as it was.
    """
    own = inspect.get_annotations(cls)
    if not own:
        return
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError, AttributeError, SyntaxError):
        return
    cls.__annotations__ = {key: hints.get(key, hint) for key, hint in own.items()}
    for field in getattr(cls, "__dataclass_fields__", {}).values():
        field.type = hints.get(field.name, field.type)
