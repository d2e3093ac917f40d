"""What the API shows of runs and workflows, as JSON-ready dicts.

A run's outputs, state and pending requests are in its latest checkpoint,
which only its workflow can decode: the server decodes runs of the
workflows it serves and, for any other, shows the run's row and says why
the rest is missing (``"detail"``) rather than failing. A failed run's
traceback is in its event log (the ``status_changed`` event that failed
it, or else the last ``executor_failed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._exceptions import TreadleError
from treadle._operations._conversations import conversations
from treadle._operations._limit_waits import limit_waits
from treadle._operations._schemas import describe_requests, input_schema
from treadle._operations._shapes import iso_time, request_json, run_json
from treadle._server._graphs import graph_json

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._server._state import Served
    from treadle._stores._store import EventLog, RunRecord
    from treadle._workflow._workflow import Workflow


def workflow_json(workflow: Workflow, versions: Sequence[int] = ()) -> dict[str, Any]:
    """A served workflow: its name, version, start executor, input schema and graph.

    ``versions``: every version of it served (default: its own).
    """
    return {
        "name": workflow.name,
        "version": workflow.version,
        "versions": list(versions or (workflow.version,)),
        "start": workflow.start_id,
        "input_schema": input_schema(workflow),
        "graph": graph_json(workflow),
    }


async def run_detail(served: Served, run: RunRecord) -> dict[str, Any]:
    """``GET /api/runs/{id}``: the row, what its checkpoint holds, its traceback, its graph."""
    detail: dict[str, Any] = {
        "run": run_json(run),
        "outputs": [],
        "state": {},
        "pending_requests": [],
        "wake_at": iso_time(run.wake_at),
        "traceback": await traceback_of(served.store, run),
        "graph": None,
        "detail": None,
        "conversations": [],
        "waiting_for": await limit_waits(served.store, run.run_id),
    }
    workflow = served.workflows.get(run.workflow, run.version)
    if workflow is None:
        detail["detail"] = (
            f"this server does not serve version {run.version} of workflow {run.workflow!r} "
            f"(it serves: {served.workflows.describe()}); its outputs, state and requests "
            f"are shown by a server started with its --app"
        )
        return detail
    detail["graph"] = graph_json(workflow)
    if run.checkpoint_id is None:  # queued for a worker: nothing committed yet
        return detail
    try:
        record = await served.store.load_checkpoint(run.run_id)
        restored = workflow.codec.decode(record, run_id=run.run_id)
    except TreadleError as error:  # a corrupt checkpoint, a type no longer allowed
        detail["detail"] = f"{type(error).__name__}: {error}"
        return detail
    detail |= {
        "outputs": list(restored.outputs),
        "state": dict(restored.state),
        "pending_requests": [
            request_json(request)
            for request in await describe_requests(
                workflow, served.store, run.run_id, restored.waits.pending_requests()
            )
        ],
        "wake_at": iso_time(restored.waits.next_wake_at()),
        "conversations": conversations(workflow, restored.state),
    }
    return detail


async def traceback_of(store: EventLog, run: RunRecord) -> str | None:
    """The traceback of what failed a failed run, from its event log (``None``: none kept)."""
    if run.status != "failed":
        return None
    events = await store.read_events(run.run_id)
    for event in reversed(events):
        if event.kind == "status_changed" and isinstance(event.data.get("traceback"), str):
            traceback: str = event.data["traceback"]
            return traceback
    for event in reversed(events):
        error = event.data.get("error") if event.kind == "executor_failed" else None
        if isinstance(error, dict) and isinstance(error.get("traceback"), str):
            found: str = error["traceback"]
            return found
    return None
