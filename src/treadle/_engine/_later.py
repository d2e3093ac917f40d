"""Work an invocation leaves for later: scheduled messages' handles, cancelling them, continuing.

``ctx.schedule_message`` returns a :class:`ScheduledHandle` whose ``key`` is
stable (derived from the run, the executor, the message's stamp and the
call's position in the invocation, like a request id), so the handle can be
kept in state and cancelled by a later invocation with
``ctx.cancel_scheduled``. ``ctx.continue_later`` raises
:class:`ContinueLater`, which ends the invocation as if its handler had
returned; the barrier then delivers the same message to the same executor
again, as a new invocation: next superstep, or after a delay, as a durable
timer.

Both take effect at the invocation's barrier (:func:`commit_later_work`),
together with everything else it did, or not at all: a suspended or failed
invocation cancels nothing and does not continue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._engine._waits import ScheduledMessage

if TYPE_CHECKING:
    from treadle._engine._delivery import Envelope
    from treadle._engine._invocation import Invocation, LaterWork
    from treadle._engine._waits import WaitBook


@dataclass(frozen=True, slots=True)
class ScheduledHandle:
    """A message scheduled with ``ctx.schedule_message``, to cancel with ``ctx.cancel_scheduled``.

    A plain value: keep it (or its ``key``) in shared state, and any later
    invocation of the run, in any process, can cancel the message until it
    is delivered.

    Attributes:
        key: The scheduled message's id, unique within the run and the same
            on every re-execution of the invocation that scheduled it.
        due_at: When it falls due (seconds since the epoch).
        targets: The executors it goes to.
    """

    key: str
    due_at: float
    targets: tuple[str, ...]


class ContinueLater(BaseException):
    """Raised by ``ctx.continue_later`` to end the invocation early; never exported.

    A ``BaseException``, like the suspension of a durable wait, so that a
    handler's ``except Exception`` cannot swallow it. The invocation's
    ``LaterWork`` already holds when to continue.
    """


def commit_later_work(
    waits: WaitBook,
    inboxes: dict[str, list[Envelope]],
    invocation: Invocation,
    later: LaterWork,
    seq: int,
) -> None:
    """Apply a committed invocation's cancellations and its continuation.

    ``waits`` and ``inboxes`` are the barrier's own, new ones (see
    ``_engine/_commit.py``). ``seq`` is the invocation's next free send
    sequence: a continuation takes it, so it is ordered like a message the
    executor sent itself at this barrier, and gets a stamp (and so an
    idempotency key and wait ids) of its own.
    """
    if later.cancelled:
        cancelled = set(later.cancelled)
        waits.scheduled = tuple(m for m in waits.scheduled if m.key not in cancelled)
    if later.continuing:
        envelope = invocation.envelope
        again = type(envelope)(
            (invocation.superstep, invocation.rank, invocation.position, seq),
            envelope.source,
            envelope.payload,
            envelope.handoff,
        )
        executor_id = invocation.executor.id
        if later.continue_at is None:
            box = inboxes.setdefault(executor_id, [])
            box.append(again)
            box.sort(key=lambda e: e.stamp)
        else:
            again_later = ScheduledMessage(later.continue_at, executor_id, again)
            waits.scheduled = (*waits.scheduled, again_later)
