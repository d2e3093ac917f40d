"""``treadle show``'s view of one run: its row and what its latest checkpoint holds.

Read with the run's own code where it loads (its state, its requests with
the schemas of their answers); else from its event log, which holds its
outputs and requests as plain data; a queued run has neither yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._exceptions import CommandError
from treadle._operations._commands import get_run, uncommitted, workflow_of
from treadle._operations._conversations import conversations
from treadle._operations._limit_waits import limit_waits
from treadle._operations._schemas import answered_in_inbox, describe_requests
from treadle._workflow._logged import logged_outputs_and_requests

if TYPE_CHECKING:
    from treadle._stores._store import RunRecord, Store
    from treadle._workflow._workflow import Workflow


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything ``treadle show`` displays about one run."""

    run: RunRecord
    outputs: list[Any] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    pending_requests: list[dict[str, Any]] = field(default_factory=list)
    wake_at: float | None = None
    detail: str | None = None
    """Set when the run's code does not load here: why, and that the log was read instead."""
    conversations: list[dict[str, Any]] = field(default_factory=list)
    """Its agents' conversations as transcripts (``_operations._conversations``)."""
    waiting_for: list[dict[str, Any]] = field(default_factory=list)
    """Its calls waiting for slots of call limits (``_operations._limit_waits``)."""


async def show_run(store: Store, run_id: str, app: str | None) -> RunView:
    """A run's row plus what its latest checkpoint holds (if its workflow loads)."""
    run = await get_run(store, run_id)
    run_id = run.run_id
    try:
        workflow = await _committed_workflow(store, run, app)
    except CommandError as error:  # its outputs and requests are plain data in its log
        outputs, pending = await logged_outputs_and_requests(store, run)
        detail = f"{error}; outputs and requests are read from its event log, its state is not"
        answered = await answered_in_inbox(store, run_id) if pending else set()
        requests = [
            {
                "run_id": run_id,
                "request_id": r.request_id,
                "executor_id": r.executor_id,
                "payload": r.payload,
                "response_type": r.response_type,
                "answer_schema": None,
                "deadline_at": None,
                "answered": r.request_id in answered,
            }
            for r in pending
        ]
        return RunView(
            run=run,
            outputs=outputs,
            pending_requests=requests,
            detail=detail,
            waiting_for=await limit_waits(store, run_id),
        )
    record = await store.load_checkpoint(run_id)
    restored = workflow.codec.decode(record, run_id=run_id)
    return RunView(
        waiting_for=await limit_waits(store, run_id),
        run=run,
        outputs=restored.outputs,
        state=restored.state,
        pending_requests=await describe_requests(
            workflow, store, run_id, restored.waits.pending_requests()
        ),
        wake_at=restored.waits.next_wake_at(),
        conversations=conversations(workflow, restored.state),
    )


async def _committed_workflow(store: Store, run: RunRecord, app: str | None) -> Workflow:
    """The workflow to read the run's checkpoint with; refused while it has none (queued).

    Raises:
        CommandError: the run is queued, or its workflow does not load.
    """
    if run.checkpoint_id is None:  # nothing committed to read, whatever code is given
        raise CommandError(uncommitted(run))
    return await workflow_of(store, run.run_id, app)
