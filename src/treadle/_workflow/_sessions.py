"""What a session's driver does once its loop stops: roll a turn back, or take what came late.

A run's loop takes session messages as their policies say
(``_engine/_inputs.py``), with two things left to whoever drives it:

- **A rollback.** The loop stops at the boundary where it met the
  message; the driver takes the run over again from the checkpoint where
  the running turn began (the newest checkpoint, up its lineage, at which
  the session rested waiting for input), delivering the message there,
  unless a driver that took the run while its lease was free applied the
  message first.
  The next checkpoint names that one as its parent: the run's history
  branches, and the abandoned turn's checkpoints stay in it.
- **A message that came as the run came to rest.** The loop looks at the
  inbox before its resting commit; a message the store took between that
  look and the commit would wait for a timer service. The driver looks
  once more after the lease is given up, and if something is there takes
  the run over again (or leaves it to whoever took it first).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from treadle._checkpoints._session_inbox import SessionInbox
from treadle._engine._result import RunStatus
from treadle._exceptions import RunBusyError, RunPausedError, SessionBusyError
from treadle._graph._input_policy import InputPolicy, policy_of_kind
from treadle._workflow._launch import Launch
from treadle._workflow._runs import acquire, load_restored, take_over

logger = logging.getLogger("treadle.runtime")

if TYPE_CHECKING:
    from treadle._checkpoints._ownership import Ownership
    from treadle._engine._inputs import QueuedInput
    from treadle._engine._opening import DrivenRun
    from treadle._stores._store import Store
    from treadle._workflow._runs import TakenOver
    from treadle._workflow._workflow import Workflow


async def next_launch(workflow: Workflow, loop: DrivenRun, launch: Launch) -> Launch | None:
    """How the run goes on here after its loop stopped (``None``: it does not, here)."""
    feed = loop.env.inputs
    store = launch.store if launch.store is not None else workflow.store
    if not isinstance(feed, SessionInbox) or store is None:
        return None
    run_id = loop.env.run_id
    rollback = feed.rollback
    try:
        if rollback is not None:
            branched = await _branched(workflow, store, run_id, rollback)
            if branched is None:
                return None
            taken, at_turn_start = branched
            if at_turn_start:
                taken.ownership.consumed = rollback.seq  # applied with the branch's first commit
                return Launch(
                    # Numbered by the message: the same again if the branch is made again.
                    restored=dataclasses.replace(taken.restored, branch=rollback.seq),
                    store=launch.store,
                    options=launch.options,
                    inputs=((rollback.message, rollback.target),),
                    ownership=taken.ownership,
                )
        elif not loop.status.is_resting:
            return None
        else:
            # Only a message that came after the loop's last look: one it saw and left waits
            # for a rest it can be taken at (the run rests on a request now), and taking the
            # run up again for it would rest at once, again and again, for ever.
            came = [item for item in await store.inbox(run_id) if item.seq > feed.seen]
            if not any(policy_of_kind(item.kind) for item in came):
                return None
            taken = await take_over(workflow, store, run_id)
    except (RunBusyError, RunPausedError):
        return None  # another process drives it now, and takes what waits
    return Launch(
        restored=taken.restored,
        store=launch.store,
        options=launch.options,
        answers=taken.answers,
        inputs=taken.inputs,
        ownership=taken.ownership,
        expired=taken.expired,
    )


async def taken_after_sending(
    workflow: Workflow, store: Store, run_id: str, ownership: Ownership | None, *, wait: bool
) -> TakenOver | None:
    """The run a sender goes on with, taken over (``None``: it is driven elsewhere).

    ``ownership``: the lease the sender holds already (``reject``, or a
    policy's sender that found the run free). Otherwise the process driving
    the run takes the message; with ``wait`` the sender waits until it
    lets go and takes over what is left (a paused run: ``None``).
    """
    if ownership is not None:
        return await take_over(workflow, store, run_id, ownership=ownership)
    if not wait:
        return None
    try:
        return await take_over(workflow, store, run_id, wait=True)
    except RunPausedError:
        return None


async def _branched(
    workflow: Workflow, store: Store, run_id: str, rollback: QueuedInput
) -> tuple[TakenOver, bool] | None:
    """The run taken back at the checkpoint where its turn began, to deliver ``rollback`` there.

    The loop gave the lease up when it stopped, and a driver that took the
    run meanwhile met the same message in its inbox and may have applied
    it: once the lease is back, the message must still wait there, and
    where the turn began is looked for only then. ``None``: another driver
    applied it (the run is where that driver left it, with any later
    message taken too). ``False`` with the run: it never rested on input,
    so there is no turn to go back to; the message is refused on the
    record, and the run goes on where it is (it was left in the inbox, and
    every owner of the run stopped on it, for ever).

    Raises:
        RunBusyError: another process drives the run now.
    """
    from treadle._exceptions import CheckpointNotFoundError  # noqa: PLC0415 - rare

    ownership = await acquire(workflow, store, run_id)
    try:
        if all(item.seq != rollback.seq for item in await store.inbox(run_id)):
            await ownership.close()
            return None
        try:
            started = await turn_start(workflow, store, run_id)
        except CheckpointNotFoundError:
            await ownership.refuse_inbox([(rollback.seq, NO_TURN_TO_ROLL_BACK)])
            logger.warning(
                "run %s: inbox item %d refused: %s", run_id, rollback.seq, NO_TURN_TO_ROLL_BACK
            )
            return await take_over(workflow, store, run_id, ownership=ownership), False
        return await take_over(workflow, store, run_id, started, ownership=ownership), True
    except BaseException:
        await ownership.close()
        raise


NO_TURN_TO_ROLL_BACK = (
    "it rolls back a turn, and the session has never rested on input: no turn began to go back to"
)


async def turn_start(workflow: Workflow, store: Store, run_id: str) -> str:
    """The checkpoint where the run's running turn began: where it last rested on input.

    Found up the lineage of its latest checkpoint, so a run that branched
    before finds the rest on its own branch.

    Raises:
        CheckpointNotFoundError: the run never rested on input (or that
            checkpoint was pruned): there is no turn to roll back.
    """
    from treadle._exceptions import CheckpointNotFoundError  # noqa: PLC0415 - rare

    row = await store.get_run(run_id)
    infos = {info.checkpoint_id: info for info in await store.list_checkpoints(run_id)}
    at = infos.get(row.checkpoint_id or "")
    while at is not None:
        if at.status == RunStatus.AWAITING_INPUT.value:
            restored = await load_restored(workflow, store, run_id, at.checkpoint_id)
            if not restored.pending and restored.waits.input_waiter(None) is not None:
                return at.checkpoint_id
        at = infos.get(at.parent_checkpoint_id or "")
    raise CheckpointNotFoundError(run_id, "where a turn began (the session never rested on input)")


def chosen_policy(workflow: Workflow, policy: InputPolicy | None) -> InputPolicy:
    """The policy a message is sent under: the caller's, else its workflow's.

    Raises:
        TypeError: ``policy`` is not an ``InputPolicy``.
        ValueError: the workflow's sessions reject input while a turn runs,
            so nothing would take a message under another policy then.
    """
    own = workflow.input_policy
    if policy is None:
        return own
    if not isinstance(policy, InputPolicy):
        msg = f"policy must be an InputPolicy (InputPolicy.ENQUEUE, ...), got {policy!r}"
        raise TypeError(msg)
    if policy.kind != "reject" and not own.watches_turns:
        msg = (
            f"workflow {workflow.name!r} rejects session input while a turn runs "
            f"(input_policy=reject), so a message cannot be sent under {policy}: build it with "
            f"another input_policy to let senders choose"
        )
        raise ValueError(msg)
    return policy


async def refuse_if_queued(store: Store, run_id: str) -> None:
    """Refuse a ``reject`` message while one sent before waits in the run's inbox.

    Raises:
        SessionBusyError: a message is still to be taken (its turn comes first).
    """
    if any(policy_of_kind(item.kind) for item in await store.inbox(run_id)):
        raise SessionBusyError(run_id, "a message sent before is still to be taken")
