"""The one door: every action that changes a run from outside it comes through here.

An answer, a message, a cancel, a pause, an unpause, a resume, a fork, a
delete, a migration, a prune: whoever asks (the Python API, the CLI, the
HTTP API and its page, the workers' client, a signed link), the action is
taken the same way, in three steps, each once:

1. **Check the actor's right** (:mod:`treadle._workflow._rights`). A
   refusal raises :class:`~treadle.errors.ActionRefusedError` naming who
   may, and nothing changes.
2. **Decide once in the store.** Answers and messages are delivered to the
   run's inbox only to the version of the workflow they were checked or
   encoded for (``Store.deliver(version=)``: a migration takes turns with
   it); the store keeps the first answer to a request.
3. **Record the actor.** The store writes the action's event in the run's
   log and its entry in the audit chain in the transaction of its effect
   (:mod:`treadle._stores._audit`), so no crash leaves one without the other.

No other module calls the store's action writes (``tests/test_one_door.py``
holds every module of the package to that), so a door added later cannot
skip a step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._inbox import expired_instead
from treadle._checkpoints._ownership import Ownership, lease_duration, new_owner
from treadle._engine._errors import RunCancelledError
from treadle._engine._result import RunStatus
from treadle._exceptions import (
    RequestAlreadyAnsweredError,
    RequestError,
    RunBusyError,
    RunPausedError,
    SessionBusyError,
)
from treadle._graph._input_policy import InputPolicy, inbox_kind
from treadle._values._schedules import chosen_run_id
from treadle._workflow._history import check_branch, fork_run
from treadle._workflow._inputs import misdirected
from treadle._workflow._logged import logged_rules, named_winner
from treadle._workflow._rights import (
    answer_rules,
    check_answer_right,
    check_right,
    starter_of,
)
from treadle._workflow._runs import (
    deliverable_answers,
    deliverable_message,
    lease_if_free,
    load_restored,
    refuse_unfit_inbox,
    take_over,
)
from treadle._workflow._sessions import chosen_policy, refuse_if_queued

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._pausing import PauseOutcome, Unpaused
    from treadle._stores._postgres import PostgresStore
    from treadle._stores._store import (
        Admission,
        Admissions,
        CheckpointRecord,
        Lease,
        Pausing,
        RunRemoval,
        RunWrites,
        StartRequest,
        Store,
    )
    from treadle._values._actors import Actor
    from treadle._values._search_fields import FieldValue
    from treadle._values._serialization import Serializer
    from treadle._workflow._runs import TakenOver
    from treadle._workflow._workflow import Workflow

# --- answers and messages -------------------------------------------------------------


async def answer(
    store: Store,
    run_id: str,
    responses: Mapping[str, Any],
    *,
    actor: Actor,
    workflow: Workflow | None = None,
    serializer: Serializer | None = None,
    wait: bool = False,
    take: bool = False,
) -> Ownership | None:
    """Check and deliver answers to a run's requests; the store keeps the first to each.

    With ``workflow``, each answer is checked against the run's latest
    checkpoint (the request is waiting, the value has its type, the actor
    may answer it) and delivered only to a run still on that version.
    Without (a client with no workflow code), it is encoded with
    ``serializer`` and delivered only to the version the run was on when
    read; the worker checks it. With ``take``, the run's lease is taken
    first if nobody holds it (and returned: the caller drives the run).

    Raises:
        ActionRefusedError: the actor may not answer a request.
        RequestAlreadyAnsweredError, RequestExpiredError, UnknownRequestError,
        InvalidResponseError, RunBusyError, RequestError, VersionMismatchError:
            as ``Workflow.respond``; nothing was delivered.
    """
    run = await store.get_run(run_id)
    if workflow is not None:

        def allowed(restored: RestoredRun) -> None:
            for request_id in responses:
                check_answer_right(actor, run, request_id, answer_rules(restored, request_id))

        try:
            items = await deliverable_answers(
                workflow, store, run_id, responses, wait=wait, allowed=allowed
            )
        except RequestAlreadyAnsweredError as refused:  # answered before this was read
            raise await named_winner(store, refused) from None
        version = workflow.version
    else:
        for request_id in responses:
            check_answer_right(actor, run, request_id, await logged_rules(store, run, request_id))
        assert serializer is not None  # noqa: S101 - a caller without a workflow gives one
        items = [("answer", rid, serializer.dumps(value)) for rid, value in responses.items()]
        version = run.version
    ownership = await lease_if_free(store, run_id) if take else None
    try:
        try:
            await store.deliver(run_id, items, version=version, actor=actor)
        except RequestAlreadyAnsweredError:
            if workflow is None or not await refuse_unfit_inbox(
                workflow, store, run_id, ownership, actor
            ):
                raise
            await store.deliver(run_id, items, version=version, actor=actor)  # held by an unfit one
    except RequestAlreadyAnsweredError as refused:  # another answer, or the timeout, won
        if ownership is not None:
            await ownership.close()
        lost = expired_instead(refused)
        if isinstance(lost, RequestAlreadyAnsweredError):
            lost = await named_winner(store, lost)
        raise lost from None
    except BaseException:
        if ownership is not None:
            await ownership.close()
        raise
    return ownership


async def send(
    store: Store,
    run_id: str,
    message: Any,
    *,
    actor: Actor,
    workflow: Workflow | None = None,
    serializer: Serializer | None = None,
    target: str | None = None,
    wait: bool = False,
    policy: InputPolicy | None = None,
) -> Ownership | None:
    """Deliver the next message of a session; returns the run's lease if this caller holds it.

    Under ``reject`` (the workflow's policy, or ``policy``), with
    ``workflow``, the run is taken first, so the message is checked against
    a checkpoint no other sender can move on meanwhile: of two senders
    racing, the store's lease lets one in and the other is refused. Under
    every other policy the message goes into the run's inbox, where the
    store gives it its place among the session's messages (that order
    decides, once, which message starts a turn and which meet it running),
    and the run's lease is then taken if it is free (``None``: whoever
    holds it takes the message). Without ``workflow``, it is encoded with
    ``serializer`` and delivered to the version the run was on when read; a
    worker applies it.

    Raises:
        ActionRefusedError: the actor is not an operator.
        SessionBusyError: ``reject``, and a turn is running.
        RequestError: not ``reject``, and ``target`` names no executor (nor sub-workflow path).
        RunBusyError, RunPausedError, RequestError: as ``Workflow.send_message``.
        ValueError: ``policy`` on a workflow whose sessions reject input mid-turn.
    """
    check_right(actor, "message", run_id)
    if workflow is None:
        assert serializer is not None  # noqa: S101 - a caller without a workflow gives one
        run = await store.get_run(run_id)
        kind = inbox_kind(policy or InputPolicy.REJECT)
        await store.deliver(
            run_id, [(kind, target, serializer.dumps(message))], version=run.version, actor=actor
        )
        return None
    chosen = chosen_policy(workflow, policy)
    wrong = misdirected(workflow, target) if chosen.kind != "reject" else None
    if wrong is not None:  # refused to its sender now, not by the run's owner later
        raise RequestError(f"{wrong}; nothing was delivered to run {run_id!r}")
    if chosen.kind != "reject":
        item = (inbox_kind(chosen), target, workflow.serializer.dumps(message))
        await store.deliver(run_id, [item], version=workflow.version, actor=actor)
        return await lease_if_free(store, run_id)
    try:
        ownership = await Ownership.acquire(store, run_id, wait=wait)
    except RunBusyError as busy:
        if isinstance(busy, SessionBusyError):
            raise
        why = "its owner is running it"
        raise SessionBusyError(run_id, why, busy.owner, busy.lease_until) from None
    try:
        if workflow.input_policy.watches_turns:  # a sender's own reject, messages may be kept
            await refuse_if_queued(store, run_id)
        items = await deliverable_message(workflow, store, run_id, message, target, wait=True)
        await store.deliver(run_id, items, version=workflow.version, actor=actor)
    except BaseException:
        await ownership.close()
        raise
    return ownership


# --- control actions ------------------------------------------------------------------


async def cancel(store: RunRemoval, run_id: str, *, actor: Actor) -> None:
    """Cancel a run wherever it is (see ``Store.cancel``), recording who did.

    Raises:
        ActionRefusedError: the actor is not an operator.
        RunNotFoundError, RequestError: as ``Store.cancel``.
    """
    check_right(actor, "cancel", run_id)
    await store.cancel(run_id, actor=actor)


async def pause(store: Pausing, run_id: str, *, actor: Actor) -> PauseOutcome:
    """Pause a run now or at its owner's next barrier (see ``Store.pause``), recording who did."""
    check_right(actor, "pause", run_id)
    return await store.pause(run_id, actor=actor)


