"""The OpenAPI 3.1 document served at ``/openapi.json``, made from the route table.

Paths and operations come from the :class:`Endpoint` table itself, so the
document lists every route the router has; the shapes they take and give
are the component schemas below, written once here (OpenAPI 3.1 schemas
are JSON Schema 2020-12).
"""

from __future__ import annotations

import re
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from treadle._values._actors import Role

if TYPE_CHECKING:
    from collections.abc import Iterable

    from treadle._server._endpoints import Endpoint

_PATH_PARAMETER = re.compile(r"{(\w+)}")


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


def _object(required: Iterable[str] = (), **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_ANY: dict[str, Any] = {}  # any JSON value

_TIME: dict[str, Any] = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601 in UTC, with its offset (+00:00).",
}
_MAYBE_TIME: dict[str, Any] = _TIME | {"type": ["string", "null"]}

_RUN = _object(
    ("run_id", "workflow", "status", "superstep", "created_at", "updated_at"),
    run_id={"type": "string"},
    workflow={"type": "string"},
    status={"type": "string"},
    superstep={"type": "integer"},
    checkpoint_id=_nullable("string"),
    parent_run_id=_nullable("string"),
    parent_checkpoint_id=_nullable("string"),
    created_at=_TIME,
    updated_at=_TIME,
    error=_nullable("string"),
    wake_at=_MAYBE_TIME,
    deadline_at=_MAYBE_TIME,
    owner=_nullable("string"),
    lease_until=_MAYBE_TIME,
    parked=_nullable("string"),
    pause_requested=_MAYBE_TIME,
    version={"type": "integer", "description": "The version of its workflow it goes on with."},
    outcome=_nullable("string") | {"description": "How it ended for the business (approved, ...)."},
    outcome_summary=_nullable("string"),
)

_GRAPH = _object(
    ("nodes", "edges", "start"),
    nodes={
        "type": "array",
        "items": _object(
            ("id", "kind", "rank"),
            id={"type": "string"},
            kind={"enum": ["start", "executor", "workflow"]},
            rank={"type": "integer"},
            graph=_ref("Graph"),
        ),
    },
    edges={
        "type": "array",
        "items": _object(
            ("source", "target", "kind"),
            source={"type": "string"},
            target={"type": "string"},
            kind={
                "enum": ["plain", "conditional", "fan-out", "fan-in", "switch", "handoff", "error"]
            },
            label={"type": "string"},
        ),
    },
    start={"type": "string"},
)

_REQUEST = _object(
    ("run_id", "request_id", "executor_id", "payload", "response_type", "answer_schema"),
    run_id={"type": "string"},
    request_id={"type": "string"},
    executor_id={"type": "string"},
    payload=_ANY,
    response_type=_nullable("string"),
    answer_schema={"type": "object", "description": "The JSON schema the answer must fit."},
    deadline_at=_MAYBE_TIME,
    approvers={
        "type": "array",
        "items": {"type": "string"},
        "description": "Who may answer: user names, role:R, group:G (empty: any approver).",
    },
    four_eyes={"type": "boolean", "description": "Whether the run's starter may not answer."},
)

_CHECKPOINT = _object(
    ("checkpoint_id", "superstep", "status", "created_at", "kind"),
    checkpoint_id={"type": "string"},
    run_id={"type": "string"},
    superstep={"type": "integer"},
    status={"type": "string"},
    parent_checkpoint_id=_nullable("string"),
    created_at=_TIME,
    wake_at=_MAYBE_TIME,
    kind={
        "enum": ["start", "fork", "barrier", "progress", "migration"],
        "description": (
            "start: a new run's first; fork: a fork's first; barrier: a superstep's commit;"
            " progress: the last barrier saved again during the next superstep (saved steps,"
            " sub-workflow barriers); migration: rewritten for another version"
        ),
    },
)

