"""JSON schemas of what a person must type: a workflow's input, a request's answer.

The shape an answer must take used to be a class name, which sends whoever
must approve something to the source code. The command line prints these
schemas as fields to fill in, and the HTTP API serves them so that the page
can draw a form; both describe a pending request the same way here
(:func:`describe_request`, the ``<request>`` JSON of the API).

A request stores the *name* of its answer's type; the name resolves through
the workflow's type allowlist, plus the builtins ``_engine._answers`` knows,
exactly as the check of an arriving answer resolves it, so the schema shown
is the schema enforced.
"""

from __future__ import annotations

import copy
import functools
import re
import typing
from typing import TYPE_CHECKING, Any

from treadle._engine._answers import _BUILTINS as ANSWER_BUILTINS
from treadle._values._decisions import decides

if TYPE_CHECKING:
    from collections.abc import Iterable

    from treadle._engine._waits import PendingRequest
    from treadle._stores._store import Deliveries
    from treadle._workflow._workflow import Workflow


def input_schema(workflow: Workflow) -> dict[str, Any]:
    """The JSON schema of a workflow's input: what its start executor accepts.

    An executor with handlers for several types accepts any of them
    (``anyOf``); one that accepts anything gives ``{}``.
    """
    accepted = workflow.prototype(workflow.start_id).accepted_types()
    if not accepted or object in accepted:
        return {}
    if len(accepted) == 1:
        return _schema_of(accepted[0])
    return _schema_of(typing.Union[accepted])  # noqa: UP007 - a union of a tuple, at run time


def answer_schema(response_type: type | None) -> dict[str, Any]:
    """The JSON schema an answer of type ``response_type`` must fit.

    Dataclasses, pydantic models, enums and plain types are described as
    pydantic sees them. Answers are checked strictly (a key the type does
    not have is refused, not dropped), so each object with named fields says
    ``"additionalProperties": false``. A decision (a ``bool``, an enum, a
    ``Literal`` of several values) is required and shown without its
    default, which an answer given as data may not leave it to
    (``_values._strict.decisions_left_to_default``). ``None`` (an untyped
    request) and ``object`` accept anything: ``{}``.
    """
    if response_type is None or response_type is object:
        return {}
    schema = _schema_of(response_type)
    _close_objects(schema)
    _require_decisions(schema)
    return schema


def response_class(workflow: Workflow, type_name: str | None) -> type | None:
    """The class a request's stored type name names, as an arriving answer's check resolves it.

    ``None``: the request accepts anything, or the workflow does not know
    the name (its answer would be refused, so no schema fits).
    """
    if type_name is None:
        return None
    return ANSWER_BUILTINS.get(type_name) or workflow.type_registry.class_of(type_name)


def request_answer_schema(workflow: Workflow, type_name: str | None) -> dict[str, Any]:
    """The JSON schema of the answer a request asking for ``type_name`` must be."""
    return answer_schema(response_class(workflow, type_name))


async def describe_requests(
    workflow: Workflow, store: Deliveries, run_id: str, requests: Iterable[PendingRequest]
) -> list[dict[str, Any]]:
    """The requests a run's checkpoint lists, described, each saying whether it is answered.

    An answer kept in the run's inbox (given while the run was paused, or
    while no worker held it) settles its request at once, though the
    checkpoint lists it until the run goes on and applies it: ``answered``
    says so, and nobody is shown how to answer it again.
    """
    described = [describe_request(workflow, run_id, request) for request in requests]
    if described:
        answered = await answered_in_inbox(store, run_id)
        for request in described:
            request["answered"] = request["request_id"] in answered
    return described


async def answered_in_inbox(store: Deliveries, run_id: str) -> set[str]:
    """The requests of a run whose answer waits in its inbox for its owner to apply.

    The latest checkpoint still lists them until then (on PostgreSQL, until a
    worker takes the run up): they are answered all the same, and a second
    answer would be refused, so they are no longer waiting on anyone.
    """
    return {
        item.target
        for item in await store.inbox(run_id)
        if item.kind == "answer" and item.target is not None
    }


def describe_request(workflow: Workflow, run_id: str, request: PendingRequest) -> dict[str, Any]:
    """A pending request as the command line and the HTTP API show it.

    ``{"run_id", "request_id", "executor_id", "payload", "response_type",
    "answer_schema", "deadline_at", "approvers", "four_eyes", "answered"}``;
    the payload as the run holds it (the caller makes it JSON). ``approvers``
    lists who may answer (empty: anyone with the approver role);
    ``four_eyes``: not the run's starter; ``answered``: an answer is kept
    for it, applied when the run goes on (:func:`describe_requests` reads
    the inbox; here ``False``).
    """
    return {
        "run_id": run_id,
        "request_id": request.request_id,
        "executor_id": request.executor_id,
        "payload": request.payload,
        "response_type": request.response_type,
        "answer_schema": request_answer_schema(workflow, request.response_type),
        "deadline_at": request.deadline_at,
        "approvers": list(request.approvers),
        "four_eyes": request.four_eyes,
        "answered": False,
    }


def _schema_of(annotation: Any) -> dict[str, Any]:
    """A fresh copy of the (cached) schema, which callers may change."""
    return copy.deepcopy(_cached_schema(annotation))


