"""Routes of schedules: list, create, show, change, pause, unpause, trigger, backfill, delete.

Each change goes through the one door (:class:`~treadle.Schedules`) as the
request's actor, who the store records with it. A trigger or a backfill
records its ticks and answers; their runs start where runs go on (this
server's timer service on SQLite, a worker on PostgreSQL, which this
server queues them for at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._operations._schedules import (
    parse_moment,
    schedule_from_fields,
    schedule_json,
    schedules_of,
    tick_json,
    update_schedule,
)
from treadle._server._body import check_query, json_object, optional_field, text_field
from treadle._server._endpoints import Endpoint, Param, actor_of
from treadle._server._json import ApiError, JsonResponse
from treadle._server._state import served_of
from treadle._values._actors import Role

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from treadle._server._endpoints import Handler
    from treadle._workflow._schedule_actions import Schedules

FIELDS = (
    "id", "workflow", "cron", "every", "tz", "input", "overlap", "catchup", "jitter", "version",
    "paused",
)  # fmt: skip
CHANGED = ("cron", "every", "tz", "input", "overlap", "catchup", "jitter", "version")
_MOST_TICKS = 500


def _schedules(request: Request) -> Schedules:
    return schedules_of(served_of(request).store, actor_of(request))


def _count(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    if not text.isdigit() or not 0 < int(text) <= _MOST_TICKS:
        raise ApiError(400, f"{name} must be a whole number from 1 to {_MOST_TICKS}")
    return int(text)


async def list_schedules(request: Request) -> Response:
    """``GET /api/schedules``: every schedule, with its next time."""
    check_query(request, ())
    infos = await _schedules(request).list()
    return JsonResponse({"schedules": [schedule_json(info, next_count=1) for info in infos]})


async def create_schedule(request: Request) -> Response:
    """``POST /api/schedules``: create a schedule (201 with it)."""
    check_query(request, ())
    body = await json_object(request, FIELDS)
    paused = body.pop("paused", False)
    if not isinstance(paused, bool):
        raise ApiError(400, "paused must be true or false")
    info = await _schedules(request).create(schedule_from_fields(body), paused=paused)
    return JsonResponse({"schedule": schedule_json(info)}, status_code=201)


async def show_schedule(request: Request) -> Response:
    """``GET /api/schedules/{schedule_id}``: it, its next times and recent ticks with their runs."""
    check_query(request, ("next", "ticks"))
    schedules = _schedules(request)
    schedule_id = request.path_params["schedule_id"]
    info = await schedules.get(schedule_id)
    recent = await schedules.ticks(schedule_id, limit=_count(request, "ticks", 20))
    data: dict[str, Any] = schedule_json(info, next_count=_count(request, "next", 5))
    data["ticks"] = [tick_json(tick, info.schedule) for tick in recent]
    return JsonResponse({"schedule": data})


async def update_schedule_route(request: Request) -> Response:
    """``PATCH /api/schedules/{schedule_id}``: change the fields given; the rest stay."""
    check_query(request, ())
    body = await json_object(request, CHANGED)
    info = await update_schedule(_schedules(request), request.path_params["schedule_id"], body)
    return JsonResponse({"schedule": schedule_json(info)})


async def pause_schedule(request: Request) -> Response:
    """``POST /api/schedules/{schedule_id}/pause``: hold its ticks (``note``: why)."""
    check_query(request, ())
    body = await json_object(request, ("note",), optional=True)
    info = await _schedules(request).pause(
        request.path_params["schedule_id"], text_field(body, "note")
    )
    return JsonResponse({"schedule": schedule_json(info)})


async def unpause_schedule(request: Request) -> Response:
    """``POST /api/schedules/{schedule_id}/unpause``: tick again from its next time."""
    check_query(request, ())
    await json_object(request, (), optional=True)
    info = await _schedules(request).unpause(request.path_params["schedule_id"])
    return JsonResponse({"schedule": schedule_json(info)})


async def trigger_schedule(request: Request) -> Response:
    """``POST /api/schedules/{schedule_id}/trigger``: start a run now (202 with its id)."""
    check_query(request, ())
    await json_object(request, (), optional=True)
    run_id = await _schedules(request).trigger(request.path_params["schedule_id"])
    return JsonResponse({"run_id": run_id}, status_code=202)


async def backfill_schedule(request: Request) -> Response:
    """``POST /api/schedules/{schedule_id}/backfill``: start the ticks of a past range."""
    check_query(request, ())
    body = await json_object(request, ("start", "end", "dry_run"))
    start = parse_moment(text_field(body, "start", required=True) or "", "start")
    end = parse_moment(text_field(body, "end", required=True) or "", "end")
    dry_run = optional_field(body, "dry_run", default=False)
    if not isinstance(dry_run, bool):
        raise ApiError(400, "dry_run must be true or false")
    try:
        done = await _schedules(request).backfill(
            request.path_params["schedule_id"], start, end, dry_run=dry_run
        )
    except (ValueError, OverflowError) as refused:  # the range: backwards, ahead, too long
        raise ApiError(400, str(refused)) from None
    return JsonResponse(
        {
            "ticks": [t.isoformat() for t in done.ticks],
            "run_ids": list(done.run_ids),
            "started": [t.isoformat() for t in done.recorded],
            "dry_run": dry_run,
        },
        status_code=200 if dry_run else 202,
    )


async def delete_schedule(request: Request) -> Response:
    """``DELETE /api/schedules/{schedule_id}``: delete it and its ticks' record (not its runs)."""
    check_query(request, ())
    schedule_id = request.path_params["schedule_id"]
    await _schedules(request).delete(schedule_id)
    return JsonResponse({"deleted": schedule_id})


