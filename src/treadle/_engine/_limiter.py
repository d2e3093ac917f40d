"""Waiting for a slot of a call limit: the port, and the gate of one process.

An invocation of an executor that names call limits (``CallLimit``) asks
the run's :class:`CallGate` for a slot of each before its handler runs,
and gives them back when the attempt ends (``_engine/_handler_call.py``).
The gate decides *when* the handler runs; nothing it does reaches the
barrier, which orders everything by stamps (DESIGN §2), so a limited run
commits exactly what an unlimited one does.

:class:`LocalGate` serves the calls of one process: every run a driver (a
``Runtime``, a worker) or a workflow of its own drives shares it. A
store-backed gate (``_checkpoints/_limit_gate.py``) serves the same port
with the counting in the store, for calls of many processes.

Waiting costs a future and one small entry in a heap: no thread, no task,
no poll. The line is ordered by priority (higher first), then by *turn*:
each call is given the turn after the last one its key holds (and never
one before the turn being served now), so keys waiting together are
served one call each in turn (round robin) whatever their numbers; then by
arrival. A line blocked by its rate sets one timer, for the moment the
oldest start leaves the window, not one per waiter.

The shapes are built for what a call costs as well as for its count: a
request carries a ``cost`` (1 call; a token estimate for a token budget),
a :class:`Slot` can be ``settle``d with what the call really used, and a
limit can be told to ``slow_down`` (a provider's ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from treadle._graph._limits import CallLimit


@dataclass(frozen=True, slots=True)
class SlotRequest:
    """One call asking for a slot of one limit.

    Attributes:
        limit: The limit (its terms as the run sees them).
        call_id: The call's identity, the same every time its invocation is
            tried again or its run taken over (run, superstep, executor,
            message position): a store keeps its place in line by it.
        run_id: The run making the call.
        key: Who it is made for (turns are taken by key).
        priority: Higher is served first.
        cost: What it uses of the limit's budgets (1: one call).
    """

    limit: CallLimit
    call_id: str
    run_id: str
    key: str = ""
    priority: int = 0
    cost: float = 1.0


@dataclass(slots=True)
class Slot:
    """A slot held by one call, until its gate is given it back.

    Attributes:
        request: What was asked for.
        granted_at: When it was granted (the gate's clock, seconds).
        used: What the call is counted as having used (its cost until settled).
    """

    request: SlotRequest
    granted_at: float
    used: float = 1.0


@dataclass(frozen=True, slots=True)
class SlotWait:
    """What one waiting call waits for, as a run reports it.

    Attributes:
        limit: The limit's name.
        call_id: The waiting call.
        key: Its key.
        position: How many calls are ahead of it (0: it is next).
        next_slot_at: When a slot is next expected (Unix seconds), if known.
    """

    limit: str
    call_id: str
    key: str
    position: int
    next_slot_at: float | None = None


class CallGate(Protocol):
    """Where a run's invocations wait for slots of call limits.

    ``acquire`` answers at once with a :class:`Slot` when one is free, else
    with what to await for one: the gate of one process answers with a
    future it resolves when the call's turn comes (no coroutine of its own
    waits, so a waiting call costs a future and its place in line), a
    store's gate with a coroutine that enters the store's line. Cancelling
    the wait gives the place up.
    """

    def acquire(self, request: SlotRequest) -> Slot | Awaitable[Slot]:
        """A slot for ``request`` now, or what to await for one."""
        ...

    def release(self, slot: Slot) -> Awaitable[None] | None:
        """Give ``slot`` back (what to await, if giving it back takes a write)."""
        ...

    def settle(self, slot: Slot, used: float) -> None:
        """Count ``slot``'s call as having used ``used`` (a model's reported tokens)."""
        ...

    def slow_down(self, limit: str, seconds: float) -> Awaitable[None] | None:
        """Admit no call of ``limit`` for ``seconds`` (a provider asked to retry later)."""
        ...

    def waits(self, run_id: str) -> list[SlotWait]:
        """What ``run_id``'s calls wait for in this gate now."""
        ...


