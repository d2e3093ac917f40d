"""Routes over runs: start, list, get, history, fork, delete.

Each is a thin adapter over the commands layer (:mod:`treadle._operations`):
it reads the request (:mod:`treadle._server._body`), names the run
(:meth:`Served.find_run`), calls the operation and answers with JSON.
Errors are raised, and answered by the app's handlers in the one error shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from treadle._engine._result import RunStatus
from treadle._exceptions import CommandError
from treadle._operations import _commands as commands
from treadle._operations._background import open_new
from treadle._operations._cleanup import delete_run
from treadle._operations._inputs import coerce_input
from treadle._operations._limit_waits import listed_run, waits_by_run
from treadle._operations._shapes import history_json, page_json, run_json, runs_page
from treadle._operations._starting import StartChoice
from treadle._server._body import (
    MAX_LIMIT,
    check_query,
    choice_query,
    decode_cursor,
    int_query,
    json_object,
    optional_field,
    text_field,
    text_query,
    version_field,
)
from treadle._server._endpoints import Endpoint, Param, actor_of
from treadle._server._fields import fields_of
from treadle._server._json import ApiError, JsonResponse, json_response
from treadle._server._state import served_of
from treadle._server._views import run_detail
from treadle._values._actors import Role
from treadle._values._ids import RUN_ID_RULE, checked_run_id, new_run_id
from treadle._values._schedules import tick_run_id_refusal
from treadle._workflow._history import fork_on_its_version

if TYPE_CHECKING:
    from starlette.requests import Request

    from treadle._scaleout._client import Client
    from treadle._server._state import Served
    from treadle._values._actors import Actor
    from treadle._workflow._workflow import Workflow

_STATUSES = tuple(status.value for status in RunStatus)


def typed_input(workflow: Workflow, value: Any) -> Any:
    """The JSON input made the type the start executor takes.

    Raises:
        ApiError: 422 it fits none of them (each field at fault named).
    """
    try:
        return coerce_input(workflow, value)
    except CommandError as error:
        message = str(error)
        raise ApiError(422, message, kind="InvalidInputError", fields=fields_of(message)) from None


def chosen_run_id(body: dict[str, Any]) -> str | None:
    """The ``run_id`` a body asks a new run to have, if any.

    Raises:
        ApiError: 400 it is not 1 to 200 of letters, digits and ``. _ ~ : @ + -``.
    """
    run_id = text_field(body, "run_id")
    if run_id is not None:
        try:
            checked_run_id(run_id)
        except ValueError:
            message = f"must be {RUN_ID_RULE}"
            fields = [{"loc": "run_id", "message": message}]
            raise ApiError(400, f"run_id: {message}", fields=fields) from None
        refusal = tick_run_id_refusal(run_id)  # the API is never a schedule
        if refusal is not None:
            fields = [{"loc": "run_id", "message": refusal}]
            raise ApiError(400, f"run_id: {refusal}", fields=fields)
    return run_id


async def start_run(request: Request) -> Response:
    """``POST /api/runs``: start a run; it goes on in the background."""
    served = served_of(request)
    check_query(request, ())
    body = await json_object(
        request, ("workflow", "version", "input", "run_id", "deduplication_id", "start_policy")
    )
    name = text_field(body, "workflow", required=True)
    assert name is not None  # noqa: S101 - required above
    workflow = served.workflow(name, version_field(body))
    choice = start_choice(body)
    try:
        policy = choice.policy(workflow.start_policy)
    except CommandError as error:
        raise ApiError(400, f"start_policy: {error}") from None
    gated = choice.given or not workflow.start_policy.is_empty
    run_id = chosen_run_id(body) or new_run_id()
    value = typed_input(workflow, body.get("input"))
    try:
        if served.driver.runs_here:
            started, drive_on = await open_new(
                workflow,
                value,
                served.store,
                run_id,
                actor=actor_of(request),
                options=served.driver.run_options,
                leases=served.driver.leases,
                policy=(policy or workflow.start_policy) if gated else None,
                dedup_id=choice.dedup_id,
            )
            if drive_on is not None:
                served.driver.spawn(started, drive_on)
        else:
            started = await _client(served, actor_of(request)).start(
                workflow,
                value,
                run_id=run_id,
                start_policy=policy,
                deduplication_id=choice.dedup_id,
            )
    except (TypeError, ValueError) as error:  # no handler for the value's type; no key for it
        raise ApiError(422, str(error), kind="InvalidInputError") from None
    run = await served.store.get_run(started)
    joined = started != run_id
    return JsonResponse(
        {"run": run_json(run), "joined": joined},
        status_code=200 if joined else 201,
        headers={"Location": f"/api/runs/{started}"},
    )


def start_choice(body: dict[str, Any]) -> StartChoice:
    """What a start's body asks of the workflow's start policy.

    Raises:
        ApiError: 400 a field of ``start_policy`` is not valid (named).
    """
    dedup_id = text_field(body, "deduplication_id")
    given = body.get("start_policy", {})
    if not isinstance(given, dict):
        raise ApiError(400, "start_policy: must be an object")
    unknown = sorted(set(given) - {"key", "singleton", "concurrency", "when_busy", "debounce"})
    if unknown:
        raise ApiError(400, f"start_policy: unknown fields {', '.join(unknown)}")
    key, singleton = given.get("key"), given.get("singleton", False)
    if key is not None and not isinstance(key, str):
        raise ApiError(400, f"start_policy: key must be a string, got {key!r}")
    if not isinstance(singleton, bool):
        raise ApiError(400, f"start_policy: singleton must be true or false, got {singleton!r}")
    return StartChoice(
        dedup_id,
        key,
        singleton,
        given.get("concurrency"),
        given.get("when_busy"),
        given.get("debounce"),
    )


def _client(served: Served, actor: Actor) -> Client:
    """A client of the workers' queue (PostgreSQL), encoding with the served workflows."""
    from treadle._scaleout._client import Client  # noqa: PLC0415 - PostgreSQL only

    return Client(served.store, served.workflows.all(), actor=actor)  # type: ignore[arg-type]


