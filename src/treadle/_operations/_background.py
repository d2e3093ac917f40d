"""Operations that make a change durable now and leave the running for later.

A command that runs a run (``treadle run``, ``resume``, ``respond``) holds
its caller until the run rests. The HTTP API cannot: it answers as soon as
what was asked is *durable*, and the run goes on in the background, in the
server process (SQLite) or on a ``treadle worker`` (PostgreSQL). Each
operation here does the first half in the caller's time, where a refusal
(a busy run, an answer that lost, a bad value) can still be reported and
nothing was changed, and returns the second half, a :data:`DriveOn`, for
the caller to run in a task it owns.

Answers are decided by the store, never here: :func:`deliver_answer`
delivers to the run's inbox, and the store keeps the first answer to each
request and refuses every later one, whoever sent it. An operation that
goes on with a run here takes its lease *before* it changes anything, as
``Workflow.send_message`` does, so no timer service takes the run up in
between.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from treadle._engine._options import RunOptions
from treadle._engine._result import RunResult
from treadle._exceptions import TreadleError
from treadle._values._ids import new_run_id
from treadle._workflow import _actions as door
from treadle._workflow import _rights as rights
from treadle._workflow._driving import continue_taken
from treadle._workflow._launch import Launch, open_run
from treadle._workflow._runs import take_over
from treadle._workflow._starting import admit_start

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._checkpoints._leases import LeaseKeeper
    from treadle._graph._input_policy import InputPolicy
    from treadle._stores._store import Store
    from treadle._values._actors import Actor
    from treadle._workflow._runs import TakenOver
    from treadle._workflow._start_policy import StartPolicy
    from treadle._workflow._workflow import Workflow

    DriveOn = Callable[[], Awaitable[None]]

logger = logging.getLogger("treadle.server")

BACKGROUND = RunOptions(record_events=False)
"""How runs go on in the background: nobody waits for their in-memory events.