_EVENT = _object(
    ("seq", "run_id", "superstep", "type", "at", "data"),
    seq={"type": "integer", "description": "Its place in the run's log: the SSE id."},
    run_id={"type": "string"},
    superstep={"type": "integer"},
    type={"type": "string", "description": "The event's kind: the SSE event name."},
    executor_id=_nullable("string"),
    at=_TIME,
    data={"type": "object"},
)

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _object(
        ("error",),
        error=_object(
            ("type", "message"),
            type={"type": "string"},
            message={"type": "string"},
            fields={
                "type": "array",
                "items": _object(
                    ("loc", "message"), loc={"type": "string"}, message={"type": "string"}
                ),
            },
        ),
    ),
    "Run": _RUN,
    "RunOnly": _object(("run",), run=_ref("Run")),
    "RunPage": _object(
        ("runs", "next_cursor"),
        runs={"type": "array", "items": _ref("Run")},
        next_cursor=_nullable("string"),
    ),
    "Graph": _GRAPH,
    "Workflow": _object(
        ("name", "version", "start", "input_schema", "graph"),
        name={"type": "string"},
        version={"type": "integer", "description": "The newest version served."},
        versions={"type": "array", "items": {"type": "integer"}},
        start={"type": "string"},
        input_schema={"type": "object"},
        graph=_ref("Graph"),
    ),
    "WorkflowList": _object(("workflows",), workflows={"type": "array", "items": _ref("Workflow")}),
    "Request": _REQUEST,
    "Me": _object(
        ("actor", "sign_in"),
        actor=_object(
            ("kind", "name", "label", "door", "role", "groups"),
            kind={"type": "string"},
            name={"type": "string"},
            label={"type": "string", "description": "How the record names it."},
            door={"type": "string"},
            role={"enum": ["viewer", "approver", "operator", "admin"]},
            groups={"type": "array", "items": {"type": "string"}},
        ),
        sign_in={"type": "boolean", "description": "Whether people sign in (and may sign out)."},
    ),
    "RequestList": _object(("requests",), requests={"type": "array", "items": _ref("Request")}),
    "RunDetail": _object(
        ("run", "outputs", "state", "pending_requests", "wake_at", "traceback", "graph"),
        run=_ref("Run"),
        outputs={"type": "array"},
        state={"type": "object"},
        pending_requests={"type": "array", "items": _ref("Request")},
        wake_at=_MAYBE_TIME,
        traceback=_nullable("string"),
        graph={"oneOf": [_ref("Graph"), {"type": "null"}]},
        detail=_nullable("string"),
        conversations={
            "type": "array",
            "description": "Its agents' conversations (state keys), a message per entry.",
            "items": _object(
                ("key", "agents", "messages"),
                key={"type": "string"},
                agents={"type": "array", "items": {"type": "string"}},
                messages={
                    "type": "array",
                    "items": _object(
                        ("role", "text", "tool_calls", "tool_results"),
                        role={"enum": ["user", "assistant", "system", "tool", "unknown"]},
                        text=_nullable("string"),
                        tool_calls={"type": "array", "items": {"type": "object"}},
                        tool_results={"type": "array", "items": {"type": "object"}},
                    ),
                },
            ),
        },
    ),
    "Checkpoint": _CHECKPOINT,
    "History": _object(
        ("run", "checkpoints", "forks"),
        run=_ref("Run"),
        checkpoints={"type": "array", "items": _ref("Checkpoint")},
        forks={"type": "array", "items": _ref("Run")},
    ),
    "Steered": _object(
        ("run",),
        run=_ref("Run"),
        outcome={"enum": ["paused", "requested"], "description": "pause: now, or at a barrier."},
        was_paused={"type": "boolean", "description": "unpause: false if a pause was withdrawn."},
    ),
    "Event": _EVENT,
    "EventStream": {
        "type": "string",
        "description": (
            "text/event-stream: per event `id: <seq>`, `event: <type>`, `data: <Event as JSON>`;"
            " a last `event: end` once the run has ended"
        ),
    },
    "StartRun": _object(
        ("workflow",),
        workflow={"type": "string"},
        version={"type": "integer", "minimum": 1, "description": "Default: the newest served."},
        input=_ANY,
        run_id={"type": "string", "pattern": "^[A-Za-z0-9._~:@+-]{1,200}$"},
    ),
    "Fork": _object(
        ("checkpoint_id",),
        checkpoint_id={"type": "string", "description": "Its id, or a prefix naming one."},
        state_patch={"type": "object"},
        run_id={"type": "string", "pattern": "^[A-Za-z0-9._~:@+-]{1,200}$"},
    ),
    "Resume": _object(checkpoint_id={"type": "string"}),
    "Answer": _object(("answer",), answer=_ANY),
    "DeadLetter": _object(
        ("message_id", "webhook_id", "endpoint_id", "run_id", "seq", "type", "attempts"),
        message_id={"type": "integer"},
        webhook_id={"type": "string", "description": "The same on every retry and re-send."},
        endpoint_id={"type": "string"},
        run_id={"type": "string"},
        seq={"type": "integer", "description": "The causing event's place in the run's log."},
        type={"type": "string", "description": "request.created, run.failed, ..."},
        state={"enum": ["dead"]},
        attempts={"type": "integer"},
        due_at=_TIME | {"description": "When it was last tried."},
        last_error=_nullable("string"),
    ),
    "DeadLetters": _object(("dead",), dead={"type": "array", "items": _ref("DeadLetter")}),
    "Resend": _object(
        message_ids={"type": "array", "items": {"type": "integer"}},
        all={"type": "boolean", "description": "Every dead letter (instead of message_ids)."},
    ),
    "Resent": _object(("resent",), resent={"type": "integer"}),
    "MakeLink": _object(
        ("for",),
        **{"for": {"type": "string", "description": "Who the link answers as."}},
        expires_in={"type": "number", "exclusiveMinimum": 0, "default": 86400},
        groups={"type": "array", "items": {"type": "string"}},
    ),
    "LinkMade": _object(
        ("link", "url"),
        link=_object(
            ("run_id", "request_id", "principal", "expires_at", "groups"),
            run_id={"type": "string"},
            request_id={"type": "string"},
            principal={"type": "string"},
            expires_at=_TIME,
            groups={"type": "array", "items": {"type": "string"}},
        ),
        url={"type": "string", "description": "GET shows the question, POST answers it."},
    ),
    "Message": _object(("message",), message=_ANY, target={"type": "string"}),
}

