"""Pausing stored runs, and going on with paused ones, for ``Workflow``'s runner methods.

Whether a run pauses now or at its owner's next barrier is the store's
decision (``Store.pause``); so is unpausing, which can lease the run to the
caller in the same transaction, so that a ``Workflow.unpause`` (or a
``resume`` of a paused run) goes on with it here before any timer service
or worker could take it up. A caller that only delivers to a paused run
(``respond``) is told the run is paused, in a result: its answer waits in
the inbox, applied once the run goes on.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from treadle._checkpoints._ownership import Ownership, lease_duration, new_owner
from treadle._engine._result import RunResult, RunStatus
from treadle._exceptions import RunBusyError, RunPausedError
from treadle._workflow._runs import load_restored, take_over

if TYPE_CHECKING:
    from treadle._stores._store import Store
    from treadle._workflow._runs import TakenOver
    from treadle._workflow._workflow import Workflow


async def take_over_unpausing(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str | None = None,
    *,
    wait: bool = False,
) -> TakenOver:
    """:func:`take_over`, unpausing the run first if it is paused (``resume``).

    Raises:
        RunBusyError, RequestError, ...: as :func:`take_over_paused` and
            :func:`~treadle._workflow._runs.take_over`.
    """
    try:
        return await take_over(workflow, store, run_id, checkpoint_id, wait=wait)
    except RunPausedError:
        return await take_over_paused(workflow, store, run_id, checkpoint_id, wait=wait)


async def take_over_paused(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str | None = None,
    *,
    wait: bool = False,
) -> TakenOver:
    """Unpause a paused run, leased to this process as it is unpaused, and take it over.

    A pause asked of a run that has not paused yet, whose owner's lease ran
    out, is withdrawn, and the run taken over as ``resume`` would.

    Raises:
        RunBusyError: the run's owner holds a current lease (it has not
            paused yet; without ``wait``); with ``wait``, this waits until
            it lets go (pausing the run) instead.
        RequestError: the run has ended, or is neither paused nor asked to pause.
        RunNotFoundError: no such run.
    """
    duration = lease_duration(store)
    while True:
        try:
            unpaused = await store.unpause(run_id, owner=new_owner(), duration=duration)
        except RunBusyError as busy:
            if not wait:
                raise
            # Its owner pauses it with its next commit, or its lease runs out.
            await asyncio.sleep(min(max(busy.lease_until - time.time(), 0.01), 0.05))
            continue
        break
    if unpaused.lease is None:  # a pause asked was withdrawn: the run never stopped
        return await take_over(workflow, store, run_id, checkpoint_id, wait=wait)
    ownership = Ownership(store, unpaused.lease, duration)
    return await take_over(workflow, store, run_id, checkpoint_id, ownership=ownership)


async def paused_result(workflow: Workflow, store: Store, run_id: str) -> RunResult:
    """A paused run as its latest checkpoint has it, with status ``PAUSED``.

    What a caller that delivered to a paused run (``respond``) is told:
    its delivery waits in the run's inbox, so the request it answered is
    still among ``pending_requests`` until the run goes on.
    """
    restored = await load_restored(workflow, store, run_id, None)
    waits = restored.waits
    return RunResult(
        run_id=run_id,
        status=RunStatus.PAUSED,
        outputs=list(restored.outputs),
        state=dict(restored.state),
        superstep=restored.superstep,
        pending_requests=waits.pending_requests(),
        wake_at=waits.next_wake_at(),
        last_checkpoint_id=restored.checkpoint_id,
    )