async def list_runs(request: Request) -> Response:
    """``GET /api/runs``: runs newest first, a page at a time."""
    served = served_of(request)
    check_query(request, ("status", "workflow", "limit", "cursor", "outcome", "where"))
    status = choice_query(request, "status", _STATUSES)
    limit = int_query(request, "limit", 50, low=1, high=MAX_LIMIT)
    cursor = text_query(request, "cursor")
    before = decode_cursor(cursor) if cursor is not None else None
    workflow = text_query(request, "workflow")
    outcome = text_query(request, "outcome")
    where = text_query(request, "where")
    rows, next_cursor = await runs_page(
        served.store,
        status=status,
        workflow=workflow,
        limit=limit,
        before=before,
        outcome=outcome,
        where=where,
    )
    waiting = await waits_by_run(served.store, rows)
    return await json_response(page_json(rows, next_cursor, shown=listed_run(waiting)))


async def get_run(request: Request) -> Response:
    """``GET /api/runs/{run_id}``: a run, what it holds, its traceback and its graph."""
    served = served_of(request)
    check_query(request, ())
    run = await served.find_run(request.path_params["run_id"])
    return await json_response(await run_detail(served, run))  # a run's values: any size


async def run_history(request: Request) -> Response:
    """``GET /api/runs/{run_id}/history``: its checkpoints, oldest first, and its forks."""
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    return await json_response(history_json(*await commands.history(served.store, found.run_id)))


async def fork_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/fork``: branch a new run from a checkpoint, its state patched."""
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    body = await json_object(request, ("checkpoint_id", "state_patch", "run_id"))
    given = text_field(body, "checkpoint_id", required=True)
    patch = optional_field(body, "state_patch")
    if patch is not None and not isinstance(patch, dict):
        message = "must be an object of state key: new value"
        raise ApiError(
            400, f"state_patch: {message}", fields=[{"loc": "state_patch", "message": message}]
        )
    new_id = chosen_run_id(body)
    workflow = served.workflow_of(found)
    checkpoint = await commands.resolve_checkpoint(served.store, found.run_id, given, None)
    assert checkpoint is not None  # noqa: S101 - given above
    forked = await fork_on_its_version(
        workflow,
        lambda: served.workflows.others(workflow),
        found.run_id,
        checkpoint,
        patch,
        new_run_id=new_id,
        store=served.store,
        actor=actor_of(request),
    )
    run = await served.store.get_run(forked)
    return JsonResponse(
        {"run": run_json(run)}, status_code=201, headers={"Location": f"/api/runs/{forked}"}
    )


async def delete_one(request: Request) -> Response:
    """``DELETE /api/runs/{run_id}``: delete a run (refused while a live process owns it)."""
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    await delete_run(served.store, found.run_id, actor=actor_of(request))
    return Response(status_code=204)


_RUN_PATH = "/api/runs/{run_id}"

ENDPOINTS = (
    Endpoint(
        "GET",
        "/api/runs",
        list_runs,
        "List runs, newest first, a page at a time",
        response="RunPage",
        query=(
            Param("status", {"type": "string", "enum": _STATUSES}, "Only runs with this status."),
            Param("workflow", {"type": "string"}, "Only runs of this workflow."),
            Param(
                "outcome",
                {"type": "string"},
                "Only runs with this named outcome (approved, rejected, ...).",
            ),
            Param(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 50},
                "At most this many runs.",
            ),
            Param("cursor", {"type": "string"}, "Where the last page left off (its next_cursor)."),
            Param(
                "where",
                {"type": "string", "maxLength": 2000},
                'A filter of runs (docs/search.md), e.g. fields.customer == "42".',
            ),
        ),
    ),
    Endpoint(
        "POST",
        "/api/runs",
        start_run,
        "Start a run (it goes on in the background)",
        status=201,
        response="StartedRun",
        body="StartRun",
        body_required=True,
        errors=(400, 404, 409, 415, 422),
        role=Role.OPERATOR,
    ),
    Endpoint(
        "GET",
        _RUN_PATH,
        get_run,
        "A run: its row, outputs, state, pending requests, traceback and graph",
        response="RunDetail",
        errors=(400, 404),
    ),
    Endpoint(
        "DELETE",
        _RUN_PATH,
        delete_one,
        "Delete a run",
        status=204,
        errors=(400, 404, 409),
        role=Role.ADMIN,
    ),
    Endpoint(
        "GET",
        f"{_RUN_PATH}/history",
        run_history,
        "A run's checkpoints (oldest first) and its forks",
        response="History",
        errors=(400, 404),
    ),
    Endpoint(
        "POST",
        f"{_RUN_PATH}/fork",
        fork_run,
        "Branch a new run from a checkpoint, its state patched",
        status=201,
        response="RunOnly",
        body="Fork",
        body_required=True,
        errors=(400, 404, 409, 415),
        role=Role.OPERATOR,
    ),
)
