"""Which kinds of JSON a type refuses whatever they hold, read from its pydantic core schema.

A request for a dataclass or a model takes a JSON object; an array given
for it is refused at its top, before pydantic looks at any of its items.
Knowing that from the type, an array of five million items is refused as
soon as it is seen to be an array, rather than after every walk of the
value there is (not JSON, unknown keys, made into JSON text and read back).

Only what is certain counts: a validator of the type's own that sees the
raw value first (a ``model_validator(mode="before")``, a custom
``__init__``, an enum's ``_missing_``) may make anything of an array, so a
type holding one refuses no kind here, and its values are checked in full.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

ARRAY: Final = "array"
OBJECT: Final = "object"

_NONE: Final = frozenset[str]()
_ARRAYS: Final = frozenset({ARRAY})
_BOTH: Final = frozenset({ARRAY, OBJECT})
_DEEPEST = 20  # references followed; a schema past it refuses nothing it is sure of


def json_kind(value: Any) -> str | None:
    """``"array"`` or ``"object"``: what ``value`` is written as in JSON; ``None`` for a scalar."""
    if isinstance(value, list | tuple):
        return ARRAY
    if isinstance(value, dict):
        return OBJECT
    return None


def kinds_refused(  # noqa: PLR0911 - one return per kind of schema
    schema: Mapping[str, Any], definitions: Mapping[str, Any] | None = None, depth: int = 0
) -> frozenset[str]:
    """The JSON kinds a strict validator of the core ``schema`` refuses, whatever they hold.

    Each is refused at the top with the same error, whichever array (or
    object) it is. Empty when that is not certain (see the module docstring).
    """
    if depth > _DEEPEST:
        return _NONE
    definitions = definitions or {}
    match schema.get("type"):
        case "definitions":
            found = {d.get("ref"): d for d in schema.get("definitions", ())}
            return kinds_refused(schema["schema"], found, depth + 1)
        case "definition-ref":
            target = definitions.get(schema.get("schema_ref", ""))
            return _NONE if target is None else kinds_refused(target, definitions, depth + 1)
        case "function-after":  # it runs only on what the schema inside took
            return kinds_refused(schema["schema"], definitions, depth + 1)
        case "model" if schema.get("root_model") and not schema.get("custom_init"):
            return kinds_refused(schema["schema"], definitions, depth + 1)
        case "model" if not schema.get("custom_init"):
            return _ARRAYS if schema["schema"].get("type") == "model-fields" else _NONE
        case "dataclass":
            return _ARRAYS if schema["schema"].get("type") == "dataclass-args" else _NONE
        case "enum":
            return _BOTH if _looked_up_only(schema["cls"]) else _NONE
    return _LEAVES.get(schema.get("type", ""), _NONE)


_LEAVES: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {"list": frozenset({OBJECT}), "dict": _ARRAYS}
)


def _looked_up_only(cls: type[enum.Enum]) -> bool:
    """Whether an enum's values are found only among its members, each a scalar."""
    missing = getattr(cls._missing_, "__func__", None)
    plain = (str, int, float, bool, type(None))
    return missing is _ENUM_MISSING and all(isinstance(m.value, plain) for m in cls)


_ENUM_MISSING: Final = vars(enum.Enum)["_missing_"].__func__
"""``Enum._missing_``, which finds nothing: an enum that keeps it takes only its members' values."""
