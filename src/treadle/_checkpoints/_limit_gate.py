"""Call limits counted in the run store: the gate of stored runs, shared by every process.

A stored run's calls wait for slots in their limit's line in the store
(:class:`~treadle._stores._limit_roles.LimitSlots`), entered under the
run's lease, so every process on the store (the processes of one SQLite
file, the workers of one PostgreSQL database) shares the same slots, and a
waiting call keeps its place when its run is taken over after a crash.

In one process, the calls waiting for one limit share one asker: the
first of them asks the store to admit calls, again whenever the rate lets
the next one start, or a short poll later when another process may have
released a slot; every grant it learns of resolves the future of the call
it is for, in whichever run. When the asker's own call is granted, another
waiting call takes its place. So a waiting call holds no thread, no task
and no poll of its own: its coroutine, its future and its row.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._engine._limiter import Slot, SlotWait
from treadle._exceptions import LeaseLostError
from treadle._stores._limit_roles import LimitSlots, LimitTerms, SlotEntry
from treadle._values._ids import random_bits

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from treadle._checkpoints._ownership import Ownership
    from treadle._engine._limiter import SlotRequest
    from treadle._graph._limits import CallLimit
    from treadle._stores._limit_roles import Admission

POLL = 0.05
"""Seconds between a line's asks while its calls wait on a release elsewhere."""

_LEAD: Any = object()  # what a waiting call's future is given when it is to ask for the line


def _led(future: asyncio.Future[Any]) -> bool:
    """Whether ``future`` was told to ask for its line (and has not asked yet)."""
    return future.done() and not future.cancelled() and future.result() is _LEAD


def terms_of(limit: CallLimit) -> LimitTerms:
    """A limit's numbers, as the store counts them."""
    rate = limit.window
    budget = limit.budget
    return LimitTerms(
        limit.name,
        limit.concurrency,
        rate.calls if rate is not None else None,
        rate.per if rate is not None else 0.0,
        budget.tokens if budget is not None else None,
        budget.per if budget is not None else 0.0,
    )


@dataclass(slots=True)
class _Line:
    """One limit's calls waiting in this process."""

    terms: LimitTerms
    waiting: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    requests: dict[str, SlotRequest] = field(default_factory=dict)
    early: dict[str, Slot] = field(default_factory=dict)  # granted before their caller looked
    asking: bool = False
    next_at: float | None = None
    # One change to the line in the store at a time from this process: the store
    # serializes them on the limit's row anyway, and calls queued here hold no
    # pooled connection (a worker's heartbeat must find one).
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