async def unpause(
    store: Pausing, run_id: str, *, actor: Actor, owner: str | None = None, duration: float = 0.0
) -> Unpaused:
    """Let a paused run go on (leased to ``owner``: see ``Store.unpause``), recording who did."""
    check_right(actor, "unpause", run_id)
    return await store.unpause(run_id, owner=owner, duration=duration, actor=actor)


async def resume(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str | None = None,
    *,
    actor: Actor,
    wait: bool = False,
) -> TakenOver:
    """Take a run over to go on with it here, recording who did (``run_resumed``).

    A paused run is unpaused first, leased to this process as it is
    (recorded as ``run_unpaused``).

    Raises:
        ActionRefusedError: the actor is not an operator.
        RequestError: from ``checkpoint_id`` the run would only rest,
            running nothing (see ``check_branch``); or the run is queued by
            its start policy (it has not started); nothing taken.
        RunBusyError, RequestError, RunNotFoundError, ...: as ``take_over``
            and :func:`unpause_here`.
    """
    check_right(actor, "resume", run_id)
    _refuse_ended(run_id, (await store.get_run(run_id)).status, ended=False)  # before taking it
    if checkpoint_id is not None:  # read first: a resume refused takes and records nothing
        await check_branch(store, await load_restored(workflow, store, run_id, checkpoint_id))
    try:
        return await take_over(workflow, store, run_id, checkpoint_id, wait=wait, actor=actor)
    except RunPausedError:
        return await _take_paused(workflow, store, run_id, checkpoint_id, actor=actor, wait=wait)


