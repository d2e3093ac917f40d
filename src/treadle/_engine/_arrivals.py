"""What reaches a run from outside its supersteps, as typed values, applied by one function.

Answers, session input, timeouts, timers falling due and background work
finishing all arrive between supersteps. Each is one small value here;
:func:`apply_arrivals` is the one place they enter the run's committed
point (as a single activation dispatcher does): the loop gathers them at
the top of a superstep (and the run's opener, those it was opened with)
and hands them over. Pure: it returns the next point and mutates nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from treadle._engine._barrier import BarrierState, with_arrivals
from treadle._engine._deadlines import ANSWERED_KINDS as _ANSWERED
from treadle._engine._deadlines import time_out
from treadle._engine._delivery import Envelope
from treadle._exceptions import RequestError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from treadle._engine._deadlines import InboxRead
    from treadle._engine._env import RunEnv
    from treadle._engine._spawn import SpawnResult
    from treadle._engine._waits import NestedRequest, Suspension, WaitBook

SPAWN_SOURCE = "__spawn__"
"""The ``source`` of envelopes carrying ``SpawnResult`` messages."""

INPUT_SOURCE = "__input__"
"""The ``source`` of envelopes carrying input from outside: the run's, or a session's."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to a pending request (or a handoff approval).

    ``strict``: a request that no longer waits is an error (``respond``);
    else the answer is dropped (the store kept it, and it fits no more).
    """

    request_id: str
    value: Any
    strict: bool = True


@dataclass(frozen=True, slots=True)
class SessionInput:
    """A session message for the invocation waiting for input (at ``target``, if given)."""

    message: Any
    target: str | None = None
    strict: bool = True


@dataclass(frozen=True, slots=True)
class TurnInput:
    """A session message that meets a running turn: merged into it, or interrupting it.

    Delivered to ``target`` as a message from ``__input__`` in the next
    superstep. With ``interrupt``, the turn's pending work is dropped first:
    every pending message, every wait but those for input, every handoff
    awaiting approval (what the turn committed stays).
    """

    message: Any
    target: str
    stamp: tuple[int, int, int, int]
    interrupt: bool = False


@dataclass(frozen=True, slots=True)
class Expiry:
    """Waits timed out, by key: their deadline passed, or the store kept their timeout.

    A key that no longer waits (answered first) is skipped.
    """

    keys: frozenset[str]


@dataclass(frozen=True, slots=True)
class TimerDue:
    """The clock reached ``now``: timers and scheduled messages due by then fire."""

    now: float


@dataclass(frozen=True, slots=True)
class SpawnDone:
    """Background work of ``executor_id`` ended (or was lost with its process)."""

    executor_id: str
    result: SpawnResult


Arrival: TypeAlias = "Answer | SessionInput | TurnInput | Expiry | TimerDue | SpawnDone"


def inbox_arrivals(read: InboxRead) -> list[Arrival]:
    """What the owner read from the run's inbox: answers, timeouts, session messages.

    An item that no longer fits (its request was answered on another
    branch, nobody waits for input) is dropped when applied: it is marked
    applied all the same, so nobody reads it again.
    """
    arrivals: list[Arrival] = [
        Answer(rid, value, strict=False) for rid, value in read.answers.items()
    ]
    if read.expired:
        arrivals.append(Expiry(read.expired))
    arrivals.extend(SessionInput(message, target, strict=False) for message, target in read.inputs)
    return arrivals


def apply_arrivals(env: RunEnv, point: BarrierState, arrivals: Iterable[Arrival]) -> BarrierState:
    """The committed point with ``arrivals`` applied, in order: what they deliver is pending.

    Raises:
        UnknownRequestError: a strict answer's request is not waiting.
        InvalidResponseError: a strict answer does not have the asked type.
        RequestError: strict session input, and nothing waits for input.
    """
    waits = point.waits.copy()
    pending = {target: list(inbox) for target, inbox in point.pending.items()}
    for arrival in arrivals:
        if isinstance(arrival, TurnInput) and arrival.interrupt:
            pending.clear()
            waits.suspended = tuple(s for s in waits.suspended if s.wait.kind == "input")
            waits.approvals = ()
        for executor_id, envelope in _deliveries(env, point, waits, arrival):
            box = pending.setdefault(executor_id, [])
            box.append(envelope)
            if len(box) > 1:
                box.sort(key=lambda e: e.stamp)
    return with_arrivals(point, pending, waits)


def _deliveries(
    env: RunEnv, point: BarrierState, waits: WaitBook, arrival: Arrival
) -> list[tuple[str, Envelope]]:
    """What one arrival delivers, ``waits`` updated for it."""
    if isinstance(arrival, TimerDue):
        return waits.take_due(arrival.now)
    if isinstance(arrival, SpawnDone):
        stamp = (point.superstep, env.ranks[arrival.executor_id], -1, 0)
        return [(arrival.executor_id, Envelope(stamp, SPAWN_SOURCE, arrival.result))]
    if isinstance(arrival, TurnInput):
        return [(arrival.target, Envelope(arrival.stamp, INPUT_SOURCE, arrival.message))]
    if isinstance(arrival, Expiry):
        keys = arrival.keys
        due = [s for s in waits.suspended if s.wait.key in keys and s.wait.kind in _ANSWERED]
        return [time_out(waits, s) for s in sorted(due, key=lambda s: s.envelope.stamp)]
    try:
        if isinstance(arrival, Answer):
            waiting = waits.find_request(arrival.request_id)
            value = env.workflow.check_answer(arrival.request_id, waiting, arrival.value)
        else:
            waiting, value = _input_waiter(env, point, waits, arrival), arrival.message
    except RequestError:
        if arrival.strict:
            raise
        return []
    delivery = waits.answer(waiting, value)
    # None: a sub-workflow's invocation re-delivered already.
    return [delivery] if delivery is not None else []


def _input_waiter(
    env: RunEnv, point: BarrierState, waits: WaitBook, arrival: SessionInput
) -> Suspension | NestedRequest:
    """The invocation that takes ``arrival``.

    Raises:
        RequestError: nothing in the run waits for input.
    """
    found = waits.input_waiter(arrival.target)
    if found is None:
        where = f"executor {arrival.target!r} of run" if arrival.target else "run"
        msg = f"{where} {env.run_id!r} is not waiting for input ({point.status.value})"
        raise RequestError(msg)
    return found
