"""``MemoryStore``'s part for call limits: the lines of ``_stores/_limit_roles.py`` in dicts.

The same rules as the SQL stores' (``_stores/_sql_limits.py``), applied
under the store's lock: a slot counts while the lease it was taken under
is current; the head of a line is its highest priority, then its lowest
turn, then its earliest arrival.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from treadle._exceptions import LeaseLostError
from treadle._stores._limit_roles import Admission, LineWait, within_budget
from treadle._stores._sql_ownership import ENDED_STATUSES

if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence

    from treadle._stores._limit_roles import LimitTerms, SlotEntry
    from treadle._stores._memory_ownership import MemoryRun
    from treadle._stores._records import Lease


@dataclass(slots=True)
class _Row:
    call_id: str
    run_id: str
    epoch: int
    key: str
    priority: int
    turn: int
    arrival: int
    cost: float
    entered_at: float
    gate: str
    granted_at: float | None = None
    released_at: float | None = None
    noticed: bool = False

    def order(self) -> tuple[int, int, int]:
        return (-self.priority, self.turn, self.arrival)


@dataclass(slots=True)
class _Line:
    rows: dict[str, _Row] = field(default_factory=dict)
    arrivals: int = 0
    serving: int = 0
    paused_until: float = 0.0
    terms: LimitTerms | None = None  # as last used

    def next_slot_at(self, now: float) -> float | None:
        """When the rate or a slow-down next lets a call start (``None``: at a release)."""
        terms = self.terms
        at: float | None = None
        if terms is not None and terms.calls is not None:
            recent = sorted(
                r.granted_at
                for r in self.rows.values()
                if r.granted_at is not None and r.granted_at > now - terms.per
            )
            if len(recent) >= terms.calls:
                at = recent[len(recent) - terms.calls] + terms.per
        if self.paused_until > now:
            at = max(at or 0.0, self.paused_until)
        return at


class MemoryLimits(ABC):
    """What the store port asks of ``MemoryStore`` about call limits."""

    _runs: dict[str, MemoryRun]
    _lock: threading.RLock
    _lines_made: dict[str, _Line] | None = None  # made on first use, by the store's instance

    @property
    def _limit_lines(self) -> dict[str, _Line]:
        lines = self._lines_made
        if lines is None:
            lines = self._lines_made = {}
        return lines

    async def take_slot(
        self, terms: LimitTerms, entry: SlotEntry, lease: Lease, gate: str
    ) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.take_slot`."""
        with self._lock:
            now = time.time()
            if not self._current(lease.run_id, lease.epoch, now):
                raise LeaseLostError(lease.run_id, lease.epoch)
            line = self._limit_lines.setdefault(terms.name, _Line())
            row = line.rows.get(entry.call_id)
            if row is not None and (row.released_at is not None or row.epoch != lease.epoch):
                # Tried again, or its run taken over: it waits again, in the place it had,
                # and its earlier grant counts against the rate until it ages out.
                if row.granted_at is not None and row.granted_at > now - terms.window:
                    kept = f"{entry.call_id}#{now!r}"
                    line.rows[kept] = dataclasses.replace(
                        row, call_id=kept, released_at=row.released_at or now, noticed=True
                    )
                row.epoch, row.granted_at, row.released_at = lease.epoch, None, None
                row.gate, row.noticed, row.cost = gate, False, entry.cost
            elif row is None:
                waiting = [
                    r.turn
                    for r in line.rows.values()
                    if r.key == entry.key and r.granted_at is None
                ]
                turn = max(line.serving, max(waiting, default=-1) + 1)
                line.arrivals += 1
                line.rows[entry.call_id] = _Row(
                    entry.call_id,
                    lease.run_id,
                    lease.epoch,
                    entry.key,
                    entry.priority,
                    turn,
                    line.arrivals,
                    entry.cost,
                    now,
                    gate,
                )
            else:
                row.gate, row.noticed = gate, False  # held already: tell the gate again
            return self._admit(terms, line, gate, now)

    async def admit_slots(self, terms: LimitTerms, gate: str) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.admit_slots`."""
        with self._lock:
            line = self._limit_lines.setdefault(terms.name, _Line())
            return self._admit(terms, line, gate, time.time())

    async def release_slot(
        self, terms: LimitTerms, call_id: str, lease: Lease, gate: str, used: float | None = None
    ) -> Admission:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.release_slot`."""
        with self._lock:
            now = time.time()
            line = self._limit_lines.setdefault(terms.name, _Line())
            row = line.rows.get(call_id)
            if row is not None and row.epoch == lease.epoch and row.released_at is None:
                if row.granted_at is None:
                    del line.rows[call_id]
                else:
                    row.released_at = now
                    if used is not None:
                        row.cost = used
            return self._admit(terms, line, gate, now)

    async def leave_line(self, limit: str, call_id: str, lease: Lease) -> None:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.leave_line`."""
        with self._lock:
            line = self._limit_lines.get(limit)
            row = line.rows.get(call_id) if line is not None else None
            if row is not None and row.epoch == lease.epoch and row.granted_at is None:
                del line.rows[call_id]  # type: ignore[union-attr]

    async def slow_limit(self, limit: str, until: float) -> None:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.slow_limit`."""
        with self._lock:
            line = self._limit_lines.setdefault(limit, _Line())
            line.paused_until = max(line.paused_until, until)

    async def line_waits(self, run_ids: Sequence[str]) -> list[LineWait]:
        """See :meth:`~treadle._stores._limit_roles.LimitSlots.line_waits`."""
        wanted = set(run_ids)
        found: list[LineWait] = []
        with self._lock:
            now = time.time()
            for name, line in self._limit_lines.items():
                waiting = sorted(
                    (
                        r
                        for r in line.rows.values()
                        if r.granted_at is None and self._going_on(r.run_id)
                    ),
                    key=_Row.order,
                )
                for position, row in enumerate(waiting):
                    if row.run_id in wanted:
                        next_at = line.next_slot_at(now)
                        found.append(
                            LineWait(
                                row.run_id,
                                name,
                                row.call_id,
                                row.key,
                                position,
                                row.entered_at,
                                next_at,
                            )
                        )
        return found

    # -- the rules ------------------------------------------------------------------------
    def _going_on(self, run_id: str) -> bool:
        """Whether the run is there and has not ended (a call waiting for it may be served)."""
        run = self._runs.get(run_id)
        return run is not None and run.record.status not in ENDED_STATUSES

    def _current(self, run_id: str, epoch: int, now: float) -> bool:
        run = self._runs.get(run_id)
        return run is not None and run.epoch == epoch and run.record.owned(now)

    def _admit(self, terms: LimitTerms, line: _Line, gate: str, now: float) -> Admission:
        line.terms = terms
        rows = line.rows
        window = terms.per if terms.calls is not None else 0.0
        remembered = terms.window
        held = 0
        recent: list[float] = []
        spent: list[tuple[float, float]] = []
        for call_id, row in list(rows.items()):
            if row.granted_at is None:
                if not self._going_on(row.run_id):  # its run ended or is gone: it leaves
                    del rows[call_id]
                continue
            if row.released_at is None and not self._current(row.run_id, row.epoch, now):
                row.released_at = now  # its holder's lease is gone: the slot comes back
            if row.released_at is None:
                held += 1
            elif row.granted_at <= now - remembered:
                del rows[call_id]
                continue
            if terms.calls is not None and row.granted_at > now - window:
                recent.append(row.granted_at)
            if terms.tokens is not None and row.granted_at > now - terms.tokens_per:
                spent.append((row.granted_at, row.cost))
        free = terms.concurrency - held if terms.concurrency is not None else len(rows)
        if terms.calls is not None:
            free = min(free, terms.calls - len(recent))
        paused = line.paused_until > now
        tokens_at: float | None = None
        if free > 0 and not paused:
            waiting = sorted(
                (
                    r
                    for r in rows.values()
                    if r.granted_at is None and self._current(r.run_id, r.epoch, now)
                ),
                key=_Row.order,
            )[:free]
            if terms.tokens is not None:
                spent.sort()
                fit, tokens_at = within_budget(terms, [row.cost for row in waiting], spent)
                waiting = waiting[:fit]
            for row in waiting:
                row.granted_at = now
                line.serving = max(line.serving, row.turn)
                recent.append(now)
        next_at = line.next_slot_at(now)
        if tokens_at is not None:
            next_at = max(next_at or 0.0, tokens_at)
        granted = []
        for row in rows.values():
            held = row.granted_at is not None and row.released_at is None
            if held and row.gate == gate and not row.noticed:
                row.noticed = True
                granted.append(row.call_id)
        return Admission(tuple(granted), next_at)
