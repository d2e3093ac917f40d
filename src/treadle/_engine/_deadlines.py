"""How waits end besides an answer: deadlines, and waits nothing can answer.

``ctx.request(..., timeout=)`` and ``ctx.wait_for_input(timeout=)`` give a
wait a deadline; a run with no store that would rest on a request fails
instead (:func:`refuse_unanswerable`).

A wait given a ``timeout=`` keeps its deadline in ``Wait.due_at``, so the
run's ``wake_at`` (and the store's) covers it and a timer service wakes the
run then. At the deadline the suspension is re-delivered with a
``("timeout", key, deadline)`` journal entry instead of an answer; the
handler, re-executing, gets ``RequestTimeoutError`` where it awaited, and
any later re-execution replays that same timeout.

Who wins, an answer or the deadline, is decided once. For a run with a
store, answers are decided by the store (the first answer to a request id
is the only one it keeps), so the owner that finds a request's deadline
passed records the timeout there as the request's answer, through the
:class:`AnswerLedger` port, and reads the run's inbox in the same breath:
an answer the store kept first wins and is applied; otherwise the timeout
is kept, and every later answer is refused. Session input is not decided by
the store (``send_message`` takes the run's lease before it delivers), so
an input wait times out unless the inbox holds a message for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from treadle._engine._errors import UnanswerableWaitError
from treadle._exceptions import RequestError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from treadle._engine._delivery import Envelope
    from treadle._engine._loop import RunLoop
    from treadle._engine._waits import Suspension, WaitBook


_ANSWERED = ("request", "input")
"""The kinds of wait that something outside answers, and that may have a deadline."""


@dataclass(frozen=True, slots=True)
class InboxRead:
    """What a run's inbox held, read by its owner.

    Attributes:
        answers: Request id → answer, for answers that are not timeouts.
        inputs: (message, target executor or ``None``) session messages, in
            delivery order.
        expired: Request ids whose timeout the store kept as their answer.
    """

    answers: Mapping[str, Any]
    inputs: tuple[tuple[Any, str | None], ...]
    expired: frozenset[str]


class AnswerLedger(Protocol):
    """Where the answers to a run's requests are decided: its store.

    Implemented by ``_checkpoints/_inbox.py``; a run without a store has
    none, and its deadlines are decided where they fall due.
    """

    async def expire(
        self, deadlines: Sequence[tuple[str, float]], *, whole: bool = True
    ) -> InboxRead:
        """Record a timeout as the answer of each (request id, deadline), where none is kept yet.

        Then read the run's inbox: everything in it is applied by the
        caller, and marked applied with the run's next commit. With
        ``whole=False`` (a sub-workflow's requests, decided mid-superstep)
        only what the store kept for these requests is returned, and
        nothing is marked applied: the rest stays for the run's next owner.
        """
        ...


def due_deadlines(waits: WaitBook, now: float) -> list[Suspension]:
    """The requests and input waits whose deadline has passed at ``now``, in stamp order."""
    due = [
        s
        for s in waits.suspended
        if s.wait.due_at is not None and s.wait.due_at <= now and s.wait.kind in _ANSWERED
    ]
    return sorted(due, key=lambda s: s.envelope.stamp)


def time_out(waits: WaitBook, suspension: Suspension) -> tuple[str, Envelope]:
    """Remove ``suspension`` and return its re-delivery, the timeout in its journal."""
    waits.suspended = [s for s in waits.suspended if s is not suspension]
    envelope = suspension.envelope
    wait = suspension.wait
    journal = [*suspension.journal, ("timeout", wait.replay_key or wait.key, wait.due_at)]
    return suspension.executor_id, type(envelope)(
        envelope.stamp, envelope.source, envelope.payload, envelope.handoff, journal
    )


def expire_requests(run: RunLoop, request_ids: Iterable[str]) -> None:
    """Time out the requests the store decided timed out (an inbox read by a new owner)."""
    wanted = set(request_ids)
    for suspension in list(run.waits.suspended):
        wait = suspension.wait
        if wait.kind == "request" and wait.key in wanted:
            run.deliver(*time_out(run.waits, suspension))


async def expire_due(run: RunLoop) -> None:
    """Time out every wait whose deadline has passed, unless an answer won at the store.

    Raises:
        DurabilityError: the store could not record the timeout or read the
            inbox; nothing changed, and the run goes on from its last checkpoint.
        RunCancelledError: the run was cancelled meanwhile.
    """
    waits = run.waits
    due = due_deadlines(waits, run.clock.now())
    if not due:
        return
    ledger = run.ledger
    if ledger is not None:
        requests = [(s.wait.key, s.wait.due_at) for s in due if s.wait.kind == "request"]
        read = await ledger.expire([(key, at) for key, at in requests if at is not None])
        apply_inbox(run, read)
        # A request whose answer the store kept but which is not in the inbox was
        # answered on another branch of the run's history (a resume from an older
        # checkpoint): the store refuses every other answer, so it times out here.
    for suspension in due:
        if any(s is suspension for s in run.waits.suspended):  # not answered just now
            run.deliver(*time_out(run.waits, suspension))


def apply_inbox(run: RunLoop, read: InboxRead) -> None:
    """Apply what the owner read from the inbox: answers, timeouts, session messages.

    An item that no longer fits (its request was answered on another
    branch, nobody waits for input) is dropped: it is marked applied all
    the same, so nobody reads it again.
    """
    for request_id, value in read.answers.items():
        try:
            run.answer(request_id, value)
        except RequestError:
            continue
    expire_requests(run, read.expired)
    for message, target in read.inputs:
        try:
            run.send_input(message, target)
        except RequestError:
            continue


def refuse_unanswerable(run: RunLoop) -> None:
    """Fail a run with no store that would rest on what only a store lets anyone answer.

    Called after every barrier; it looks further only when the run has nothing
    left to handle and nowhere to rest (no store: it sleeps through timers). A
    run that asked for a resting result (``rest_without_store``) rests instead.

    Raises:
        UnanswerableWaitError: it waits for an answer, an approval or input.
    """
    if run.pending or not run.options.sleep_through_timers:
        return
    waits = run.waits
    # With background work pending it is not resting yet: checked again once that reports.
    if run.options.rest_without_store or run.spawned or not waits.awaits_input:
        return
    waiting = [(r.executor_id, r.request_id) for r in waits.pending_requests()]
    waiting.extend((s.executor_id, s.wait.key) for s in waits.suspended if s.wait.kind == "input")
    raise UnanswerableWaitError(run.run_id, waiting)