async def hand_back(store: Store, run_id: str, *, actor: Actor) -> None:
    """Resume a run without driving it here: take it up, recorded, and let it go at once.

    Taking it up clears a ``parked`` reason and records ``run_resumed``;
    letting go leaves it to whoever serves the store (a ``treadle worker``,
    the timer service of ``treadle serve``), which goes on with it as with
    any run at rest or orphaned. What a bulk ``resume`` does to each run.

    Raises:
        ActionRefusedError: the actor is not an operator.
        RunCancelledError: it was cancelled (nothing taken, nothing recorded).
        RequestError: it completed, or is queued by its start policy: there is
            nothing to resume.
        RunBusyError: another process holds a current lease on it.
        RunPausedError: it is paused (unpause it instead).
        RunNotFoundError: no such run.
    """
    check_right(actor, "resume", run_id)
    _refuse_ended(run_id, (await store.get_run(run_id)).status)  # before taking anything
    lease = await store.acquire(run_id, new_owner(), lease_duration(store), actor=actor)
    try:
        # Again once leased: a run that ended between the first read and the lease was
        # taken up with nothing to resume (so nothing recorded), and must not be
        # reported as resumed.
        _refuse_ended(run_id, (await store.get_run(run_id)).status)
    finally:
        await store.release(lease)


def _refuse_ended(run_id: str, status: str, *, ended: bool = True) -> None:
    """Refuse to resume a run that has ended (with ``ended``) or not started: nothing would be.

    A run its start policy queued has no checkpoint: taking its lease recorded
    ``run_resumed`` and then failed, saying it had been "checkpointed by a
    different graph". It starts when its turn comes, by whoever serves the store.
    """
    if status == RunStatus.QUEUED.value:
        msg = (
            f"run {run_id!r} is queued by its start policy and has not started: there is "
            "nothing to resume; it starts when its turn comes (cancel it to take it out of line)"
        )
        raise RequestError(msg)
    if not ended:
        return
    if status == RunStatus.CANCELLED.value:
        raise RunCancelledError(run_id)
    if status == RunStatus.COMPLETED.value:
        raise RequestError(f"run {run_id!r} completed: there is nothing to resume")