_Waiter: TypeAlias = "tuple[int, int, int, SlotRequest, asyncio.Future[Slot]]"
"""(-priority, turn, arrival, request, future): a waiting call, as its line's heap orders it."""


@dataclass(slots=True)
class _Line:
    """One limit's holders, recent starts and waiting calls in one process."""

    limit: CallLimit
    held: int = 0
    starts: deque[float] = field(default_factory=deque)
    heap: list[_Waiter] = field(default_factory=list)
    turns: dict[str, int] = field(default_factory=dict)  # key -> last turn given
    queued: dict[str, int] = field(default_factory=dict)  # key -> calls waiting
    serving: int = 0  # the turn of the last call granted
    paused_until: float = 0.0
    timer: asyncio.TimerHandle | None = None
    spent: deque[Slot] = field(default_factory=deque)  # granted inside the token window
    spent_total: float = 0.0  # what they used (their estimates until settled)

    def free_at(self, now: float, cost: float = 1.0) -> float | None:
        """When a call of ``cost`` may start (``now`` or later); ``None``: at a release."""
        limit = self.limit
        if limit.concurrency is not None and self.held >= limit.concurrency:
            return None
        at = max(now, self.paused_until)
        rate = limit.window
        if rate is not None:
            starts = self.starts
            while starts and starts[0] <= now - rate.per:
                starts.popleft()
            if len(starts) >= rate.calls:
                at = max(at, starts[len(starts) - rate.calls] + rate.per)
        if limit.tokens is not None:
            at = max(at, self._tokens_free_at(now, cost))
        return at

    def _tokens_free_at(self, now: float, cost: float) -> float:
        """When the calls started in the token window leave room for ``cost`` more."""
        budget = self.limit.budget
        assert budget is not None  # noqa: S101 - only a limit with tokens asks
        spent = self.spent
        while spent and spent[0].granted_at <= now - budget.per:
            self.spent_total -= spent.popleft().used
        if not spent:
            self.spent_total = 0.0  # no drift from the additions and subtractions
        over = self.spent_total + cost - budget.tokens
        if over <= 0:
            return now
        for slot in spent:  # the oldest leave the window first
            over -= slot.used
            if over <= 0:
                return slot.granted_at + budget.per
        return now  # cost alone exceeds the budget: refused before it waits (estimate_of)

    def count_tokens(self, slot: Slot, used: float) -> bool:
        """Count ``slot``'s call for ``used`` tokens; whether that gave room back."""
        spent = self.spent
        before = slot.used
        if spent and slot.granted_at >= spent[0].granted_at:  # still inside the window
            self.spent_total += used - before
        slot.used = used
        return used < before


