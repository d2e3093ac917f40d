"""The API's route table: each route once, with what the OpenAPI document says of it.

Routes are declared as :class:`Endpoint` values, not decorated functions,
so that one table makes the router's routes (:func:`routes`), the
OpenAPI document (:mod:`treadle._server._openapi`) and the tests that
every route refuses a request without the token, and one without the
route's role: a route cannot be added to one and forgotten in the others.

Each route declares the narrowest role that may call it (DESIGN §17:
viewer reads, approver answers, operator starts and steers runs, admin
deletes); the router answers anyone below it 403, naming the role needed,
before the handler runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.routing import Route

from treadle._server._json import ApiError
from treadle._values._actors import Actor, Role

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from starlette.requests import Request
    from starlette.responses import Response

    Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter, as the OpenAPI document describes it.

    Attributes:
        name: Its name.
        schema: Its JSON schema.
        description: What it does.
    """

    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One route of the API.

    Attributes:
        method: ``GET``, ``POST``, ``PATCH`` or ``DELETE``.
        path: Its path, with ``{name}`` parameters (as Starlette and OpenAPI write them).
        handler: The coroutine answering it.
        summary: One line for the OpenAPI document.
        status: The status of a success.
        response: The component schema of a success's body (``None``: no body).
        body: The component schema of the request body (``None``: it takes none).
        body_required: Whether the body must be given.
        query: Its query parameters.
        errors: The error statuses it may answer with, besides 401 and 413.
        stream: It answers with Server-Sent Events, not JSON.
        role: The narrowest role that may call it.
    """

    method: str
    path: str
    handler: Handler
    summary: str
    status: int = 200
    response: str | None = None
    body: str | None = None
    body_required: bool = False
    query: tuple[Param, ...] = ()
    errors: tuple[int, ...] = (400,)
    stream: bool = False
    role: Role = Role.VIEWER

    @property
    def operation_id(self) -> str:
        """Its OpenAPI ``operationId``: the handler's name."""
        return self.handler.__name__.strip("_")


def routes(endpoints: Iterable[Endpoint]) -> list[Route]:
    """The router's routes: one per path, taking every method the endpoints of that path have.

    One route per path, not per endpoint: the router answers a method a
    path does not take with 405 and the ``Allow`` header of the first route
    whose path matched, so two routes of one path (``GET`` and ``DELETE``
    ``/api/runs/{run_id}``) would each hide the other's method.
    """
    by_path: dict[str, dict[str, Handler]] = {}
    for endpoint in endpoints:
        by_path.setdefault(endpoint.path, {})[endpoint.method] = _guarded(endpoint)
    return [
        Route(path, _dispatch(handlers), methods=list(handlers))
        for path, handlers in by_path.items()
    ]


def actor_of(request: Request) -> Actor:
    """Who sent the request, as the access guard (:mod:`treadle._server._auth`) found."""
    actor: Actor = request.state.actor
    return actor


def refusal_of(actor: Actor, endpoint: Endpoint) -> str | None:
    """Why ``actor`` may not call ``endpoint`` (naming who may), or ``None``."""
    if actor.may(endpoint.role):
        return None
    labels = [role.label for role in Role if role >= endpoint.role]
    who = labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} or {labels[-1]}"
    return (
        f"{actor.label} is a {actor.role.label}: {endpoint.method} {endpoint.path} "
        f"needs the {endpoint.role.label} role (only an {who} may)"
    )


def _guarded(endpoint: Endpoint) -> Handler:
    """The endpoint's handler, refusing with 403 whoever lacks its role."""
    handler = endpoint.handler

    async def guarded(request: Request) -> Response:
        refusal = refusal_of(actor_of(request), endpoint)
        if refusal is not None:
            raise ApiError(403, refusal, kind="Forbidden")
        return await handler(request)

    return guarded


def _dispatch(handlers: dict[str, Handler]) -> Handler:
    """One handler answering each method with its endpoint's (``HEAD`` as ``GET``)."""

    async def endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return endpoint
