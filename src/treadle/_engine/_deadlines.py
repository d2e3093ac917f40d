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

The loop finds what is due (:func:`due_deadlines`), asks the ledger, and
hands what it read and the timeouts to ``_engine/_arrivals.py`` as
arrivals; nothing here changes a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from treadle._engine._errors import UnanswerableWaitError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._engine._barrier import BarrierState
    from treadle._engine._delivery import Envelope
    from treadle._engine._env import RunEnv
    from treadle._engine._waits import Suspension, WaitBook


ANSWERED_KINDS = ("request", "input")
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
        if s.wait.due_at is not None and s.wait.due_at <= now and s.wait.kind in ANSWERED_KINDS
    ]
    return sorted(due, key=lambda s: s.envelope.stamp)


def time_out(waits: WaitBook, suspension: Suspension) -> tuple[str, Envelope]:
    """Remove ``suspension`` and return its re-delivery, the timeout in its journal."""
    waits.suspended = tuple(s for s in waits.suspended if s is not suspension)
    envelope = suspension.envelope
    wait = suspension.wait
    journal = [*suspension.journal, ("timeout", wait.replay_key or wait.key, wait.due_at)]
    return suspension.executor_id, type(envelope)(
        envelope.stamp, envelope.source, envelope.payload, envelope.handoff, journal
    )


def refuse_unanswerable(env: RunEnv, point: BarrierState, working: object) -> None:
    """Fail a run with no store that would rest on what only a store lets anyone answer.

    Called after every barrier, with ``point`` the new committed point; it
    looks further only when the run has nothing left to handle and nowhere
    to rest (no store: it sleeps through timers). A run that asked for a
    resting result (``rest_without_store``) rests instead; one with
    background work under way (``working``, true then) is not resting
    yet: checked again once that reports.

    Raises:
        UnanswerableWaitError: it waits for an answer, an approval or input.
    """
    options = env.options
    if point.pending or not options.sleep_through_timers:
        return
    waits = point.waits
    if options.rest_without_store or working or not waits.awaits_input:
        return
    waiting = [(r.executor_id, r.request_id) for r in waits.pending_requests()]
    waiting.extend((s.executor_id, s.wait.key) for s in waits.suspended if s.wait.kind == "input")
    raise UnanswerableWaitError(env.run_id, waiting)
