"""Routes that steer a run: cancel, pause, unpause, resume.

Cancelling and pausing are decided by the store, wherever the run is
(this server, a worker, a ``treadle run``); unpausing lets the run go on
where runs go on (this server's timer service on SQLite, a worker on
PostgreSQL). Resuming takes the run over here and drives it in the
background, answering once it is taken (409 while another process owns it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._operations import _commands as commands
from treadle._operations._background import take_for_resume
from treadle._operations._shapes import run_json
from treadle._server._body import check_query, json_object, text_field
from treadle._server._endpoints import Endpoint, actor_of
from treadle._server._json import JsonResponse
from treadle._server._state import served_of
from treadle._values._actors import Role

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from treadle._server._endpoints import Handler
    from treadle._server._state import Served


async def _steered(request: Request) -> tuple[Served, str]:
    """The server and the run a body-less steering route names (its id, or a prefix of it).

    Raises:
        ApiError: a query parameter, or a body with a field, was given.
    """
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    await json_object(request, (), optional=True)
    return served, found.run_id


async def cancel_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/cancel``: cancel it wherever it is."""
    served, run_id = await _steered(request)
    await commands.cancel(served.store, run_id, actor=actor_of(request))
    return JsonResponse({"run": run_json(await served.store.get_run(run_id))})


async def pause_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/pause``: pause it now, or at its owner's next barrier."""
    served, run_id = await _steered(request)
    outcome, run = await commands.pause(served.store, run_id, actor=actor_of(request))
    return JsonResponse({"run": run_json(run), "outcome": outcome})


async def unpause_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/unpause``: let a paused run go on (a pause asked is withdrawn)."""
    served, run_id = await _steered(request)
    was_paused, run = await commands.unpause(served.store, run_id, actor=actor_of(request))
    return JsonResponse({"run": run_json(run), "was_paused": was_paused})


async def resume_run(request: Request) -> Response:
    """``POST /api/runs/{run_id}/resume``: go on from the latest checkpoint or ``checkpoint_id``."""
    served = served_of(request)
    check_query(request, ())
    found = await served.find_run(request.path_params["run_id"])
    body = await json_object(request, ("checkpoint_id",), optional=True)
    given = text_field(body, "checkpoint_id")
    workflow = served.workflow_of(found)
    checkpoint = await commands.resolve_checkpoint(served.store, found.run_id, given, None)
    drive_on = await take_for_resume(
        workflow,
        served.store,
        found.run_id,
        checkpoint,
        actor=actor_of(request),
        options=served.driver.run_options,
    )
    served.driver.spawn(found.run_id, drive_on)
    return JsonResponse(
        {"run": run_json(await served.store.get_run(found.run_id))}, status_code=202
    )


def _steer(verb: str, handler: Handler, summary: str, *, body: str | None = None) -> Endpoint:
    return Endpoint(
        "POST",
        f"/api/runs/{{run_id}}/{verb}",
        handler,
        summary,
        status=202 if verb == "resume" else 200,
        response="Steered",
        body=body,
        errors=(400, 404, 409, 415),
        role=Role.OPERATOR,
    )


ENDPOINTS = (
    _steer("cancel", cancel_run, "Cancel a run wherever it is (its last checkpoint stays)"),
    _steer("pause", pause_run, "Pause a run at a superstep boundary, with a checkpoint"),
    _steer("unpause", unpause_run, "Let a paused run go on (where runs go on: here or a worker)"),
    _steer(
        "resume",
        resume_run,
        "Continue a run here, from its latest checkpoint or an older one",
        body="Resume",
    ),
)
