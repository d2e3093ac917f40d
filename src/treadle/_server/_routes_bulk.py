"""``POST /api/bulk``: one action on every run a filter keeps, as the caller.

The action is :mod:`treadle._operations._bulk`'s: the caller's right to it
is checked first (403 naming the role it needs), each run's action goes
through the one door and is recorded with the caller, and ``dry_run`` only
counts. The answer says how many runs matched, how many were acted on, and
which were skipped and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._operations._bulk import NO_ANSWER, BulkAction, run_bulk
from treadle._operations._search import run_filter
from treadle._server._body import check_query, json_object, optional_field, text_field
from treadle._server._endpoints import Endpoint, actor_of
from treadle._server._json import ApiError, JsonResponse
from treadle._server._state import served_of
from treadle._values._actors import Role
from treadle._values._filter import MAX_LENGTH

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

_FIELDS = ("action", "where", "dry_run", "rate", "executor", "answer")


async def bulk_runs(request: Request) -> Response:
    """``POST /api/bulk``: cancel, pause, unpause, resume, respond or delete by filter."""
    served = served_of(request)
    check_query(request, ())
    body = await json_object(request, _FIELDS)
    action = text_field(body, "action", required=True)
    where = text_field(body, "where", required=True, longest=MAX_LENGTH)  # as GET /api/runs takes
    executor = text_field(body, "executor")
    dry_run = optional_field(body, "dry_run", default=False)
    if not isinstance(dry_run, bool):
        raise ApiError(400, "dry_run: must be true or false")
    rate = optional_field(body, "rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)):
        raise ApiError(400, "rate: must be a number of runs a second")
    found = run_filter(where)
    assert action is not None  # noqa: S101 - required above
    assert found is not None  # noqa: S101 - where was required above
    try:
        bulk = BulkAction(
            action,
            found,
            dry_run=dry_run,
            rate=rate,
            executor=executor,
            answer=body.get("answer", NO_ANSWER),
        )
    except ValueError as error:
        raise ApiError(400, str(error)) from None
    report = await run_bulk(
        served.store,
        bulk,
        actor=actor_of(request),
        workflow_of=lambda run: served.workflows.get(run.workflow, run.version or None),
    )
    return JsonResponse(report.as_json())


ENDPOINTS = (
    Endpoint(
        "POST",
        "/api/bulk",
        bulk_runs,
        "Cancel, pause, unpause, resume, respond to or delete every run a filter keeps",
        response="BulkReport",
        body="Bulk",
        body_required=True,
        errors=(400, 403, 415),
        role=Role.OPERATOR,
    ),
)