class LocalGate:
    """The call limits of one process: counted here, waited for on futures.

    Times are the running event loop's (monotonic seconds).
    """

    def __init__(self) -> None:
        self._lines: dict[str, _Line] = {}
        self._seq = itertools.count()

    def _line(self, limit: CallLimit) -> _Line:
        line = self._lines.get(limit.name)
        if line is None:
            line = self._lines[limit.name] = _Line(limit)
        elif line.limit is not limit and line.limit != limit:
            line.limit = limit  # redeclared (a runtime's terms over a workflow's)
        return line

    def acquire(self, request: SlotRequest) -> Slot | asyncio.Future[Slot]:
        """See :meth:`CallGate.acquire`."""
        line = self._line(request.limit)
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not line.heap and line.free_at(now, request.cost) == now:
            return self._grant(line, request, now)
        key = request.key
        turn = max(line.serving, line.turns.get(key, -1) + 1)
        line.turns[key] = turn
        line.queued[key] = line.queued.get(key, 0) + 1
        future: asyncio.Future[Slot] = loop.create_future()
        heapq.heappush(line.heap, (-request.priority, turn, next(self._seq), request, future))
        self._wake_later(line, loop)
        return future

    def release(self, slot: Slot) -> None:
        """See :meth:`CallGate.release`."""
        line = self._lines.get(slot.request.limit.name)
        if line is None:
            return
        line.held -= 1
        if line.heap:
            self._admit(line, asyncio.get_running_loop())

    def settle(self, slot: Slot, used: float) -> None:
        """See :meth:`CallGate.settle`: a token budget counts ``used`` instead of the estimate."""
        line = self._lines.get(slot.request.limit.name)
        if line is None or line.limit.tokens is None:
            slot.used = used
            return
        if line.count_tokens(slot, used) and line.heap:
            self._admit(line, asyncio.get_running_loop())

    def slow_down(self, limit: str, seconds: float) -> None:
        """See :meth:`CallGate.slow_down`."""
        line = self._lines.get(limit)
        if line is None:
            return
        loop = asyncio.get_running_loop()
        line.paused_until = max(line.paused_until, loop.time() + seconds)
        self._wake_later(line, loop)

    def waits(self, run_id: str) -> list[SlotWait]:
        """See :meth:`CallGate.waits`; positions are worked out by sorting the line."""
        found: list[SlotWait] = []
        for line in self._lines.values():
            ordered = sorted(entry[:3] + entry[3:] for entry in line.heap if not entry[4].done())
            for position, (*_, request, _future) in enumerate(ordered):
                if request.run_id == run_id:
                    found.append(SlotWait(line.limit.name, request.call_id, request.key, position))
        return found

    def waiting(self, limit: str) -> int:
        """How many calls wait for ``limit`` now."""
        line = self._lines.get(limit)
        return 0 if line is None else sum(not entry[4].done() for entry in line.heap)

    def held(self, limit: str) -> int:
        """How many calls hold a slot of ``limit`` now."""
        line = self._lines.get(limit)
        return 0 if line is None else line.held

    # -- the line ---------------------------------------------------------------------
    def _grant(self, line: _Line, request: SlotRequest, now: float) -> Slot:
        line.held += 1
        limit = line.limit
        if limit.rate is not None:
            line.starts.append(now)
        slot = Slot(request, now, request.cost)
        if limit.tokens is not None:
            line.spent.append(slot)
            line.spent_total += request.cost
        return slot

    def _admit(self, line: _Line, loop: asyncio.AbstractEventLoop) -> None:
        """Grant the calls at the head of the line while slots are free."""
        heap = line.heap
        now = loop.time()
        while heap:
            _, turn, _, request, future = heap[0]
            if future.done():  # cancelled: its caller gave its place up
                heapq.heappop(heap)
                self._dequeued(line, request.key)
                continue
            if line.free_at(now, request.cost) != now:
                break
            heapq.heappop(heap)
            self._dequeued(line, request.key)
            line.serving = max(line.serving, turn)
            future.set_result(self._grant(line, request, now))
        self._wake_later(line, loop)

    def _wake_later(self, line: _Line, loop: asyncio.AbstractEventLoop) -> None:
        """Set the line's one timer for when its rate or pause next lets a call start."""
        if not line.heap:
            return
        now = loop.time()
        at = line.free_at(now, line.heap[0][3].cost)
        if at is None:
            return  # a release wakes it
        if at <= now:
            loop.call_soon(self._admit, line, loop)
            return
        if line.timer is not None and line.timer.when() <= at:
            return
        if line.timer is not None:
            line.timer.cancel()
        line.timer = loop.call_at(at, self._tick, line, loop)

    def _tick(self, line: _Line, loop: asyncio.AbstractEventLoop) -> None:
        line.timer = None
        self._admit(line, loop)

    @staticmethod
    def _dequeued(line: _Line, key: str) -> None:
        left = line.queued.get(key, 1) - 1
        if left:
            line.queued[key] = left
        else:
            line.queued.pop(key, None)
            line.turns.pop(key, None)


@dataclass(frozen=True, slots=True)
class Limiting:
    """A run's call limits: the gate its calls wait at, and each executor's limits.

    Attributes:
        gate: Where its invocations wait for slots.
        by_executor: Executor id -> the limits it runs under, in name order
            (every call takes its slots in one order, so two calls never
            each hold a slot the other waits for).
    """

    gate: CallGate
    by_executor: Mapping[str, tuple[CallLimit, ...]]