@functools.lru_cache(maxsize=256)
def _cached_schema(annotation: Any) -> dict[str, Any]:
    """Pydantic's JSON schema of a type; a described ``{}`` for a type it cannot describe.

    Cached: building a ``TypeAdapter`` costs far more than reading a dict,
    and a listing of pending requests asks for the same few types again
    and again.
    """
    from pydantic import PydanticUserError, TypeAdapter  # noqa: PLC0415 - pydantic only when asked

    name = getattr(annotation, "__qualname__", None) or repr(annotation)
    try:
        schema = TypeAdapter(annotation).json_schema()
    except PydanticUserError:  # a class pydantic has no schema for: anything it validates
        return {"title": name, "description": f"a {name} (it has no JSON schema)"}
    _plain_descriptions(schema)
    return schema


# A reST role (:class:`~pkg.Name`, :meth:`text <target>`) and reST's inline code (``x``).
_ROLE = re.compile(r":(?:[\w-]+:)+`(?:~?[\w.]*\.)?([^`<]*?)(?:\s*<[^>]*>)?`")
_INLINE_CODE = re.compile(r"``(.+?)``", re.DOTALL)
_PARAGRAPH = re.compile(r"\n\s*\n")
_ATTRIBUTES = re.compile(r"\n\s*Attributes:\s*\n(?P<body>(?:[ \t]+.*(?:\n|$))+)")
_ATTRIBUTE = re.compile(r"^(?P<indent>[ \t]+)(?P<name>\w+)(?:\s*\([^)]*\))?:\s*(?P<text>.*)$")


def plain_text(text: str) -> str:
    """A docstring's text as a person filling a form should read it.

    Schemas take their descriptions from docstrings, written for Sphinx: a
    role names a class by its target (``:class:`ToolApproval``` reads
    ``ToolApproval``) and reST's double backticks become Markdown's single
    ones, which is how JSON Schema and OpenAPI descriptions mark code (the
    page draws them as code); lines wrapped for the source are joined.
    """
    text = _ROLE.sub(lambda found: found.group(1), text)
    text = _INLINE_CODE.sub(lambda found: f"`{found.group(1)}`", text)
    # Lines wrapped for the source join up; paragraphs stay apart.
    return "\n\n".join(" ".join(p.split()) for p in _PARAGRAPH.split(text.strip()))


def _attributes(description: str) -> tuple[str, dict[str, str]]:
    """A docstring without its Google-style ``Attributes:`` section, and what that section says."""
    found = _ATTRIBUTES.search(description)
    if found is None:
        return description, {}
    fields: dict[str, str] = {}
    name, indent = "", None
    for line in found.group("body").splitlines():
        item = _ATTRIBUTE.match(line)
        if item is not None and (indent is None or item.group("indent") == indent):
            indent, name = item.group("indent"), item.group("name")
            fields[name] = item.group("text").strip()
        elif name and line.strip():
            fields[name] = f"{fields[name]} {line.strip()}"
    rest = description[: found.start()] + description[found.end() :]
    return rest.strip(), fields


def _plain_descriptions(schema: dict[str, Any]) -> None:
    """Make every description in a schema plain text, in place (:func:`plain_text`).

    An object's ``Attributes:`` section becomes the descriptions of the
    fields it names (unless they have their own), so each field's help is
    next to it rather than in one block above them all.
    """
    for node in _subschemas(schema):
        description = node.get("description")
        if not isinstance(description, str):
            continue
        rest, fields = _attributes(description)
        properties = node.get("properties")
        if fields and isinstance(properties, dict):
            for field_name, text in fields.items():
                field = properties.get(field_name)
                if isinstance(field, dict) and "description" not in field:
                    field["description"] = plain_text(text)
            description = rest
        node["description"] = plain_text(description)


def _subschemas(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A schema and every schema in it, found keyword by keyword (see :func:`_close_objects`)."""
    found, stack = [], [schema]
    while stack:
        node = stack.pop()
        found.append(node)
        for keyword in _NAMED_SCHEMAS:
            named = node.get(keyword)
            if isinstance(named, dict):
                stack.extend(s for s in named.values() if isinstance(s, dict))
        for keyword in _LISTED_SCHEMAS:
            listed = node.get(keyword)
            if isinstance(listed, list):
                stack.extend(s for s in listed if isinstance(s, dict))
        for keyword in _ONE_SCHEMA:
            one = node.get(keyword)
            if isinstance(one, dict):
                stack.append(one)
    return found


_NAMED_SCHEMAS = ("properties", "$defs")  # keyword -> {name: schema}
_LISTED_SCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")  # keyword -> [schema]
_ONE_SCHEMA = ("items", "additionalProperties")  # keyword -> schema


def _require_decisions(schema: dict[str, Any]) -> None:
    """Make each decision with a default required and default-less (in place, nested too)."""
    defs = schema.get("$defs", {})
    for node in _subschemas(schema):
        properties = node.get("properties")
        if not isinstance(properties, dict):
            continue
        for key, field in properties.items():
            if not isinstance(field, dict) or field.get("default") is None:
                continue
            if decides(field, defs):
                del field["default"]
                required = node.setdefault("required", [])
                if key not in required:
                    required.append(key)


def _close_objects(schema: dict[str, Any]) -> None:
    """Mark every object with named fields as taking no other keys (in place, nested too).

    Walks the schema's structure (its sub-schemas, keyword by keyword), so a
    field that happens to be called ``properties``, or a default value that
    looks like a schema, is never mistaken for one.
    """
    for node in _subschemas(schema):
        if isinstance(node.get("properties"), dict):
            node.setdefault("additionalProperties", False)
