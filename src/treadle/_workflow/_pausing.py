"""What a caller that did not drive a run is told of it: where its store has it now.

A start that was deduplicated (``Workflow.run`` with a deduplication id),
a message queued for a run driven elsewhere and an answer to a paused run
all tell their caller where the run stands, read from its store.

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
from treadle._exceptions import TreadleError
from treadle._workflow._runs import load_restored

if TYPE_CHECKING:
    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow


async def stored_result(
    workflow: Workflow, store: Store, run_id: str, *, deduplicated: bool = False
) -> RunResult:
    """A run as its store has it now: its latest checkpoint's outputs and state, its row's status.

    A run with no checkpoint yet (queued, pending), or one this workflow
    cannot decode, is told by its row alone.
    """
    row = await store.get_run(run_id)
    status = RunStatus(row.status)
    if row.checkpoint_id is not None:
        try:
            restored = await load_restored(workflow, store, run_id, None)
        except TreadleError:
            pass  # told by its row: what the caller asked was whether it exists
        else:
            return restored_result(restored, run_id, status, deduplicated=deduplicated)
    return RunResult(
        run_id=run_id,
        status=status,
        outputs=[],
        state={},
        superstep=row.superstep,
        last_checkpoint_id=row.checkpoint_id,
        error=None,
        outcome=row.outcome,
        outcome_summary=row.outcome_summary,
        deduplicated=deduplicated,
    )


async def paused_result(workflow: Workflow, store: Store, run_id: str) -> RunResult:
    """A paused run as its latest checkpoint has it, with status ``PAUSED``.

    What a caller that delivered to a paused run (``respond``) is told:
    its delivery waits in the run's inbox, so the request it answered is
    still among ``pending_requests`` until the run goes on.
    """
    restored = await load_restored(workflow, store, run_id, None)
    return restored_result(restored, run_id, RunStatus.PAUSED)


def restored_result(
    restored: RestoredRun, run_id: str, status: RunStatus, *, deduplicated: bool = False
) -> RunResult:
    """The result a run read back from its checkpoint tells, with ``status``."""
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
        deduplicated=deduplicated,
    )