class StoreGate:
    """The slots of call limits kept in ``store``, waited for by the runs of this process.

    Args:
        store: A store that keeps limit slots.
        poll: Seconds between asks while calls wait on a release elsewhere.
    """

    def __init__(self, store: LimitSlots, poll: float = POLL) -> None:
        self.store = store
        self.poll = poll
        self.name = f"{socket.gethostname()}:{os.getpid()}:{random_bits(32):08x}"
        self._lines: dict[str, _Line] = {}

    def bound(self, ownership: Ownership) -> RunGate:
        """The gate of one run, whose calls enter lines under ``ownership``'s lease."""
        return RunGate(self, ownership)

    def waiting(self, limit: str) -> int:
        """How many calls of this process wait for ``limit`` now."""
        line = self._lines.get(limit)
        return 0 if line is None else len(line.waiting)

    # -- waiting ---------------------------------------------------------------------------
    def _line(self, limit: CallLimit) -> _Line:
        terms = terms_of(limit)
        line = self._lines.get(limit.name)
        if line is None:
            line = self._lines[limit.name] = _Line(terms)
        else:
            line.terms = terms
        return line

    async def acquire(self, request: SlotRequest, ownership: Ownership) -> Slot:
        """Enter the call in its line in the store; its slot once granted."""
        line = self._line(request.limit)
        call_id = request.call_id
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        line.waiting[call_id] = future
        line.requests[call_id] = request
        entry = SlotEntry(call_id, request.key, request.priority, request.cost)
        # Told to ask (its future was given _LEAD) and has neither asked, nor seen another
        # call asking, nor handed the duty on: while this holds, nobody else in the process
        # asks for the line, so every way out must hand the lead on.
        led = False
        try:
            try:
                admission = await self.store.take_slot(
                    line.terms, entry, ownership.lease, self.name
                )
            except LeaseLostError as lost:
                # The run is another's now (or nobody's until it is claimed again): this
                # process writes nothing more for it, not even that the call failed.
                ownership.detach(lost)
                raise
            self._hear(line, admission)
            while True:
                slot = line.early.pop(call_id, None)
                if slot is not None:
                    line.requests.pop(call_id, None)
                    line.waiting.pop(call_id, None)
                    if led or _led(future):
                        self._hand_on(line)  # it was told to ask: another call must now
                    return slot
                if not future.done():
                    led = False  # it asks now, or the call asking hands the lead on when done
                    if not line.asking:
                        line.asking = True
                        try:
                            await self._ask(line, future)
                        finally:
                            line.asking = False
                            self._hand_on(line)
                got = await future
                if got is not _LEAD:
                    line.requests.pop(call_id, None)
                    return got  # type: ignore[no-any-return]
                led = True
                future = line.waiting[call_id] = loop.create_future()
        except BaseException:
            await self._give_up(line, request, future, led or _led(future), ownership)
            raise

    async def _give_up(
        self,
        line: _Line,
        request: SlotRequest,
        future: asyncio.Future[Any],
        led: bool,
        ownership: Ownership,
    ) -> None:
        """Take a call that stops waiting out of its line (its slot back, if granted)."""
        call_id = request.call_id
        line.waiting.pop(call_id, None)
        line.requests.pop(call_id, None)
        if led and not line.asking:
            self._hand_on(line)  # told to ask, it gives up: another call must ask
        granted = line.early.pop(call_id, None)
        if granted is None and future.done() and not future.cancelled():
            got = future.result()
            granted = got if isinstance(got, Slot) else None
        with contextlib.suppress(Exception):
            if granted is not None:
                await self.release(granted, ownership)
            else:
                async with line.turn:
                    await self.store.leave_line(request.limit.name, call_id, ownership.lease)

    async def _ask(self, line: _Line, future: asyncio.Future[Any]) -> None:
        """Ask the store for the line until ``future`` (the asker's own call) is resolved."""
        while not future.done():
            now = time.time()
            # Another process may grant this line's calls at any time: ask at least each poll.
            pause = (
                self.poll if line.next_at is None else max(0.0, min(line.next_at - now, self.poll))
            )
            await asyncio.wait((future,), timeout=pause)
            if future.done():
                return
            async with line.turn:
                admitted = await self.store.admit_slots(line.terms, self.name)
            self._hear(line, admitted)

    def _hand_on(self, line: _Line) -> None:
        """Let another waiting call ask for the line (the asker's own was granted or gave up)."""
        for waiting in line.waiting.values():
            if not waiting.done():
                waiting.set_result(_LEAD)
                return

    def _hear(self, line: _Line, admission: Admission) -> None:
        """Resolve the futures of the calls the store granted."""
        line.next_at = admission.next_at
        now = time.time()
        for call_id in admission.granted:
            future = line.waiting.pop(call_id, None)
            request = line.requests.get(call_id)
            if future is None or request is None:
                continue  # it gave up meanwhile; its leaving (or its lease) frees the slot
            slot = Slot(request, now, request.cost)
            if future.done():
                line.early[call_id] = slot  # told to ask; it finds its slot first
            else:
                future.set_result(slot)

    async def release(self, slot: Slot, ownership: Ownership) -> None:
        """Give ``slot`` back in the store, then hand out what that freed."""
        line = self._line(slot.request.limit)
        async with line.turn:
            used = slot.used if line.terms.tokens is not None else None
            admission = await self.store.release_slot(
                line.terms, slot.request.call_id, ownership.lease, self.name, used
            )
        self._hear(line, admission)

    async def slow_down(self, limit: str, seconds: float) -> None:
        """Grant no slot of ``limit`` for ``seconds``, in every process."""
        await self.store.slow_limit(limit, time.time() + seconds)

    def waits(self, run_id: str) -> list[SlotWait]:
        """The calls of ``run_id`` waiting in this process (positions: ask the store)."""
        return [
            SlotWait(name, call_id, "", -1, line.next_at)
            for name, line in self._lines.items()
            for call_id in line.waiting
            if call_id.startswith(f"{run_id}/")
        ]


class RunGate:
    """One run's view of a :class:`StoreGate`: its calls enter lines under its lease."""

    __slots__ = ("_gate", "_ownership")

    def __init__(self, gate: StoreGate, ownership: Ownership) -> None:
        self._gate = gate
        self._ownership = ownership

    def acquire(self, request: SlotRequest) -> Awaitable[Slot]:
        """See :meth:`~treadle._engine._limiter.CallGate.acquire`."""
        return self._gate.acquire(request, self._ownership)

    def release(self, slot: Slot) -> Awaitable[None]:
        """See :meth:`~treadle._engine._limiter.CallGate.release`."""
        return self._gate.release(slot, self._ownership)

    def settle(self, slot: Slot, used: float) -> None:
        """See :meth:`~treadle._engine._limiter.CallGate.settle`."""
        slot.used = used

    def slow_down(self, limit: str, seconds: float) -> Awaitable[None]:
        """See :meth:`~treadle._engine._limiter.CallGate.slow_down`."""
        return self._gate.slow_down(limit, seconds)

    def waits(self, run_id: str) -> list[SlotWait]:
        """See :meth:`~treadle._engine._limiter.CallGate.waits`."""
        return self._gate.waits(run_id)


def stored_gate(store: object) -> StoreGate | None:
    """The gate of ``store``'s limit slots, if it keeps them."""
    return StoreGate(store) if isinstance(store, LimitSlots) else None
