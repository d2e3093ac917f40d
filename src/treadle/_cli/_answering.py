"""How the command line tells a person what to type to answer a request.

A pending request (the ``<request>`` JSON of :mod:`treadle._operations._schemas`)
is shown with the fields its answer has, each with its type and whether it
is required, and a ``treadle respond`` line with an example answer that fits,
ready to edit and paste. ``treadle show``, ``treadle requests`` and the end of
``run``, ``resume`` and ``respond`` print requests this one way (these are
lines of text; :mod:`treadle._cli._views` prints them).
"""

from __future__ import annotations

import json
import shlex
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from rich.markup import escape

from treadle._operations._shapes import iso_time

if TYPE_CHECKING:
    from collections.abc import Mapping

_EXAMPLES: Final[Mapping[str, Any]] = {
    "boolean": True,
    "integer": 0,
    "number": 0.0,
    "string": "",
    "array": [],
    "object": {},
    "null": None,
}
_FORMATS = MappingProxyType(
    {
        "date-time": "2030-01-01T00:00:00Z",
        "date": "2030-01-01",
        "time": "00:00:00",
        "uuid": "00000000-0000-0000-0000-000000000000",
        "duration": "PT0S",
    }
)


def request_lines(request: dict[str, Any]) -> list[str]:
    """One pending request as rich-markup lines: who asks what, the answer's fields, the command.

    ``request`` is a ``<request>`` made JSON-ready (its payload plain data).
    The last line answers it with an example that fits, ready to edit; one
    answered already (kept until the run goes on) is one line saying so.
    """
    payload = escape(json.dumps(request["payload"]))
    asker = escape(request["executor_id"])
    if request.get("answered"):
        kept = "answered; the answer is applied when the run goes on"
        return [f"request {request['request_id']} from {asker}: {kept}"]
    wanted = escape(str(request["response_type"]))
    lines = [f"request {request['request_id']} from {asker} waits for {wanted}: {payload}"]
    if request.get("deadline_at") is not None:
        lines.append(f"  deadline: {iso_time(request['deadline_at'], timespec='seconds')}")
    who = who_may_answer(request)
    if who is not None:
        lines.append(f"  who may answer: {escape(who)}")
    schema = request.get("answer_schema")
    lines += [f"  {escape(line)}" for line in field_lines(schema or {})]
    run_id = escape(shlex.quote(request["run_id"]))  # a run made before ids were checked
    if schema is None:  # read from the log: the run's code did not load, and respond needs it
        example, app = "'<json>'", " --app pkg.module:workflow"
    else:
        example, app = shlex.quote(json.dumps(example_answer(schema))), ""
    respond = f"treadle respond {run_id} {request['request_id']} {escape(example)}{app}"
    lines.append(f"  answer: {respond}")
    return lines


def who_may_answer(request: dict[str, Any]) -> str | None:
    """``maria, group:finance; not the run's starter``, or ``None`` when any approver may."""
    named = ", ".join(str(a) for a in request.get("approvers") or ())
    if request.get("four_eyes"):
        return f"{named or 'any approver'}; not the run's starter"
    return named or None


def field_lines(schema: dict[str, Any]) -> list[str]:
    """What an answer fitting ``schema`` is: its fields one a line (nested below), or its type."""
    defs = schema.get("$defs", {})
    if not isinstance(_resolve(schema, defs).get("properties"), dict):
        return [f"the answer is {_type_text(schema, defs)}"] if schema else []
    return ["the answer is a JSON object with:", *_fields(schema, defs, "  ", depth=0)]


def _fields(schema: dict[str, Any], defs: dict[str, Any], indent: str, depth: int) -> list[str]:
    """One line a field of an object schema; an object's (or a list of objects') fields below it."""
    resolved = _resolve(schema, defs)
    required = set(resolved.get("required", ()))
    lines = []
    for name, field in resolved.get("properties", {}).items():
        if name in required:
            note = "required"
        elif "default" in field:
            note = f"default {json.dumps(field['default'])}"
        else:
            note = "optional"
        inner, listed = _object_within(field, defs)
        nested = inner is not None and depth < _DEEPEST
        tail = (", each with:" if listed else ", with:") if nested else ""
        lines.append(f"{indent}{name}: {_type_text(field, defs)} ({note}){tail}")
        if inner is not None and nested:
            lines += _fields(inner, defs, indent + "  ", depth + 1)
    return lines


def _object_within(
    schema: dict[str, Any], defs: dict[str, Any]
) -> tuple[dict[str, Any] | None, bool]:
    """The object schema with named fields that a field is (or holds a list of: ``True``)."""
    resolved = _resolve(schema, defs)
    for option in resolved.get("anyOf") or resolved.get("oneOf") or [resolved]:
        candidate, listed = _resolve(option, defs), False
        if candidate.get("type") == "array" and isinstance(candidate.get("items"), dict):
            candidate, listed = _resolve(candidate["items"], defs), True
        if isinstance(candidate.get("properties"), dict):
            return candidate, listed
    return None, False


_DEEPEST = 4
"""How many levels of nested objects fields and examples go down (a type may contain itself)."""


def example_answer(schema: dict[str, Any]) -> Any:
    """An answer that fits ``schema``: its defaults, else a simple value of each type."""
    return _example(schema, schema.get("$defs", {}), depth=0)


def _example(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> Any:  # noqa: PLR0911 - one return per kind of schema
    schema = _resolve(schema, defs)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    deep = depth >= _DEEPEST  # a type may contain itself: from here, end the example
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        nulls = [o for o in options if o.get("type") == "null"]
        others = [o for o in options if o.get("type") != "null"]
        return _example((nulls if deep and nulls else others or options)[0], defs, depth)
    properties = schema.get("properties")
    if isinstance(properties, dict) and depth <= 2 * _DEEPEST:
        return {name: _example(f, defs, depth + 1) for name, f in properties.items()}
    if isinstance(schema.get("prefixItems"), list):
        return [_example(item, defs, depth + 1) for item in schema["prefixItems"]]
    kind = schema.get("type")
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict) and not deep and _object_within(items, defs)[0]:
        return [_example(items, defs, depth + 1)]  # one item shows what each is
    if kind == "string" and schema.get("format") in _FORMATS:
        return _FORMATS[schema["format"]]
    return _EXAMPLES.get(kind) if isinstance(kind, str) else None


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The schema a ``$ref`` points at (its own keys, such as a default, kept over it)."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    target = defs.get(ref.rsplit("/", 1)[-1], {})
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _type_text(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """A type as a person reads it: ``boolean``, ``list of integer``, ``one of "a", "b"``."""
    resolved = _resolve(schema, defs)
    if resolved.get("enum"):
        return "one of " + ", ".join(json.dumps(v) for v in resolved["enum"])
    if "const" in resolved:
        return json.dumps(resolved["const"])
    options = resolved.get("anyOf") or resolved.get("oneOf")
    if options:
        return " or ".join(_type_text(o, defs) for o in options)
    kind = resolved.get("type")
    if kind == "array":
        items = resolved.get("items")
        return f"list of {_type_text(items, defs)}" if items else "list"
    if kind == "object" and isinstance(resolved.get("properties"), dict):
        title = resolved.get("title")
        return str(title) if title else "object"
    if kind == "string" and resolved.get("format"):
        return f"string ({resolved['format']})"
    if isinstance(kind, str):
        return kind
    return "any JSON value"
