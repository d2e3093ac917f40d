"""What a caller that only delivered to a paused run is told, for ``Workflow.respond``.

Whether a run pauses now or at its owner's next barrier is the store's
decision (``Store.pause``); so is unpausing, which can lease the run to the
caller in the same transaction (``treadle._workflow._actions.unpause_here``),
so that a ``Workflow.unpause`` (or a ``resume`` of a paused run) goes on
with it here before any timer service or worker could take it up. A caller
that only delivers to a paused run (``respond``) is told the run is paused,
in a result: its answer waits in the inbox, applied once the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._engine._result import RunResult, RunStatus
from treadle._workflow._runs import load_restored

if TYPE_CHECKING:
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow


async def stored_result(workflow: Workflow, store: Store, run_id: str) -> RunResult:
    """A run as its store has it now: its row's status, its latest checkpoint's contents.

    What a sender whose message was queued for a run driven elsewhere is
    told: the run goes on there, and this is where it stood.
    """
    row = await store.get_run(run_id)
    return await paused_result(workflow, store, run_id, RunStatus(row.status))


async def paused_result(
    workflow: Workflow, store: Store, run_id: str, status: RunStatus = RunStatus.PAUSED
) -> RunResult:
    """A paused run as its latest checkpoint has it, with status ``PAUSED``.

    What a caller that delivered to a paused run (``respond``) is told:
    its delivery waits in the run's inbox, so the request it answered is
    still among ``pending_requests`` until the run goes on.
    """
    restored = await load_restored(workflow, store, run_id, None)
    waits = restored.waits
    return RunResult(
        run_id=run_id,
        status=status,
        outputs=list(restored.outputs),
        state=dict(restored.state),
        superstep=restored.superstep,
        pending_requests=waits.pending_requests(),
        wake_at=waits.next_wake_at(),
        last_checkpoint_id=restored.checkpoint_id,
    )
