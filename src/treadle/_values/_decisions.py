"""Decisions in an answer's type: a person's decision is never taken by a default value.

A decision is a ``bool``, an ``Enum`` or a ``Literal`` of several values
(or a model or dataclass holding one). An answer given as data that leaves
one out is refused, naming the field (:func:`decisions_left_to_default`);
the answer's schema marks each as required (``_operations/_schemas.py``,
through :func:`decides`).
"""

from __future__ import annotations

import json
from typing import Any

from treadle._values._places import WHOLE, Place, inside, shown
from treadle._values._strict import MOST_PROBLEMS, _inner_schemas, _object_form, _schema

_DEEPEST_DECISION = 20  # fields below fields a decision is looked for in


def decisions_left_to_default(cls: Any, value: Any) -> list[str]:
    """Where an answer given as data leaves a decision to its type's default: each ``loc: ...``.

    A decision is a ``bool``, an ``Enum`` or a ``Literal`` of several values
    (or a model or dataclass holding one). An answer that leaves one out
    would have it decided by the default its type declares, not by the
    person answering: it is refused, naming the field, as a field left out
    of a form would be. A default of ``None`` decides nothing, and a value
    built in code (an instance of the type) is taken as it is.
    """
    schema = _schema(cls)
    defs = schema.get("$defs", {})
    memo: dict[int, bool] = {}

    def holds(node: dict[str, Any]) -> bool:  # a part with none is not walked, however long
        return _holds_defaulted(node, defs, memo)

    if not holds(schema):
        return []
    found: list[str] = []
    # Each part with its place, made from its parent's (see _strict.Place): a path copied
    # for each item of a list under a long key cost a 0.3 MB answer 800 MB.
    stack: list[tuple[Any, dict[str, Any], Place]] = [(value, schema, WHOLE)]
    while stack and len(found) < MOST_PROBLEMS:
        item, node, at = stack.pop()
        node = _object_form(node, defs, item)
        if isinstance(item, list | tuple | dict) and (inner_of := _inner_schemas(node, item)):
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend(
                (inner, of, inside(at, key))
                for key, inner in pairs
                if (of := inner_of(key)) and holds(of)
            )
        properties = node.get("properties")
        if not isinstance(item, dict) or not isinstance(properties, dict):
            continue
        for key, inner in properties.items():
            if not isinstance(inner, dict):
                continue
            if key in item:
                if holds(inner):
                    stack.append((item[key], inner, inside(at, key)))
            elif inner.get("default") is not None and decides(inner, defs):
                default = json.dumps(inner["default"])[:80]
                found.append(
                    f"{shown(inside(at, key), '')}: not given, and a decision is never left"
                    f" to its default ({default})"
                )
    return sorted(found)


def _holds_defaulted(node: dict[str, Any], defs: dict[str, Any], memo: dict[int, bool]) -> bool:
    """Whether a value of this JSON schema may hold a decision with a default, however deep.

    Read from the schema (small), following its references, and kept in
    ``memo`` by node: an answer of two million items was walked for
    decisions item by item (6.7 s) where its items could hold none.
    """
    key = id(node)
    if key in memo:
        return memo[key]
    seen: set[int] = set()
    parts: list[Any] = [node]
    found = False
    while parts and not found:
        part = parts.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        if isinstance(part, list):
            parts.extend(part)
            continue
        if not isinstance(part, dict):
            continue
        ref = part.get("$ref")
        if isinstance(ref, str):
            parts.append(defs.get(ref.rsplit("/", 1)[-1]))
        properties = part.get("properties")
        for inner in properties.values() if isinstance(properties, dict) else ():
            default = inner.get("default") if isinstance(inner, dict) else None
            found = found or (default is not None and decides(inner, defs))
        parts.extend(value for name, value in part.items() if name != "$defs")
    memo[key] = found
    return found


def decides(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> bool:
    """Whether a field of this JSON schema holds a decision (see above); a model's fields too."""
    if depth > _DEEPEST_DECISION:  # a model holding itself: what is below was seen above
        return False
    schema = _object_form(schema, defs)
    choices = schema.get("enum")
    if schema.get("type") == "boolean" or (isinstance(choices, list) and len(choices) > 1):
        return True
    properties = schema.get("properties")
    inner = [
        *schema.get("anyOf", ()),
        *(properties.values() if isinstance(properties, dict) else ()),
    ]
    return any(isinstance(o, dict) and decides(o, defs, depth + 1) for o in inner)
