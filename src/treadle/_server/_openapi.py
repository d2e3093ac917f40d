"""The OpenAPI 3.1 document served at ``/openapi.json``, made from the route table.

Paths and operations come from the :class:`Endpoint` table itself, so the
document lists every route the router has; the shapes they take and give
are the component schemas of :mod:`treadle._server._openapi_schemas`.
"""

from __future__ import annotations

import re
from importlib.metadata import version
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._server._openapi_schemas import ANY, SCHEMAS, object_schema, ref
from treadle._values._actors import Role

if TYPE_CHECKING:
    from collections.abc import Iterable

    from treadle._server._endpoints import Endpoint

_PATH_PARAMETER = re.compile(r"{(\w+)}")


_REASONS = MappingProxyType(
    {
        400: "Bad input (the message says what; `fields` names each field at fault)",
        401: "No token, a wrong one, or a change authorized by the cookie alone",
        403: "The caller's role is below the route's (the message names the role needed)",
        404: "No such run, request or workflow",
        408: "The body did not arrive in the server's time (`--body-timeout`)",
        409: "A conflict: answered already, busy, paused, ended or existing",
        413: "The body is larger than the server's limit",
        415: "The body is not application/json",
        422: "An answer or input that does not fit its type (`fields` names each)",
    }
)


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
            "content": _json(ref(endpoint.body)),
        }
    success: dict[str, Any] = {"description": "Done"}
    if endpoint.stream:
        success["content"] = {"text/event-stream": {"schema": ref("EventStream")}}
    elif endpoint.response is not None:
        success["content"] = _json(ref(endpoint.response))
    responses: dict[str, Any] = {str(endpoint.status): success}
    refused = {403} if endpoint.role > Role.VIEWER else set()
    for status in sorted({401, 408, 413, *refused, *endpoint.errors}):
        responses[str(status)] = {"description": _REASONS[status], "content": _json(ref("Error"))}
    operation["responses"] = responses
    return operation


def _page_paths() -> dict[str, Any]:
    html = {"description": "The page", "content": {"text/html": {"schema": {"type": "string"}}}}
    unauthorized = {"description": _REASONS[401], "content": _json(ref("Error"))}
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
                    "404": {"description": "No such file", "content": _json(ref("Error"))},
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
                    "404": {"description": "No such file", "content": _json(ref("Error"))},
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
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics of this process and its store (docs/observing.md)",
                "responses": {
                    "200": {
                        "description": "Prometheus' text format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "401": unauthorized,
                },
            }
        },
    }


def _link_paths() -> dict[str, Any]:
    """An answer link's routes: the link in the path is the credential (no token needed)."""
    token = {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}
    refused = {
        str(status): {"description": why, "content": _json(ref("Error"))}
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
                            object_schema(
                                ("link", "request"),
                                link={**ANY, "type": "object"},
                                request=ref("Request"),
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
            "requestBody": {"required": True, "content": _json(ref("Answer"))},
            "responses": {
                "202": {
                    "description": "Answered",
                    "content": _json(
                        object_schema(
                            ("run", "answered_as"), run=ref("Run"), answered_as={"type": "string"}
                        )
                    ),
                },
                "400": {"description": _REASONS[400], "content": _json(ref("Error"))},
                "422": {"description": _REASONS[422], "content": _json(ref("Error"))},
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