def _act(
    verb: str, handler: Handler, summary: str, response: str = "ScheduleOne", **extra: Any
) -> Endpoint:
    return Endpoint(
        "POST",
        f"/api/schedules/{{schedule_id}}/{verb}",
        handler,
        summary,
        response=response,
        errors=(400, 403, 404, 415),
        role=Role.OPERATOR,
        **extra,
    )


ENDPOINTS = (
    Endpoint(
        "GET", "/api/schedules", list_schedules, "List the schedules", response="ScheduleList"
    ),
    Endpoint(
        "POST",
        "/api/schedules",
        create_schedule,
        "Create a schedule",
        status=201,
        response="ScheduleOne",
        body="ScheduleCreate",
        body_required=True,
        errors=(400, 403, 409, 415),
        role=Role.OPERATOR,
    ),
    Endpoint(
        "GET",
        "/api/schedules/{schedule_id}",
        show_schedule,
        "A schedule, its next times and its recent ticks with their runs",
        response="ScheduleOne",
        query=(
            Param("next", {"type": "integer"}, "How many next times (default 5)."),
            Param("ticks", {"type": "integer"}, "How many recent ticks (default 20)."),
        ),
        errors=(400, 404),
    ),
    Endpoint(
        "PATCH",
        "/api/schedules/{schedule_id}",
        update_schedule_route,
        "Change a schedule (the fields given; new times apply from now on)",
        response="ScheduleOne",
        body="ScheduleUpdate",
        body_required=True,
        errors=(400, 403, 404, 415),
        role=Role.OPERATOR,
    ),
    _act("pause", pause_schedule, "Pause a schedule", body="SchedulePause"),
    _act("unpause", unpause_schedule, "Unpause a schedule"),
    _act(
        "trigger",
        trigger_schedule,
        "Start a run of a schedule now",
        response="ScheduleTriggered",
        status=202,
    ),
    _act(
        "backfill",
        backfill_schedule,
        "Start (or, dry_run, list) the ticks of a past range",
        response="ScheduleBackfilled",
        status=202,
        body="ScheduleBackfill",
        body_required=True,
    ),
    Endpoint(
        "DELETE",
        "/api/schedules/{schedule_id}",
        delete_schedule,
        "Delete a schedule (its runs stay)",
        response="ScheduleDeleted",
        errors=(400, 403, 404),
        role=Role.OPERATOR,
    ),
)