async def unpause_here(
    workflow: Workflow, store: Store, run_id: str, *, actor: Actor, wait: bool = False
) -> TakenOver:
    """Unpause a paused run, leased to this process as it is unpaused, and take it over.

    A pause asked of a run that has not paused yet, whose owner's lease ran
    out, is withdrawn, and the run taken over as ``resume`` would.

    Raises:
        ActionRefusedError: the actor is not an operator.
        RunBusyError: the run's owner holds a current lease (it has not
            paused yet; without ``wait``); with ``wait``, this waits until
            it lets go (pausing the run) instead.
        RequestError: the run has ended, or is neither paused nor asked to pause.
        RunNotFoundError: no such run.
    """
    check_right(actor, "unpause", run_id)
    return await _take_paused(workflow, store, run_id, None, actor=actor, wait=wait)


async def _take_paused(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str | None,
    *,
    actor: Actor,
    wait: bool,
) -> TakenOver:
    duration = lease_duration(store)
    while True:
        try:
            unpaused = await store.unpause(
                run_id, owner=new_owner(), duration=duration, actor=actor
            )
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


async def fork(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str,
    state_patch: Mapping[str, Any] | None,
    new_run_id: str | None,
    *,
    actor: Actor,
) -> str:
    """Branch a new run from a checkpoint; the store records ``run_forked`` with the new run.

    The fork counts as started by its parent's starters too (the forker acts
    on their behalf, :attr:`Actor.on_behalf_of`): a request under four eyes
    in the fork refuses them as in the parent, or forking would be a way
    round it.
    """
    check_right(actor, "fork", run_id)
    parent = await store.get_run(run_id)
    inherited = tuple(who for who in starter_of(parent) if who != actor.label)
    forker = dataclasses.replace(
        actor, on_behalf_of=tuple(dict.fromkeys((*actor.on_behalf_of, *inherited)))
    )
    return await fork_run(
        workflow, store, run_id, checkpoint_id, state_patch, new_run_id, started_by=forker.encode()
    )


async def delete(store: RunRemoval, run_id: str, *, actor: Actor) -> None:
    """Delete a run (see ``Store.delete_run``); its audit entries stay, with this one."""
    check_right(actor, "delete", run_id)
    await store.delete_run(run_id, actor=actor)


async def prune(store: RunRemoval, run_id: str, keep_last: int, *, actor: Actor) -> int:
    """Delete all but the newest ``keep_last`` checkpoints of a run, recording who did."""
    check_right(actor, "prune", run_id)
    removed: int = await store.prune(run_id, keep_last, actor=actor)
    return removed


async def migrate(
    store: RunWrites,
    lease: Lease,
    version: int,
    graph: bytes,
    checkpoint: CheckpointRecord,
    *,
    actor: Actor,
) -> bool:
    """Move a leased run to another version of its workflow (``Store.migrate_run``), recorded."""
    check_right(actor, "migrate", lease.run_id)
    return await store.migrate_run(lease, version, graph, checkpoint, actor=actor)


async def start_queued(
    store: PostgresStore,
    run_id: str,
    workflow: str,
    payload: bytes,
    *,
    actor: Actor,
    deadline_at: float | None = None,
    version: int = 0,
    fields: Sequence[FieldValue] = (),
) -> bool:
    """Queue a run for the workers (``enqueue_run``), recording ``run_started`` with its actor.

    ``fields`` are its input search fields, written with it.

    ``False``: a run of this id and workflow exists already (nothing new).

    Raises:
        ActionRefusedError: the actor is not an operator.
        RunExistsError: the id belongs to a run of another workflow.
        ValueError: the id is a schedule's tick's, and ``actor`` not that schedule.
    """
    from treadle._stores._postgres_queue import enqueue_run  # noqa: PLC0415 - PostgreSQL only

    check_right(actor, "start", run_id)
    chosen_run_id(run_id, actor)
    return await enqueue_run(
        store, run_id, workflow, payload, deadline_at=deadline_at, version=version, actor=actor,
        fields=fields,
    )  # fmt: skip


async def admit(
    store: Admissions,
    request: StartRequest,
    *,
    actor: Actor,
    owner: str | None = None,
    duration: float = 0.0,
) -> Admission:
    """Start under a start policy: the store decides, once, and records who started it.

    With ``owner``, a run admitted at once is leased to it (it drives it).

    Raises:
        ActionRefusedError: the actor is not an operator.
        StartRefusedError: no room, and the policy refuses.
        RunExistsError: the run id is another run's.
    """
    check_right(actor, "start", request.run_id)
    return await store.admit(request, owner=owner, duration=duration, actor=actor)
