"""Runner methods over stored runs: take over, answer, load (forks and history: ``_history``).

Loading refuses a run written by another graph *before* decoding anything,
so no executor runs and no unknown type is even looked up; the error names
every executor and edge that changed.

Continuing a stored run always starts by taking its lease
(:func:`take_over`), and only then reads its checkpoint and its inbox, so
the checkpoint read is the latest and no one else moves the run meanwhile.
Answers and session messages from a caller are first *delivered* to the
run's inbox (:func:`deliverable_answers` checks them), which is where the
store decides, once, which answer to a request wins.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._graph_description import (
    decode_description,
    describe_changes,
    fingerprint,
)
from treadle._checkpoints._inbox import applicable, expired_instead, marker_deadline, sort_inbox
from treadle._checkpoints._ownership import Ownership, owner_is_dead
from treadle._engine._errors import RunCancelledError
from treadle._engine._result import RunStatus
from treadle._engine._waits import NestedRequest, Suspension
from treadle._exceptions import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    GraphChangedError,
    RequestAlreadyAnsweredError,
    RequestError,
    RunBusyError,
    RunPausedError,
    SessionBusyError,
    UnknownRequestError,
    VersionMismatchError,
)
from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._store import (
        CheckpointRecord,
        InboxItem,
        RunReads,
        RunRecord,
        Store,
    )
    from treadle._values._actors import Actor
    from treadle._workflow._workflow import Workflow


# A run row, its graph and a checkpoint, as ``load_resumable`` reads them.
Resumable = tuple["RunRecord", bytes, "CheckpointRecord | None"]

_ENDED = frozenset(status.value for status in RunStatus if status.is_final)


logger = logging.getLogger("treadle.runtime")


@dataclass(frozen=True, slots=True)
class TakenOver:
    """A stored run this process now owns, read after its lease was taken.

    Attributes:
        restored: Its checkpoint, decoded.
        ownership: The lease it is held under.
        answers: Answers from its inbox to requests the checkpoint has pending.
        inputs: Session messages from its inbox, in delivery order (the
            ownership marks what was read applied with the run's next commit).
        expired: Pending requests whose timeout the store kept as their answer.
    """

    restored: RestoredRun
    ownership: Ownership
    answers: Mapping[str, Any]
    inputs: tuple[tuple[Any, str | None], ...]
    expired: frozenset[str] = frozenset()


async def acquire(
    workflow: Workflow, store: Store, run_id: str, *, wait: bool = False, actor: Actor | None = None
) -> Ownership:
    """Take the run's lease to drive it with ``workflow`` (see :meth:`Ownership.acquire`).

    Raises:
        VersionMismatchError: the run is on another version of the workflow;
            refused before the lease is taken: taking it would clear a
            parked run's mark.
        RunNotFoundError, RunBusyError: as :meth:`Ownership.acquire`.
    """
    row = await store.get_run(run_id)
    if row.version != workflow.version:
        raise VersionMismatchError(run_id, row.workflow, row.version, workflow.version)
    return await Ownership.acquire(store, run_id, wait=wait, actor=actor)


async def take_over(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str | None = None,
    *,
    wait: bool = False,
    ownership: Ownership | None = None,
    read_inbox: bool = True,
    actor: Actor | None = None,
    loaded: Resumable | None = None,
) -> TakenOver:
    """Take the run's lease (or use ``ownership``), then read its checkpoint and inbox.

    With ``actor`` (the door's, whose right it checked), taking the lease
    is recorded as ``run_resumed`` (when ``ownership`` is not given) and
    inbox items the run cannot apply are refused on the record in its name.

    ``read_inbox=False`` skips the inbox read for a run known to have had
    nothing delivered (a timer service's claim says so). ``loaded``: the
    run's ``load_resumable``, read under ``ownership`` already (a timer
    service reads the runs it claimed a batch at a time).

    Raises:
        RunBusyError: another process owns the run (without ``wait``).
        VersionMismatchError: the run is on another version of the workflow;
            refused before the lease is taken, so nothing is written.
        RunNotFoundError, CheckpointNotFoundError, GraphChangedError,
        CheckpointCorruptError, SerializationError, RunCancelledError: as
            :func:`load_restored`; the lease is given up again.
    """
    owned = (
        ownership
        if ownership is not None
        else await acquire(workflow, store, run_id, wait=wait, actor=actor)
    )
    try:
        restored = await load_restored(workflow, store, run_id, checkpoint_id, loaded)
        # Resuming from an older checkpoint branches the run: its inbox waits for the head.
        items = await store.inbox(run_id) if read_inbox and checkpoint_id is None else []
    except BaseException:
        await owned.close()
        raise
    # Messages under an input policy are the session inbox's to take, in the loop.
    items = list(applicable(items, hold_messages=workflow.input_policy.watches_turns))
    refusals = unfit_items(workflow, restored, items) if items else []
    if refusals:
        try:
            await owned.refuse_inbox(refusals, actor)
        except BaseException:
            await owned.close()
            raise
        for seq, reason in refusals:
            logger.warning("run %s: inbox item %d refused: %s", run_id, seq, reason)
        refused = {seq for seq, _ in refusals}
        items = [item for item in items if item.seq not in refused]
    if not items:
        return TakenOver(restored, owned, {}, ())
    pending = {r.request_id for r in restored.waits.pending_requests()}
    read = sort_inbox(items, workflow.serializer, pending)
    owned.consumed = items[-1].seq
    return TakenOver(restored, owned, read.answers, read.inputs, read.expired)


def _innermost(found: Suspension | NestedRequest) -> Suspension:
    """The invocation that waits, however deep in sub-workflows ``found`` names it."""
    waiting: object = found
    while isinstance(waiting, NestedRequest):
        waiting = waiting.waiting
    assert isinstance(waiting, Suspension)  # noqa: S101 - what waits for input suspends
    return waiting


def unfit_items(
    workflow: Workflow, restored: RestoredRun, items: Sequence[InboxItem]
) -> list[tuple[int, str]]:
    """The inbox items the run cannot apply, each with why: (seq, reason).

    An answer that does not fit the request it answers, or a message while
    nothing waits for input. Every door checks what it delivers against the
    workflow's code; these came in without that check (a client holding no
    code), or the code changed since. Applied, they would fail the run's
    every takeover; the owner refuses them on the record instead, and the
    request can be answered again. An answer to a request no longer pending
    is left alone (sorting the inbox leaves it out: it was answered on
    another branch). Each wait for input takes one message, the first read:
    a message after it, with no other wait to take it, is refused alone.
    """
    waits, refusals = restored.waits, []
    taken: list[Suspension] = []  # the waits for input the messages read so far take
    for item in items:
        if item.kind == "message":
            found = waits.input_waiter(item.target, taken)
            if found is None:
                where = f"executor {item.target!r}" if item.target else "the run"
                why = "an earlier message takes its wait" if taken else restored.status
                refusals.append((item.seq, f"{where} is not waiting for input ({why})"))
            else:
                taken.append(_innermost(found))
        if item.kind != "answer" or marker_deadline(item.payload) is not None:
            continue
        try:
            waiting = waits.find_request(str(item.target))
        except UnknownRequestError:
            continue
        value = workflow.serializer.loads(item.payload)
        try:
            workflow.check_answer(str(item.target), waiting, value)
        except RequestError as error:
            refusals.append((item.seq, error_text(error)))
    return refusals


async def refuse_unfit_inbox(
    workflow: Workflow, store: Store, run_id: str, ownership: Ownership | None, actor: Actor
) -> bool:
    """Refuse, on the record, the answers in a free run's inbox that do not fit; ``True`` if any.

    The store keeps the first answer to a request, checked or not; one that
    came in unchecked (``Store.deliver``, a client holding no code) and does
    not fit would otherwise hold the request, refusing every later answer,
    until something takes the run over and refuses it. A door that checks
    answers does that takeover itself when the run is free (``ownership``:
    its lease, held already), so the answer it checked can go in. A run
    owned elsewhere is left to its owner, which refuses such items where
    it reads the inbox. The refusal is recorded in ``actor``'s name (the
    answerer, at their door): their answer set it going.
    """
    held = await store.inbox(run_id)
    if not any(item.kind == "answer" for item in held):
        return False  # the kept answer was applied: it won
    owned = ownership or await lease_if_free(store, run_id)
    if owned is None:
        return False
    try:
        await take_over(workflow, store, run_id, ownership=owned, actor=actor)
    finally:
        if ownership is None:
            await owned.close()
        else:
            owned.consumed = None  # read here, applied by the caller's own takeover
    return len(await store.inbox(run_id)) < len(held)


async def lease_if_free(store: Store, run_id: str) -> Ownership | None:
    """The run's lease, if nobody holds it and it is not paused (``None`` otherwise)."""
    try:
        return await Ownership.acquire(store, run_id)
    except (RunBusyError, RunPausedError):
        return None