for _name in ("StartRun", "Fork", "Resume", "Answer", "Message", "Resend", "MakeLink"):
    SCHEMAS[_name]["additionalProperties"] = False

_REASONS = {
    400: "Bad input (the message says what; `fields` names each field at fault)",
    401: "No token, a wrong one, or a change authorized by the cookie alone",
    403: "The caller's role is below the route's (the message names the role needed)",
    404: "No such run, request or workflow",
    409: "A conflict: answered already, busy, paused, ended or existing",
    413: "The body is larger than the server's limit",
    415: "The body is not application/json",
    422: "An answer or input that does not fit its type (`fields` names each)",
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": endpoint.operation_id,
        "summary": endpoint.summary,
        "description": f"Needs the {endpoint.role.label} role.",
        "parameters": [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PATH_PARAMETER.findall(endpoint.path)
        ]
        + [
            {"name": p.name, "in": "query", "schema": p.schema, "description": p.description}
            for p in endpoint.query
        ],
    }
    if endpoint.stream:
        operation["parameters"].append(
            {
                "name": "Last-Event-ID",
                "in": "header",
                "schema": {"type": "string"},
                "description": "Resume after this event id (wins over ?after=).",
            }
        )
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": endpoint.body_required,
            "content": _json(_ref(endpoint.body)),
        }
    success: dict[str, Any] = {"description": "Done"}
    if endpoint.stream:
        success["content"] = {"text/event-stream": {"schema": _ref("EventStream")}}
    elif endpoint.response is not None:
        success["content"] = _json(_ref(endpoint.response))
    responses: dict[str, Any] = {str(endpoint.status): success}
    refused = {403} if endpoint.role > Role.VIEWER else set()
    for status in sorted({401, 413, *refused, *endpoint.errors}):
        responses[str(status)] = {"description": _REASONS[status], "content": _json(_ref("Error"))}
    operation["responses"] = responses
    return operation


