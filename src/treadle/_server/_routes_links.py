"""Answer links' routes: ``GET /answer/<token>`` shows the question, ``POST`` answers it once.

A link made by ``treadle links create`` (:mod:`treadle._operations._links`)
is its own credential: whoever holds it may answer its one request, once,
as its principal, before it expires; so the access guard lets these paths
through without a token (:mod:`treadle._server._auth`), keeping as
``request.state.actor`` whoever is signed in, if anyone. Someone signed in
as another person than the link's is refused it.

``GET`` answers the page's document (``page/answer.html``, whose script
shows the question with the page's answer form) or, asked for JSON
(``Accept: application/json``), the link and its request. ``POST`` takes
``{"answer": ...}`` and answers through the one door as an actor of kind
``link`` named after the principal, door ``link``. A refused link is
answered with nothing changed: 404 tampered or unknown, 410 expired, 409
used already or its request answered (naming who answered), 403 another
person's.

An admin makes a link through the API too (``POST
/api/runs/{run_id}/requests/{request_id}/links``), as ``treadle links
create`` does.
"""

from __future__ import annotations

from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from treadle._exceptions import InvalidResponseError, LinkRefusedError
from treadle._operations._background import deliver_answer
from treadle._operations._links import (
    answer_by_link,
    create_link,
    link_actor,
    link_question,
    open_link,
    pending_request,
)
from treadle._operations._shapes import iso_time, run_json
from treadle._server._body import check_query, json_object, optional_field, text_field
from treadle._server._endpoints import Endpoint, actor_of
from treadle._server._fields import fields_of
from treadle._server._json import ApiError, JsonResponse, json_response
from treadle._server._page import _HEADERS as PAGE_HEADERS
from treadle._server._page import PAGE_DIR
from treadle._server._state import served_of
from treadle._stores._tokens import SERVER_TOKEN_NAME
from treadle._values._actors import Role, names_problem
from treadle._values._durations import LONGEST_SECONDS

if TYPE_CHECKING:
    from typing import Any

    from starlette.requests import Request
    from starlette.responses import Response

    from treadle._stores._answer_links import AnswerLink

PREFIX = "/answer/"
"""Where answer links point; the access guard admits these paths without a token."""

_STATUSES = MappingProxyType(
    {"invalid": 404, "expired": 410, "used": 409, "answered": 409, "not_yours": 403}
)


def routes() -> list[BaseRoute]:
    """``GET`` and ``POST /answer/{token}``, and the page's files for it under ``/answer/static``.

    The files are the page's own (:mod:`treadle._server._page`), served here
    too because whoever opens a link may hold no token for ``/static``.
    """
    return [
        Mount(
            PREFIX + "static", app=StaticFiles(directory=PAGE_DIR / "static"), name="link_static"
        ),
        Route(PREFIX + "{token}", _answer, methods=["GET", "HEAD", "POST"], name="answer"),
    ]


def signed_in(request: Request) -> str | None:
    """The person signed in where a link is opened (``None``: nobody, or the server's token)."""
    actor = getattr(request.state, "actor", None)
    if actor is None or (actor.kind == "token" and actor.name == SERVER_TOKEN_NAME):
        return None
    name: str = actor.name
    return name


async def _answer(request: Request) -> Response:
    try:
        if request.method == "POST":
            return await _post(request)
        if "application/json" in request.headers.get("accept", ""):
            return await _show(request)
        return HTMLResponse(_document(), headers=PAGE_HEADERS)
    except LinkRefusedError as error:
        raise ApiError(_STATUSES[error.reason], str(error), kind="LinkRefusedError") from None


async def _show(request: Request) -> Response:
    """The link and the request it answers, as JSON (the page's script asks for it)."""
    served = served_of(request)
    check_query(request, ())
    link = await open_link(served.store, request.path_params["token"], signed_in=signed_in(request))
    run = await served.find_run(link.run_id)
    question = await link_question(served.store, link, served.workflow_of(run))
    return await json_response({"link": _link_json(link), "request": question})