def checked_responses(responses: object) -> Mapping[str, Any]:
    """``responses`` once it maps request ids to answers, as ``respond`` takes them.

    Raises:
        TypeError: it is not a mapping (a list of pairs, one request's id).
    """
    if not isinstance(responses, Mapping):
        got = type(responses).__name__
        msg = f"responses must map request ids to answers, {{request_id: answer}}; got a {got}"
        raise TypeError(msg)
    return responses


async def deliverable_answers(
    workflow: Workflow,
    store: Store,
    run_id: str,
    responses: Mapping[str, Any],
    *,
    wait: bool,
    allowed: Callable[[RestoredRun], None] | None = None,
) -> list[tuple[str, str | None, bytes]]:
    """Check answers against the run's latest checkpoint; return them as inbox items.

    Nothing is written. The store decides between concurrent answers when
    they are delivered; this refuses what can be refused before that.
    ``allowed`` is called with the checkpoint before any answer is looked
    at: the door refuses there an actor the requests do not let answer.

    Raises:
        RunBusyError: another process owns the run now (without ``wait``),
            and none of the requests was settled yet.
        RequestAlreadyAnsweredError: a request was answered (names the answer),
            also while the run is busy going on with that answer.
        RequestExpiredError: a request timed out (names its deadline).
        UnknownRequestError: a request id is not waiting and never was answered.
        InvalidResponseError: an answer has the wrong type.
    """
    try:
        restored = await _latest_if_free(workflow, store, run_id, wait=wait)
    except RunBusyError:  # busy applying the answer that won, perhaps: that is the news
        for request_id in responses:
            await _refuse_settled(store, run_id, request_id)
        raise
    if allowed is not None:
        allowed(restored)
    items: list[tuple[str, str | None, bytes]] = []
    for request_id, value in responses.items():
        try:
            waiting = restored.waits.find_request(request_id)
        except UnknownRequestError:
            await _refuse_settled(store, run_id, request_id)
            raise
        checked = workflow.check_answer(request_id, waiting, value)
        items.append(("answer", request_id, workflow.serializer.dumps(checked)))
    return items


