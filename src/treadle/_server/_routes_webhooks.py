"""Routes for webhooks' dead letters: list them, and send them again.

A message its endpoint did not take within the endpoint's attempts stays
in the store's outbox as a dead letter (:mod:`treadle._stores._outbox`);
these routes are the API's (and the page's) ``treadle webhooks dead`` and
``treadle webhooks resend``. Both are an admin's: a dead letter holds a
run's event, whatever workflow it is of, and sending it again reaches
outside the server.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from treadle._operations._webhooks import message_json, outbox_of
from treadle._server._body import MAX_LIMIT, check_query, int_query, json_object, optional_field
from treadle._server._endpoints import Endpoint, Param
from treadle._server._json import ApiError, JsonResponse
from treadle._server._state import served_of
from treadle._values._actors import Role

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response


async def list_dead(request: Request) -> Response:
    """``GET /api/webhooks/dead``: the dead letters, oldest first."""
    served = served_of(request)
    check_query(request, ("limit",))
    limit = int_query(request, "limit", 100, low=1, high=MAX_LIMIT)
    found = await outbox_of(served.store).messages("dead", limit)
    return JsonResponse({"dead": [message_json(m) for m in found]})


async def resend_dead(request: Request) -> Response:
    """``POST /api/webhooks/dead/resend``: send dead letters again, from now on.

    The body names them (``{"message_ids": [3, 4]}``) or asks for every one
    (``{"all": true}``), not both; their ``webhook-id`` stays as it was.
    """
    served = served_of(request)
    check_query(request, ())
    body = await json_object(request, ("message_ids", "all"))
    chosen = _chosen(body)
    count = await outbox_of(served.store).resend(chosen, time.time())
    return JsonResponse({"resent": count})


def _chosen(body: dict[str, Any]) -> list[int] | None:
    """The dead letters a resend names (``None``: all of them).

    Raises:
        ApiError: Neither or both of ``message_ids`` and ``all``, or ids that are not integers.
    """
    ids = optional_field(body, "message_ids")
    every = optional_field(body, "all", default=False)
    if not isinstance(every, bool):
        raise ApiError(
            400, "all: must be true or false", fields=[{"loc": "all", "message": "not a boolean"}]
        )
    if (ids is None) == (not every):
        raise ApiError(400, "name dead letters by message_ids, or give all: true (not both)")
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(type(i) is int for i in ids):
        raise ApiError(
            400,
            "message_ids: must be a list of integers (the dead letters' message_id)",
            fields=[{"loc": "message_ids", "message": "not a list of integers"}],
        )
    return ids


ENDPOINTS = (
    Endpoint(
        "GET",
        "/api/webhooks/dead",
        list_dead,
        "Webhook messages their endpoint did not take within its attempts (dead letters)",
        response="DeadLetters",
        query=(
            Param(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100},
                "At most this many dead letters.",
            ),
        ),
        role=Role.ADMIN,
    ),
    Endpoint(
        "POST",
        "/api/webhooks/dead/resend",
        resend_dead,
        "Send dead letters again, with their webhook-id unchanged",
        response="Resent",
        body="Resend",
        body_required=True,
        errors=(400, 415),
        role=Role.ADMIN,
    ),
)
