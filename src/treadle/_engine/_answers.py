"""Naming and checking the types of answers to ``ctx.request``.

A request records the *name* of the type its answer must have, so the check
can happen in another process, days later, when the answer arrives. Names
resolve through the workflow's type allowlist (plus a few builtins) and
nothing else, like everything else read back from storage.
"""

from __future__ import annotations

import dataclasses
import enum
import reprlib
from typing import TYPE_CHECKING, Any, Final

from treadle._engine._waits import NestedRequest, Suspension
from treadle._exceptions import InvalidResponseError
from treadle._values._decisions import decisions_left_to_default
from treadle._values._strict import fit_type

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._engine._waits import Waiting
    from treadle._values._registry import TypeRegistry

_BUILTINS: Final[Mapping[str, type]] = {
    cls.__name__: cls for cls in (str, int, float, bool, bytes, dict, list, tuple, object)
}
_PRIMITIVES = frozenset({str, int, float, bool, bytes, dict, list, tuple})
_SHORT = reprlib.Repr()  # an answer of any size shown in a few lines
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 200


def response_type_name(registry: TypeRegistry, cls: type) -> str:
    """The stored name of a response type.

    Raises:
        TypeError: ``cls`` is neither a builtin nor on the workflow's allowlist.
    """
    if not isinstance(cls, type):  # None, list[int], a Union: no class to name the answer by
        msg = (
            f"the response type {cls!r} is not a class: ask for a builtin (str, int, bool, "
            f"list, dict, ...), or a dataclass, enum or pydantic model registered with "
            f"WorkflowBuilder.register_type (a list[int] answer: a model with a list[int] field)"
        )
        raise TypeError(msg)
    if _BUILTINS.get(cls.__name__) is cls:
        return cls.__name__
    name = registry.name_of(cls)
    if name is None:
        msg = (
            f"the response type {cls!r} is not allowed in checkpoints: register it with "
            f"WorkflowBuilder.register_type({getattr(cls, '__name__', cls)})"
        )
        raise TypeError(msg)
    return name


def validate_response(
    registry: TypeRegistry, request_id: str, type_name: str | None, value: Any
) -> Any:
    """The answer, checked strictly (and for structured types, built) against its type.

    Builtin types must match exactly (``True`` is not an ``int`` answer);
    dataclasses, enums and pydantic models also accept their plain-data form
    (a dict, an enum value), as an answer typed at a command line would be,
    checked by the rule every input and answer passes
    (:mod:`treadle._values._strict`): nothing is coerced (``"yes"`` is not a
    ``bool``), and a key the type does not have is refused rather than
    dropped. Every field at fault is named.

    Raises:
        InvalidResponseError: the answer does not fit, naming the request
            and each field at fault.
    """
    cls = _BUILTINS.get(type_name or "object") or registry.class_of(type_name or "")
    if cls is None:
        msg = f"request {request_id!r} asks for {type_name!r}, which this workflow does not know"
        raise InvalidResponseError(msg)
    if cls is object:
        return value
    exact = isinstance(value, cls) and not (cls in (int, float) and isinstance(value, bool))
    if exact:
        return value
    if cls is float and type(value) is int:  # JSON has one number: a whole one is a float too
        return float(value)
    if cls in _PRIMITIVES or not (
        dataclasses.is_dataclass(cls)
        or issubclass(cls, enum.Enum)
        or hasattr(cls, "model_validate")
    ):
        try:
            shown = _SHORT.repr(value)
        except ValueError:  # an int of more digits than Python will write out
            shown = "(too large to show)"
        msg = f"request {request_id!r} expects {type_name}, got {type(value).__name__} {shown}"
        raise InvalidResponseError(msg)
    answer, problems = fit_type(cls, value)
    if not problems and not isinstance(value, cls):  # data, as a person's door hands it on
        problems = decisions_left_to_default(cls, value)
    if problems:
        msg = f"request {request_id!r} expects {type_name}: {'; '.join(problems)}"
        raise InvalidResponseError(msg)
    return answer


def asker_of(waiting: Waiting) -> tuple[str, Any] | None:
    """The executor that asked a request of this run and what it asked (its payload).

    ``None`` for a handoff approval and for a request asked inside a
    sub-workflow (whose executors are not this graph's).
    """
    if isinstance(waiting, Suspension):
        return waiting.executor_id, waiting.wait.payload
    return None


def response_type_of(waiting: Waiting) -> str | None:
    """The type name an answer to ``waiting`` must have (a handoff approval takes a bool)."""
    while isinstance(waiting, NestedRequest):
        waiting = waiting.waiting
    return waiting.wait.response_type if isinstance(waiting, Suspension) else "bool"


def request_rules(waiting: Waiting) -> tuple[tuple[str, ...], bool]:
    """Who may answer ``waiting``: its ``approvers`` and whether it needs four eyes.

    What ``ctx.request`` kept with the request (in the checkpoint, and in the
    ``request`` event of the run's log for a door without the code); a door
    hands them to :func:`treadle._values._actors.answer_refusal` with the
    actor and the run's starter. A handoff approval names no one: anyone
    with the approver role.
    """
    while isinstance(waiting, NestedRequest):
        waiting = waiting.waiting
    if isinstance(waiting, Suspension):
        return waiting.wait.approvers, waiting.wait.four_eyes
    return (), False
