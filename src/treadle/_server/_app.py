"""The server's application: its routes, its lifespan, and how errors are answered.

:func:`create_app` loads the workflows it serves at once (an ``--app``
that does not load is refused before anything is opened or bound) and
returns a Starlette application whose every route is behind the access
guard (:mod:`treadle._server._auth`). Its lifespan opens the store, starts the
:class:`Driver` (on SQLite, the file's timer service and the runs the API
starts) and the webhook sender (:mod:`treadle._operations._webhooks`, a task
of the lifespan's own TaskGroup: a server alone delivers the store's
outbox), and on shutdown stops the sender, detaches the runs it drives and
closes the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Route

from treadle._exceptions import AppLoadError, CommandError, TreadleError
from treadle._operations._inputs import DEFINITION_SUFFIXES, load_workflow, open_store
from treadle._operations._prometheus import PrometheusMetrics
from treadle._operations._webhooks import sending
from treadle._scaleout._apps import load_app
from treadle._server import (
    _oidc,
    _page,
    _routes_bulk,
    _routes_control,
    _routes_links,
    _routes_metrics,
    _routes_requests,
    _routes_runs,
    _routes_schedules,
    _routes_webhooks,
    _sse,
)
from treadle._server._auth import AccessGuard
from treadle._server._driver import Driver
from treadle._server._endpoints import routes
from treadle._server._identity import Sessions
from treadle._server._json import ApiError, JsonResponse, Redactor, error_body, status_of
from treadle._server._openapi import openapi_document
from treadle._server._principals import Principals
from treadle._server._sse import let_go
from treadle._server._state import Served
from treadle._workflow._versions import Hosted

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from starlette.requests import Request

    from treadle._server._endpoints import Endpoint
    from treadle._server._settings import ServerSettings
    from treadle._workflow._workflow import Workflow

logger = logging.getLogger("treadle.server")

ENDPOINTS: tuple[Endpoint, ...] = (
    *_routes_requests.ENDPOINTS[:2],  # workflows first, as the document reads best
    *_routes_runs.ENDPOINTS,
    *_routes_bulk.ENDPOINTS,
    *_routes_control.ENDPOINTS,
    *_routes_schedules.ENDPOINTS,
    *_routes_requests.ENDPOINTS[2:],
    *_sse.ENDPOINTS,
    *_oidc.ENDPOINTS,
    *_routes_webhooks.ENDPOINTS,
    *_routes_links.ENDPOINTS,
)
"""Every route of the JSON API."""


def load_workflows(apps: Sequence[str]) -> list[Workflow]:
    """The workflows ``--app`` names: every one a module or file holds (every version), or one.

    Read as ``treadle worker`` reads ``--app`` (:func:`load_app`); a
    definition file holds one workflow.

    Raises:
        CommandError: One does not load.
    """
    found: list[Workflow] = []
    for spec in apps:
        try:
            if spec.endswith(DEFINITION_SUFFIXES):
                found.append(load_workflow(spec))
            else:
                found += load_app(spec)
        except AppLoadError as error:
            raise CommandError(str(error)) from error
    return found


def load_definitions(files: Sequence[str]) -> tuple[list[Workflow], list[str]]:
    """The workflows of a folder's definition files, and the problems of those that do not load.

    A folder is served as a whole: one bad file there (a typo, a hostile
    upload) is reported and left out rather than keeping every other
    workflow of the folder offline.
    """
    found: list[Workflow] = []
    problems: list[str] = []
    for file in files:
        try:
            found.append(load_workflow(file))
        except CommandError as error:
            cause = error.__cause__
            problems += getattr(cause, "problems", None) or [f"{file}: {error}"]
    return found, problems


def create_app(settings: ServerSettings, workflows: Sequence[Workflow] | None = None) -> Starlette:
    """The server's ASGI application.

    The problems of definition files left out are kept as
    ``app.state.left_out`` (``treadle serve`` prints them).

    Args:
        settings: What it serves and how.
        workflows: The workflows to serve (default: those ``settings.apps``
            and ``settings.definitions`` name).

    Raises:
        CommandError: An app does not load, two workflows share a name, or
            nothing at all is left to serve.
    """
    left_out: list[str] = []
    if workflows is None:
        defined, left_out = load_definitions(settings.definitions)
        workflows = [*load_workflows(settings.apps), *defined]
        if not workflows and left_out:
            raise CommandError("no workflow to serve:\n" + "\n".join(left_out))
    try:
        served_workflows = Hosted(workflows)
    except ValueError as error:
        raise CommandError(str(error)) from error
    redactor = Redactor.of(settings.token, settings.store)
    document = openapi_document(ENDPOINTS)
    sign_in = settings.sign_in
    sessions = Sessions(
        sign_in.secret if sign_in else None,
        sign_in.session_seconds if sign_in else 43200.0,
        sign_in,
    )
    principals = Principals(token=settings.token, sign_in=sign_in, sessions=sessions)
    signing_routes = (
        []
        if sign_in is None
        else _oidc.Provider(sign_in, sessions, sign_in.secret or secrets.token_urlsafe(32)).routes()
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store = open_store(settings.store, create=True)
        exposed = PrometheusMetrics(store, served_workflows)
        runs = served_workflows.all()
        try:
            async with (
                Driver(store, runs, settings.poll_interval, exposed.metrics) as driver,
                asyncio.TaskGroup() as group,
                sending(store, group, settings.poll_interval, exposed.metrics),
            ):
                app.state.served = Served(
                    settings, store, served_workflows, driver, redactor, exposed
                )
                yield
        finally:
            exposed.close()
            await store.close()

    async def openapi(request: Request) -> Response:  # noqa: ARG001 - a route
        return JsonResponse(document)

    async def answer_error(request: Request, error: Exception) -> Response:  # noqa: ARG001
        return _error_response(error, redactor)

    app = Starlette(
        routes=[
            *routes(ENDPOINTS),
            Route("/openapi.json", openapi, methods=["GET"]),
            *_page.routes(),
            *_routes_links.routes(),
            *_routes_metrics.routes(),
            *signing_routes,
        ],
        middleware=[
            Middleware(
                AccessGuard,
                principals=principals,
                max_body=settings.max_body,
                body_seconds=settings.body_seconds,
            )
        ],
        lifespan=lifespan,
        exception_handlers={
            HTTPException: answer_error,
            ApiError: answer_error,  # refusals: answered here, not logged as failures
            TreadleError: answer_error,
            ClientDisconnect: answer_error,  # it left: answered here, logged as no failure
            Exception: answer_error,  # a bug: answered 500, and logged
        },
    )
    app.state.token = settings.token
    app.state.sign_in = sign_in
    app.state.workflows = served_workflows
    app.state.left_out = tuple(left_out)
    return app


def _error_response(error: Exception, redactor: Redactor) -> Response:
    """Any error as the one error shape, its secrets hidden (500: logged, never detailed)."""
    if isinstance(error, HTTPException):
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(error.status_code, "HTTPError")
        message = "no such route" if error.status_code == 404 else str(error.detail)  # noqa: PLR2004
        return JsonResponse(
            error_body(kind, message), status_code=error.status_code, headers=error.headers
        )
    if isinstance(error, ClientDisconnect):  # it left before its request was read: not a bug
        logger.info("a client left before its request was read; nothing was done")
        return Response(status_code=499)  # nobody reads it (nginx's "client closed request")
    if let_go(error):  # an event stream's client read nothing: the connection is closed
        logger.info("an event stream was let go: its client read nothing for --send-timeout")
        return Response(status_code=499)  # the stream's answer had begun: nothing is sent
    status = status_of(error)
    if status == 500:  # noqa: PLR2004 - a bug: the log has it, the client gets no details
        logger.error("unexpected error", exc_info=error)
        return JsonResponse(
            error_body("InternalError", "the server failed; its log says why"), status_code=500
        )
    fields = getattr(error, "fields", None)
    headers: dict[str, Any] = getattr(error, "headers", None) or {}
    kind = getattr(error, "kind", None) or type(error).__name__
    return JsonResponse(
        error_body(kind, redactor(str(error)), fields), status_code=status, headers=headers
    )