def _page_paths() -> dict[str, Any]:
    html = {"description": "The page", "content": {"text/html": {"schema": {"type": "string"}}}}
    unauthorized = {"description": _REASONS[401], "content": _json(_ref("Error"))}
    return {
        "/": {
            "get": {
                "operationId": "page",
                "summary": "The web page (?token=T sets its cookie and redirects here)",
                "parameters": [{"name": "token", "in": "query", "schema": {"type": "string"}}],
                "responses": {
                    "200": html,
                    "303": {"description": "Signed in"},
                    "401": unauthorized,
                },
            }
        },
        "/static/{path}": {
            "get": {
                "operationId": "static",
                "summary": "The page's scripts and styles",
                "parameters": [
                    {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {"description": "The file"},
                    "401": unauthorized,
                    "404": {"description": "No such file", "content": _json(_ref("Error"))},
                },
            }
        },
        "/answer/{token}": _link_paths(),
        "/answer/static/{path}": {
            "get": {
                "operationId": "answer_link_static",
                "summary": "The page's scripts and styles, for an answer link's page (no token)",
                "security": [],
                "parameters": [
                    {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {"description": "The file"},
                    "404": {"description": "No such file", "content": _json(_ref("Error"))},
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "responses": {
                    "200": {"description": "OpenAPI 3.1", "content": _json({"type": "object"})},
                    "401": unauthorized,
                },
            }
        },
    }


def _link_paths() -> dict[str, Any]:
    """An answer link's routes: the link in the path is the credential (no token needed)."""
    token = {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}
    refused = {
        str(status): {"description": why, "content": _json(_ref("Error"))}
        for status, why in (
            (403, "Someone signed in as another person than the link's"),
            (404, "Not a link of this server (changed, or made elsewhere)"),
            (409, "Used already, or its request answered (who answered named)"),
            (410, "Expired"),
        )
    }
    return {
        "get": {
            "operationId": "answer_link",
            "summary": "An answer link's page; asked for JSON, the link and its request",
            "security": [],
            "parameters": [token],
            "responses": {
                "200": {
                    "description": "The page, or (Accept: application/json) the question",
                    "content": {
                        "text/html": {"schema": {"type": "string"}},
                        **_json(
                            _object(
                                ("link", "request"),
                                link=_ANY | {"type": "object"},
                                request=_ref("Request"),
                            )
                        ),
                    },
                },
                **refused,
            },
        },
        "post": {
            "operationId": "answer_by_link",
            "summary": "Answer the link's request, once, as its principal (door link)",
            "security": [],
            "parameters": [token],
            "requestBody": {"required": True, "content": _json(_ref("Answer"))},
            "responses": {
                "202": {
                    "description": "Answered",
                    "content": _json(
                        _object(
                            ("run", "answered_as"), run=_ref("Run"), answered_as={"type": "string"}
                        )
                    ),
                },
                "400": {"description": _REASONS[400], "content": _json(_ref("Error"))},
                "422": {"description": _REASONS[422], "content": _json(_ref("Error"))},
                **refused,
            },
        },
    }


def openapi_document(endpoints: Iterable[Endpoint]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of these endpoints, the page and this document."""
    paths: dict[str, Any] = _page_paths()
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "treadle",
            "version": version("treadle"),
            "description": (
                "Operate durable treadle runs: start, follow, steer and answer them. "
                "Every route needs the token `treadle serve` printed."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "treadle_token"},
            },
        },
        "security": [{"bearer": []}, {"cookie": []}],
    }
