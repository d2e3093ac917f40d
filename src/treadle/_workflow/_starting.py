"""Starting a run under a start policy: the store decides, then the run is driven or waits.

``Workflow.run`` comes here when the workflow has a start policy (or the
start has a deduplication id): the start is decided once by the store
(:mod:`treadle._stores._starts`, through the door of
:mod:`treadle._workflow._actions`), and then

* a run admitted at once was leased to this caller in that decision: it is
  driven here, as any run (its first checkpoint turns the admitted row into
  the run);
* a queued or debounced run is left to whoever serves the store, and the
  caller is told so (a ``QUEUED`` result, with the run's id);
* a deduplicated start is told the first run, as its store has it now.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from treadle._checkpoints._ownership import Ownership, lease_duration, new_owner
from treadle._engine._result import RunResult, RunStatus
from treadle._values._ids import new_run_id
from treadle._workflow import _actions as door
from treadle._workflow._pausing import stored_result

if TYPE_CHECKING:
    from treadle._values._actors import Actor
    from treadle._workflow._launch import Launch
    from treadle._workflow._start_policy import StartPolicy
    from treadle._workflow._workflow import Workflow


async def admit_start(
    workflow: Workflow,
    launch: Launch,
    policy: StartPolicy,
    dedup_id: str | None,
    actor: Actor,
) -> Launch | RunResult:
    """Have the store decide ``launch``'s start; the launch to drive, or what the caller is told.

    Raises:
        StartRefusedError: No room, and the policy refuses.
        ValueError: No store to decide, ``state=`` given, or the key cannot be computed.
    """
    store = launch.store if launch.store is not None else workflow.store
    if store is None:
        msg = (
            f"workflow {workflow.name!r} starts under a start policy or a deduplication id, "
            f"which a store decides: give it a store (MemoryStore() for one process), or "
            f"start_policy=StartPolicy() to start without one"
        )
        raise ValueError(msg)
    if launch.state is not None:
        msg = (
            "state= cannot go with a start policy or a deduplication id: a run that waits "
            "its turn starts later from its input alone"
        )
        raise ValueError(msg)
    options = launch.options
    clock = options.clock if options.clock is not None else workflow.defaults.clock
    timeout = options.timeout_seconds
    run_id = launch.run_id or new_run_id()
    request = policy.request(
        launch.message,
        run_id=run_id,
        workflow=workflow.name,
        version=workflow.version,
        payload=workflow.serializer.dumps(launch.message),
        dedup_id=dedup_id,
        deadline_at=None if timeout is None else time.time() + timeout,
        started_by=actor.encode(),
        at=clock.now(),
    )
    duration = lease_duration(store)
    admission = await door.admit(store, request, actor=actor, owner=new_owner(), duration=duration)
    if admission.lease is not None:
        ownership = Ownership(store, admission.lease, duration)
        # Who started it was recorded with the decision: the first checkpoint records nobody.
        return launch._replace(run_id=run_id, store=store, ownership=ownership, started_by=None)
    if admission.outcome == "deduplicated":
        return await stored_result(workflow, store, admission.run_id, deduplicated=True)
    return RunResult(
        run_id=admission.run_id,
        status=RunStatus(admission.status),
        outputs=[],
        state={},
        superstep=0,
    )
