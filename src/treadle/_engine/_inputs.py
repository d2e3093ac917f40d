"""Session input taken by a session's policy: which message starts a turn, which meet one.

A session that rests (an invocation waits in ``ctx.wait_for_input()`` and
no message is pending) takes the first message of its inbox as the start
of a turn. Every later message meets a turn running, and its policy says
what happens (:class:`~treadle._graph._input_policy.InputPolicy`). The
inbox is read in the store's order (each item's sequence number, decided
once by the store), and taken as a prefix: the owner stops at the first
message that must wait (queued for the next rest, or a debounce burst
not yet quiet), so whatever waits stays in the inbox, durable, and the
next owner finds it in the same place.

:func:`take_inputs` is pure: the loop reads the inbox through its
:class:`InputFeed` and hands what it read over, at every superstep
boundary and before the run rests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from treadle._engine._arrivals import SessionInput, TurnInput, apply_arrivals

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._engine._arrivals import Arrival
    from treadle._engine._barrier import BarrierState
    from treadle._engine._env import RunEnv
    from treadle._graph._input_policy import InputPolicy


@dataclass(frozen=True, slots=True)
class QueuedInput:
    """A session message in the run's inbox, with the policy it was sent under.

    Attributes:
        seq: Its place in the inbox (the store's order).
        message: The message.
        target: The executor it is for (``None``: the session's).
        policy: How it meets a running turn.
        at: When the store took it (epoch seconds).
    """

    seq: int
    message: Any
    target: str | None
    policy: InputPolicy
    at: float


class TurnRolledBack(BaseException):
    """A session message rolled the running turn back: the loop stops, its driver branches the run.

    Raised at a superstep boundary, before anything of the next superstep
    ran; the last barrier is the last the abandoned turn commits. Internal
    control flow (never exported): a handler's ``except Exception`` cannot catch it.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r}: a message rolled its running turn back")


FeedItem = tuple[int, "QueuedInput | Arrival"]
"""An inbox item as the feed reads it: its sequence number, and a message or an answer."""


class InputFeed(Protocol):
    """A session's inbox, as its owner reads it (``_checkpoints/_session_inbox.py``)."""

    async def unapplied(self) -> Sequence[FeedItem]:
        """The inbox items not applied yet, in the store's order."""
        ...

    def applied(self, seq: int | None, ahead: Sequence[int] = ()) -> None:
        """Mark the items up to ``seq`` applied with the run's next commit.

        ``ahead``: answers taken from behind a message that waits (see
        ``InputsTaken``), not handed over again.
        """
        ...

    def abandon(self, rollback: QueuedInput) -> None:
        """Hand a message that rolls the running turn back to the run's driver."""
        ...

    def now(self) -> float:
        """The clock the inbox's times are on (the store's)."""
        ...

    async def wait_until(self, at: float) -> None:
        """Sleep until ``at`` on that clock."""
        ...


@dataclass(frozen=True, slots=True)
class InputsTaken:
    """What :func:`take_inputs` took.

    Attributes:
        point: The committed point with what was taken applied.
        applied: The last sequence number taken (``None``: nothing).
        rollback: A message that abandons the running turn: the caller
            branches the run from where the turn began and delivers it there.
        quiet_at: A debounce burst waits until then for more messages.
        ahead: Answers and timeouts taken from behind a message that waits
            for the session's next rest (their sequence numbers): the turn
            they answer must end before that rest comes. They are marked
            applied only with the message (the store marks a prefix).
    """

    point: BarrierState
    applied: int | None = None
    rollback: QueuedInput | None = None
    quiet_at: float | None = None
    ahead: tuple[int, ...] = ()


def resting(point: BarrierState) -> bool:
    """Whether the session rests: nothing pending, and an invocation waits for input."""
    return not point.pending and point.waits.input_waiter(None) is not None


def take_inputs(
    env: RunEnv, point: BarrierState, items: Sequence[FeedItem], now: float
) -> InputsTaken:
    """Apply the prefix of ``items`` the session can take at ``point``, at time ``now``."""
    arrivals: list[Arrival] = []
    applied: int | None = None
    at_rest = resting(point)
    index = 0
    while index < len(items):
        seq, item = items[index]
        if not isinstance(item, QueuedInput):  # an answer or a timeout: applied in order
            arrivals.append(item)
            applied = seq
            index += 1
            continue
        kind = item.policy.kind
        if at_rest:
            # The invocation of ``target`` if it waits, else the first waiting: a message
            # the store accepted is never dropped for the executor it named.
            waiting = point.waits.input_waiter(item.target) is not None
            target = item.target if waiting else None
            if kind == "debounce":
                burst = _burst(items, index)
                last = burst[-1]
                after = index + len(burst)
                quiet = after < len(items) or now >= last.at + item.policy.window
                if not quiet:
                    return _taken(
                        env, point, arrivals, applied, quiet_at=last.at + item.policy.window
                    )
                messages = [queued.message for queued in burst]
                arrivals.append(SessionInput(messages, target, strict=False))
                applied, index = last.seq, after
            else:
                arrivals.append(SessionInput(item.message, target, strict=False))
                applied, index = seq, index + 1
            at_rest = False  # the turn it started is running now
            continue
        if kind in ("merge", "interrupt"):
            target = item.target or env.workflow.start_id
            stamp = (point.superstep, -1, 1, seq)
            arrivals.append(TurnInput(item.message, target, stamp, interrupt=kind == "interrupt"))
            applied, index = seq, index + 1
            continue
        if kind == "rollback":
            if arrivals:  # what came before it is taken first: it waits for the next boundary
                break
            return _taken(env, point, arrivals, applied, rollback=item)
        # Reject, enqueue, debounce: it waits for the session's next rest, and so do the
        # messages after it; an answer after it is taken now, as the turn may wait on it.
        ahead = [
            (seq, later) for seq, later in items[index + 1 :] if not isinstance(later, QueuedInput)
        ]
        arrivals.extend(later for _, later in ahead)
        return _taken(env, point, arrivals, applied, ahead=tuple(seq for seq, _ in ahead))
    return _taken(env, point, arrivals, applied)


def _burst(items: Sequence[FeedItem], index: int) -> list[QueuedInput]:
    """The debounced messages from ``index`` on, each less than the window after the one before."""
    first = items[index][1]
    assert isinstance(first, QueuedInput)  # noqa: S101 - the caller found one there
    burst = [first]
    for _, item in items[index + 1 :]:
        if not isinstance(item, QueuedInput) or item.policy.kind != "debounce":
            break
        if item.at - burst[-1].at >= first.policy.window:
            break
        burst.append(item)
    return burst


def _taken(
    env: RunEnv,
    point: BarrierState,
    arrivals: list[Arrival],
    applied: int | None,
    *,
    rollback: QueuedInput | None = None,
    quiet_at: float | None = None,
    ahead: tuple[int, ...] = (),
) -> InputsTaken:
    if arrivals:
        point = apply_arrivals(env, point, arrivals)
    return InputsTaken(point, applied, rollback, quiet_at, ahead)