async def _refuse_settled(store: Store, run_id: str, request_id: str) -> None:
    """Raise what settled the request, if anything did: an answer, or its timeout.

    Raises:
        RequestAlreadyAnsweredError: it was answered (names the answer).
        RequestExpiredError: it timed out (a timeout is kept as its answer).
    """
    kept = await store.answer_of(run_id, request_id)
    if kept is not None:
        raise expired_instead(RequestAlreadyAnsweredError(run_id, request_id, *kept)) from None


async def deliverable_message(
    workflow: Workflow, store: Store, run_id: str, message: Any, target: str | None, *, wait: bool
) -> list[tuple[str, str | None, bytes]]:
    """Check a session message against the run's latest checkpoint; return it as an inbox item.

    Raises:
        RunBusyError: another process owns the run now (without ``wait``).
        RequestError: the run is not waiting for input.
    """
    restored = await _latest_if_free(workflow, store, run_id, wait=wait)
    if restored.waits.input_waiter(target) is None:
        where = f"executor {target!r} of run" if target else "run"
        msg = f"{where} {run_id!r} is not waiting for input ({restored.status})"
        if restored.status in _ENDED or target is not None:
            raise RequestError(msg)
        asked = [r.request_id for r in restored.waits.pending_requests()]
        why = f"not waiting for input: {restored.status}"
        if asked:  # what it waits for instead, and what gives it
            why = f"not waiting for input: it waits for an answer to {', '.join(asked)}"
            why += ", which respond gives"
        raise SessionBusyError(run_id, why)
    return [("message", target, workflow.serializer.dumps(message))]


