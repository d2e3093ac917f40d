"""Routes for the people a run waits on: workflows to start, requests to answer, messages.

An answer is checked strictly against the type its request asked for
before anything is stored (422 naming each field at fault), then
delivered to the run's inbox, where the store keeps the first answer to a
request: a later one, from this server, another, or ``treadle respond``,
gets 409 and changes nothing. The answer is durable when the response
says 202; the run goes on in the background (here on SQLite, on a worker
on PostgreSQL).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._exceptions import InvalidResponseError
from treadle._graph._input_policy import InputPolicy
from treadle._operations._background import deliver_answer, deliver_message
from treadle._operations._requests import ASKING, pending_requests
from treadle._operations._shapes import request_json, run_json
from treadle._server._body import (
    MAX_LIMIT,
    check_query,
    int_query,
    json_object,
    text_field,
    text_query,
)
from treadle._server._endpoints import Endpoint, Param, actor_of
from treadle._server._fields import fields_of
from treadle._server._json import ApiError, JsonResponse, json_response
from treadle._server._state import served_of
from treadle._server._views import workflow_json
from treadle._values._actors import Role
from treadle._workflow import _actions as door
from treadle._workflow._sessions import chosen_policy

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from treadle._stores._store import RunReads


async def list_workflows(request: Request) -> Response:
    """``GET /api/workflows``: the workflows this server serves."""
    served = served_of(request)
    check_query(request, ())
    chosen = list(served.workflows)  # the newest version of each
    hosted = served.workflows
    listed = [workflow_json(w, hosted.versions(w.name)) for w in chosen]
    return JsonResponse({"workflows": listed})


async def get_workflow(request: Request) -> Response:
    """``GET /api/workflows/{name}``: one served workflow."""
    served = served_of(request)
    check_query(request, ())
    found = served.workflow(request.path_params["name"])
    return JsonResponse(workflow_json(found, served.workflows.versions(found.name)))


async def list_requests(request: Request) -> Response:
    """``GET /api/requests``: the caller's inbox, newest run first.

    Only the requests the caller may answer (its identity against each
    request's approvers and four eyes), as the door that takes answers decides.
    """
    served = served_of(request)
    actor = actor_of(request)
    check_query(request, ("workflow", "limit"))
    limit = int_query(request, "limit", 100, low=1, high=MAX_LIMIT)
    wanted = text_query(request, "workflow")
    names = [served.workflow(wanted).name] if wanted is not None else list(served.workflows.names())
    # One workflow at a time: only runs of served workflows are read (nothing is imported).
    found: list[dict[str, Any]] = []
    for name in names:
        found += await pending_requests(
            served.store, workflow=name, limit=limit, workflows=served.workflows, actor=actor
        )
    if len(names) > 1:
        order = await _newest_first(served.store)
        found.sort(key=lambda r: order.get(r["run_id"], len(order)))
    return await json_response({"requests": [request_json(r) for r in found[:limit]]})


async def _newest_first(store: RunReads) -> dict[str, int]:
    """Runs that may have requests pending, by their place in a newest-first listing."""
    runs = [run for status in ASKING for run in await store.list_runs(status=status)]
    runs.sort(key=lambda r: (r.updated_at, r.run_id), reverse=True)
    return {run.run_id: place for place, run in enumerate(runs)}


async def answer_request(request: Request) -> Response:
    """``POST /api/runs/{run_id}/requests/{request_id}``: answer a pending request."""
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    body = await json_object(request, ("answer",))
    if "answer" not in body:
        raise ApiError(400, "answer: required", fields=[{"loc": "answer", "message": "required"}])
    workflow = served.workflow_of(found)
    request_id = request.path_params["request_id"]
    try:
        drive_on = await deliver_answer(
            workflow,
            served.store,
            found.run_id,
            request_id,
            body["answer"],
            take=served.driver.runs_here,
            actor=actor_of(request),
            options=served.driver.run_options,
        )
    except InvalidResponseError as error:
        message = str(error)
        raise ApiError(
            422, message, kind="InvalidResponseError", fields=fields_of(message)
        ) from None
    if drive_on is not None:
        served.driver.spawn(found.run_id, drive_on)
    run = await served.store.get_run(found.run_id)
    return JsonResponse({"run": run_json(run)}, status_code=202)


async def send_message(request: Request) -> Response:
    """``POST /api/runs/{run_id}/messages``: the next message of a session.

    ``policy`` (``"enqueue"``, ``"debounce:2.5"``, ...) chooses how it meets
    a running turn, on a workflow whose own input policy is not ``reject``.
    """
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    body = await json_object(request, ("message", "target", "policy"))
    if "message" not in body:
        raise ApiError(400, "message: required", fields=[{"loc": "message", "message": "required"}])
    target = text_field(body, "target")
    workflow = served.workflow_of(found)
    policy = _policy_field(body, workflow)
    actor = actor_of(request)
    if served.driver.runs_here:
        drive_on = await deliver_message(
            workflow,
            served.store,
            found.run_id,
            body["message"],
            target,
            actor=actor,
            options=served.driver.run_options,
            policy=policy,
        )
        if drive_on is not None:
            served.driver.spawn(found.run_id, drive_on)
    else:  # decided here as anywhere; the workers, which drive the runs, take it from there
        held = await door.send(
            served.store,
            found.run_id,
            body["message"],
            actor=actor,
            workflow=workflow,
            target=target,
            policy=policy,
        )
        if held is not None:
            await held.close()
    run = await served.store.get_run(found.run_id)
    return JsonResponse({"run": run_json(run)}, status_code=202)


def _policy_field(body: dict[str, Any], workflow: Any) -> InputPolicy | None:
    """The body's ``policy``, read and checked against the workflow (``None``: absent).

    Raises:
        ApiError: 400 it names no policy, or the workflow lets no sender choose.
    """
    text = text_field(body, "policy")
    if text is None:
        return None
    try:
        policy = InputPolicy.parse(text)
        chosen_policy(workflow, policy)
    except ValueError as error:
        raise ApiError(
            400, f"policy: {error}", fields=[{"loc": "policy", "message": str(error)}]
        ) from None
    return policy


ENDPOINTS = (
    Endpoint(
        "GET",
        "/api/workflows",
        list_workflows,
        "The workflows this server serves",
        response="WorkflowList",
    ),
    Endpoint(
        "GET",
        "/api/workflows/{name}",
        get_workflow,
        "One workflow this server serves",
        response="Workflow",
        errors=(400, 404),
    ),
    Endpoint(
        "GET",
        "/api/requests",
        list_requests,
        "Requests pending across runs, each with its answer's JSON schema",
        response="RequestList",
        query=(
            Param("workflow", {"type": "string"}, "Only requests of runs of this workflow."),
            Param(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100},
                "At most this many requests.",
            ),
        ),
        errors=(400, 404),
    ),
    Endpoint(
        "POST",
        "/api/runs/{run_id}/requests/{request_id}",
        answer_request,
        "Answer a pending request (checked strictly; the first answer wins)",
        status=202,
        response="RunOnly",
        body="Answer",
        body_required=True,
        errors=(400, 404, 409, 415, 422),
        role=Role.APPROVER,
    ),
    Endpoint(
        "POST",
        "/api/runs/{run_id}/messages",
        send_message,
        "Send the next message of a session to a run waiting for input",
        status=202,
        response="RunOnly",
        body="Message",
        body_required=True,
        errors=(400, 404, 409, 415),
        role=Role.OPERATOR,
    ),
)
