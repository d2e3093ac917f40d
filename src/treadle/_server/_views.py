"""What the API shows of runs and workflows, as JSON-ready dicts.

A run's outputs, state and pending requests are in its latest checkpoint,
which only its workflow can decode: the server decodes runs of the
workflows it serves and, for any other, shows the run's row and says why
the rest is missing (``"detail"``) rather than failing. A failed run's
traceback is in its event log (the ``status_changed`` event that failed
it, or else the last ``executor_failed``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from treadle._exceptions import TreadleError
from treadle._operations._schemas import describe_request, input_schema
from treadle._server._graphs import graph_json
from treadle._server._json import iso_time, run_json, with_iso_times

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._server._state import Served
    from treadle._stores._store import CheckpointInfo, RunRecord, Store
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


def checkpoint_json(info: CheckpointInfo, kind: str) -> dict[str, Any]:
    """A checkpoint as ``history`` lists it (times in ISO 8601), with its ``kind``."""
    row = {field.name: getattr(info, field.name) for field in dataclasses.fields(info)}
    return with_iso_times(row, ("created_at", "wake_at")) | {"kind": kind}


def checkpoint_kinds(run: RunRecord, checkpoints: Sequence[CheckpointInfo]) -> list[str]:
    """What each of a run's checkpoints is, told from the links between them.

    A run may keep several checkpoints of one superstep, and they are not
    copies: ``"start"`` is a new run's first; ``"fork"`` a fork's first
    (its parent is in the run it branched from); ``"barrier"`` the commit
    of a superstep (one more than its parent's); ``"progress"`` the last
    barrier saved again while the next superstep runs, with the saved steps
    (an agent's model requests and tool calls) or sub-workflow barriers it
    made so far, so its superstep is its parent's; ``"migration"`` a
    resting run's checkpoint rewritten for another version (``treadle
    migrate``), its superstep also its parent's. A checkpoint whose parent
    retention has dropped is taken for a barrier.
    """
    by_id = {c.checkpoint_id: c for c in checkpoints}
    kinds = []
    for checkpoint in checkpoints:
        parent = by_id.get(checkpoint.parent_checkpoint_id or "")
        if checkpoint.parent_checkpoint_id is None:
            kinds.append("start")
        elif parent is None and checkpoint.parent_checkpoint_id == run.parent_checkpoint_id:
            kinds.append("fork")
        elif parent is not None and parent.superstep == checkpoint.superstep:
            kinds.append("progress" if checkpoint.status == "running" else "migration")
        else:
            kinds.append("barrier")
    return kinds


def request_json(request: dict[str, Any]) -> dict[str, Any]:
    """A ``<request>`` as the API gives it: its deadline in ISO 8601."""
    return with_iso_times(request, ("deadline_at",))


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
            request_json(describe_request(workflow, run.run_id, request))
            for request in restored.waits.pending_requests()
        ],
        "wake_at": iso_time(restored.waits.next_wake_at()),
    }
    return detail


async def traceback_of(store: Store, run: RunRecord) -> str | None:
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