async def _post(request: Request) -> Response:
    """Answer the link's request, once, as its principal (door ``link``)."""
    served = served_of(request)
    check_query(request, ())
    # The link is the only credential here: a body is read only for a link that could
    # be used, so nobody without one can make the server hold bodies (up to --max-body
    # each, on every connection they open).
    await open_link(served.store, request.path_params["token"], signed_in=signed_in(request))
    body = await json_object(request, ("answer",))
    if "answer" not in body:
        raise ApiError(400, "answer: required", fields=[{"loc": "answer", "message": "required"}])
    taken: list[Any] = []

    async def deliver(link: AnswerLink, value: object) -> None:
        run = await served.find_run(link.run_id)
        taken.append(
            await deliver_answer(
                served.workflow_of(run),
                served.store,
                link.run_id,
                link.request_id,
                value,
                take=served.driver.runs_here,
                actor=link_actor(link),
                options=served.driver.run_options,
            )
        )

    try:
        link = await answer_by_link(
            served.store,
            request.path_params["token"],
            body["answer"],
            deliver,
            signed_in=signed_in(request),
        )
    except InvalidResponseError as error:
        message = str(error)
        raise ApiError(
            422, message, kind="InvalidResponseError", fields=fields_of(message)
        ) from None
    if taken and taken[0] is not None:
        served.driver.spawn(link.run_id, taken[0])
    run = await served.store.get_run(link.run_id)
    return JsonResponse({"run": run_json(run), "answered_as": link.principal}, status_code=202)


async def make_link(request: Request) -> Response:
    """``POST /api/runs/{run_id}/requests/{request_id}/links``: a link for a person (an admin's).

    The body: ``{"for": NAME, "expires_in": SECONDS, "groups": [G, ...]}``
    (a day unless ``expires_in`` says otherwise). The request must be
    waiting. Answers the link and its address on this server.
    """
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    body = await json_object(request, ("for", "expires_in", "groups"))
    principal = text_field(body, "for", required=True)
    lifetime = optional_field(body, "expires_in", default=86400)
    groups = optional_field(body, "groups", default=[])
    if (
        isinstance(lifetime, bool)
        or not isinstance(lifetime, int | float)
        or not 0 < lifetime <= LONGEST_SECONDS  # NaN, infinity and 10**400 fail this too
    ):
        raise ApiError(
            400,
            "expires_in: seconds, above 0, at most a hundred years",
            fields=[_field("expires_in")],
        )
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        raise ApiError(400, "groups: a list of group names", fields=[_field("groups")])
    problem = names_problem(principal, groups)
    if problem is not None:
        raise ApiError(400, problem, fields=[_field(problem.partition(":")[0])])
    request_id = request.path_params["request_id"]
    await pending_request(served.store, served.workflow_of(found), found.run_id, request_id)
    token, link = await create_link(
        served.store,
        found.run_id,
        request_id,
        principal or "",
        expires_in=float(lifetime),
        created_by=actor_of(request).label,
        groups=groups,
    )
    path = PREFIX + token
    url = str(request.base_url).rstrip("/") + path
    return JsonResponse({"link": _link_json(link), "url": url}, status_code=201)


def _field(name: str) -> dict[str, str]:
    return {"loc": name, "message": "not valid"}


def _link_json(link: AnswerLink) -> dict[str, Any]:
    return {
        "run_id": link.run_id,
        "request_id": link.request_id,
        "principal": link.principal,
        "expires_at": iso_time(link.expires_at),
        "groups": list(link.groups),
    }


ENDPOINTS = (
    Endpoint(
        "POST",
        "/api/runs/{run_id}/requests/{request_id}/links",
        make_link,
        "Make a signed single-use link answering a pending request as one person",
        status=201,
        response="LinkMade",
        body="MakeLink",
        body_required=True,
        errors=(400, 404, 415),
        role=Role.ADMIN,
    ),
)
"""The API's route for answer links (the links' own routes are :func:`routes`)."""


@cache
def _document() -> str:
    return (PAGE_DIR / "answer.html").read_text(encoding="utf-8")