Each operation takes ``options`` (these by default): a server passes them
with its metrics (``Driver.run_options``), so the runs it drives are counted.
"""


async def open_new(
    workflow: Workflow,
    value: Any,
    store: Store,
    run_id: str | None,
    *,
    actor: Actor,
    options: RunOptions = BACKGROUND,
    leases: LeaseKeeper | None = None,
    policy: StartPolicy | None = None,
    dedup_id: str | None = None,
) -> tuple[str, DriveOn | None]:
    """Create a run (its first checkpoint, leased to this process); return its id and its drive.

    Once this returns the run is stored: a process that dies before driving
    it leaves an orphan that a timer service takes over. ``leases``: the
    keeper of the driver that will drive it (opened in one task, it is
    driven in another).

    Under a start ``policy`` (or with ``dedup_id``) the store decides first:
    a run that waits its turn, or the run a start joined, has no drive here
    (``None``): its id is the run's it made or joined.

    Raises:
        ActionRefusedError: ``actor`` is not an operator.
        RunExistsError: ``run_id`` is taken.
        StartRefusedError: Its start policy refused it.
        TypeError: The start executor has no handler for the value's type.
        ValueError: The policy's key could not be computed for the value.
    """
    chosen = run_id or new_run_id()
    if policy is not None or dedup_id is not None:
        launch = Launch(value, None, chosen, None, options, store, leases=leases)
        admitted = await admit_start(
            workflow, launch, policy or workflow.start_policy, dedup_id, actor
        )
        if isinstance(admitted, RunResult):
            return admitted.run_id, None
        launch = admitted
    else:
        started_by = rights.started_by(actor)
        launch = Launch(
            value, None, chosen, None, options, store, started_by=started_by, leases=leases
        )
    loop, release = await open_run(workflow, launch, None)

    async def drive_on() -> None:
        # As Workflow.run drives: cancelled (a server stopping detaches its runs
        # first, so nothing is recorded), the run stays as last committed.
        try:
            await loop.run_to_end()
        except asyncio.CancelledError:
            await loop.cancel()
            raise
        finally:
            await release()

    return chosen, drive_on


def drive_taken(
    workflow: Workflow, store: Store, taken: TakenOver, options: RunOptions = BACKGROUND
) -> DriveOn:
    """The drive of a run this process has taken over (its lease held, its inbox read)."""

    async def drive_on() -> None:
        await continue_taken(workflow, taken, store, options)

    return drive_on


async def take_for_resume(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str | None,
    *,
    actor: Actor,
    options: RunOptions = BACKGROUND,
) -> DriveOn:
    """Take a run over to go on from its latest checkpoint (or ``checkpoint_id``).

    A paused run is unpaused first. Raises what ``Workflow.resume`` raises
    before it runs anything (``RunBusyError`` while another process owns the
    run; ``ActionRefusedError`` for an actor who may not; nothing was changed then).
    """
    taken = await door.resume(workflow, store, run_id, checkpoint_id, actor=actor)
    return drive_taken(workflow, store, taken, options)


async def deliver_answer(
    workflow: Workflow,
    store: Store,
    run_id: str,
    request_id: str,
    value: Any,
    *,
    take: bool,
    actor: Actor,
    options: RunOptions = BACKGROUND,
) -> DriveOn | None:
    """Check an answer strictly and deliver it, through the door; the first answer wins.

    Nothing is stored unless ``actor`` may answer the request and the answer
    fits the type its request asked for. With ``take`` (a store whose runs
    this process runs), the run is leased here first if nobody holds it,
    and the drive that applies the answer is returned; else (``None``) the
    answer waits in the run's inbox for whoever takes the run up next: its
    current owner, a timer service, a worker, or the process that unpauses it.

    Raises:
        ActionRefusedError: The actor may not answer it (naming who may).
        InvalidResponseError: It does not fit (every field at fault named).
        RequestAlreadyAnsweredError: Another answer was kept first (named).
        RequestExpiredError: The request's timeout was kept first.
        UnknownRequestError: No such request is waiting.
        RequestError: The run has ended.
    """
    # wait=True: an answer to a run another process holds waits in its inbox.
    ownership = await door.answer(
        store, run_id, {request_id: value}, actor=actor, workflow=workflow, wait=True, take=take
    )
    if ownership is None:
        return None
    try:
        taken = await take_over(workflow, store, run_id, ownership=ownership)
    except TreadleError as error:  # cancelled meanwhile, say: the answer is kept all the same
        logger.info("run %s: answer delivered, not applied here: %s", run_id, error)
        return None
    return drive_taken(workflow, store, taken, options)


async def deliver_message(
    workflow: Workflow,
    store: Store,
    run_id: str,
    message: Any,
    target: str | None,
    *,
    actor: Actor,
    options: RunOptions = BACKGROUND,
    policy: InputPolicy | None = None,
) -> DriveOn | None:
    """Deliver the next message of a session; the drive that goes on with it here, if any.

    Under ``reject`` the run is taken first, so the message is checked
    against a checkpoint no other sender can move on meanwhile (as
    ``Workflow.send_message``). Under another policy (the workflow's, or
    ``policy``) it goes into the run's inbox, and the run is taken here only
    if nobody drives it (``None``: whoever does takes the message).

    Raises:
        ActionRefusedError: The actor is not an operator.
        SessionBusyError: ``reject``, and a turn is running; nothing was delivered.
        RunPausedError: It is paused (``reject``); nothing was delivered.
        RequestError: It has ended, or ``target`` waits for nothing.
        ValueError: ``policy`` on a workflow whose own policy is ``reject``.
    """
    ownership = await door.send(
        store, run_id, message, actor=actor, workflow=workflow, target=target, policy=policy
    )
    if ownership is None:
        return None
    taken = await take_over(workflow, store, run_id, ownership=ownership)
    return drive_taken(workflow, store, taken, options)