async def _latest_if_free(
    workflow: Workflow, store: Store, run_id: str, *, wait: bool
) -> RestoredRun:
    if not wait:
        row = await store.get_run(run_id)
        owner, until = row.owner, row.lease_until
        # An owner whose process is gone holds nothing: the answer may go in.
        if row.owned(time.time()) and owner and until and not owner_is_dead(owner):
            raise RunBusyError(run_id, owner, until)
    return await load_restored(workflow, store, run_id, None)


async def load_restored(
    workflow: Workflow,
    store: RunReads,
    run_id: str,
    checkpoint_id: str | None,
    loaded: Resumable | None = None,
    *,
    forking: bool = False,
) -> RestoredRun:
    """Decode a run's checkpoint for this workflow, refusing a changed graph.

    ``loaded``: what ``store.load_resumable(run_id, checkpoint_id)`` gives,
    read already (by a batch read under the run's lease). ``forking``: the
    checkpoint starts a new run, so a cancelled run's may be read too (the
    cancelled run itself never goes on).

    Raises:
        RunNotFoundError, CheckpointNotFoundError: nothing to load.
        RunCancelledError: the run was cancelled (unless ``forking``).
        GraphChangedError: the run was written by a different graph.
        CheckpointCorruptError: the checkpoint fails its checksum.
        SerializationError: it names a type this workflow does not allow.
    """
    row, graph, record = (
        loaded if loaded is not None else await store.load_resumable(run_id, checkpoint_id)
    )
    if row.status == RunStatus.CANCELLED.value and not forking:
        raise RunCancelledError(run_id)
    if row.version != workflow.version:
        raise VersionMismatchError(run_id, row.workflow, row.version, workflow.version)
    if _stored_fingerprint(run_id, graph) != workflow.fingerprint:
        changes = describe_changes(decode_description(run_id, graph), workflow.description)
        raise GraphChangedError(run_id, changes)
    if record is None:
        raise CheckpointNotFoundError(run_id, checkpoint_id)
    restored = workflow.codec.decode(record, run_id=run_id)
    if restored.fingerprint != workflow.fingerprint:
        raise GraphChangedError(
            run_id,
            [f"checkpoint {restored.checkpoint_id!r} was written by graph {restored.fingerprint}"],
        )
    return restored


def _stored_fingerprint(run_id: str, graph: bytes) -> str:
    """The fingerprint of a run's stored graph description.

    Every run of a workflow stores the same bytes, so a resume decodes and
    hashes them once per process rather than once per run.

    Raises:
        CheckpointCorruptError: The bytes are not a JSON object, naming the run.
    """
    found = _fingerprint_of(graph)
    if found is None:
        decode_description(run_id, graph)  # raises, naming the run and why
    return found or ""


@functools.lru_cache(maxsize=64)
def _fingerprint_of(graph: bytes) -> str | None:
    """:func:`fingerprint` of stored bytes, or None where they are no description."""
    try:
        return fingerprint(decode_description("", graph))
    except CheckpointCorruptError:
        return None
