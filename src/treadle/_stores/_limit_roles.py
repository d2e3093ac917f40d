"""The store's role for call limits: slots counted where every process sees them.

A call limit (``CallLimit``) shared by several processes is counted in the
run store, so the processes of one SQLite file and the workers of one
PostgreSQL database share its slots. Each call waiting for a slot is a row
in its limit's *line*, entered under its run's lease (a write fenced like a
commit: a process that lost the lease enters nothing). The row keeps the
call's place across restarts: a run taken over after a crash enters the
same call again (its id names the run, superstep, executor and message)
and finds its place where it left it.

Whoever asks the store to *admit* grants the free slots to the calls at the
head of the line (by priority, then by turns across keys, then by arrival),
whichever process they wait in: each process learns of its own calls'
grants when it next asks (:attr:`Admission.granted`). A slot counts as held
only while the lease it was taken under is current: a killed worker's slots
come back when its leases run out, and a release under an older lease
(a presumed-dead holder) changes nothing.

The limit's terms travel with every call (:class:`LimitTerms`): the store
keeps no declarations, so a process that changes a limit's numbers is
obeyed from its next call on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._records import Lease


@dataclass(frozen=True, slots=True)
class LimitTerms:
    """A limit's numbers, as the store counts them.

    Attributes:
        name: The limit.
        concurrency: Most slots held at once (``None``: no cap).
        calls: Most slots granted in any window of ``per`` seconds (``None``: no cap).
        per: The rate's window, in seconds.
        tokens: Most cost (tokens) granted in any window of ``tokens_per``
            seconds, each call counted for its entry's ``cost`` until its
            release says what it used (``None``: no budget).
        tokens_per: The token budget's window, in seconds.
    """

    name: str
    concurrency: int | None = None
    calls: int | None = None
    per: float = 0.0
    tokens: int | None = None
    tokens_per: float = 0.0

    @property
    def window(self) -> float:
        """How long a granted call is remembered: the longer of the rate's and the budget's."""
        return max(
            self.per if self.calls is not None else 0.0,
            self.tokens_per if self.tokens is not None else 0.0,
        )


@dataclass(frozen=True, slots=True)
class SlotEntry:
    """A call entering its limit's line.

    Attributes:
        call_id: The call (the same every time its run tries it again).
        key: Who it is made for: turns are taken by key.
        priority: Higher is served first.
        cost: What it uses of the limit (1: one call).
    """

    call_id: str
    key: str = ""
    priority: int = 0
    cost: float = 1.0


class Admission(NamedTuple):
    """What asking a limit's line found.

    Attributes:
        granted: The calls entered by the asking gate that hold a slot now
            and had not been told so (each is told once).
        next_at: When the rate or a slow-down lets the next call start
            (Unix seconds; ``None``: when a slot is released).
    """

    granted: tuple[str, ...]
    next_at: float | None


@dataclass(frozen=True, slots=True)
class LineWait:
    """One call of a run waiting in a limit's line, as ``treadle show`` reports it.

    Attributes:
        run_id: The run.
        limit: The limit.
        call_id: The call.
        key: Its key.
        position: Calls ahead of it in the line (0: next).
        entered_at: When it entered the line (Unix seconds).
        next_slot_at: When a slot is next expected (``None``: at a release).
    """

    run_id: str
    limit: str
    call_id: str
    key: str
    position: int
    entered_at: float
    next_slot_at: float | None


def within_budget(
    terms: LimitTerms, costs: Sequence[float], spent: Sequence[Sequence[float]]
) -> tuple[int, float | None]:
    """How many of the head of a line (``costs``, in order) the token budget lets start now.

    ``spent`` holds ``(granted_at, cost)`` of the calls granted inside the
    budget's window, oldest first. A call whose cost does not fit stops the
    line (those behind it do not overtake it); the second value says when
    enough of the window's spending will have left it for that call
    (``None``: every call fits, or its cost is more than the whole budget).
    """
    assert terms.tokens is not None  # noqa: S101 - only a budgeted limit asks
    room = terms.tokens - sum(cost for _, cost in spent)
    for fit, cost in enumerate(costs):
        if cost > room:
            short = cost - room
            for granted_at, used in spent:  # the oldest leave the window first
                short -= used
                if short <= 0:
                    return fit, granted_at + terms.tokens_per
            return fit, None
        room -= cost
    return len(costs), None


@runtime_checkable
class LimitSlots(Protocol):
    """How calls of many processes share the slots of call limits."""

    async def take_slot(
        self, terms: LimitTerms, entry: SlotEntry, lease: Lease, gate: str
    ) -> Admission:
        """Enter ``entry`` in its line under ``lease`` (keeping its place there), then admit.

        ``gate`` names the asking process's gate: :attr:`Admission.granted`
        holds its calls.

        Raises:
            LeaseLostError: ``lease`` is not current (nothing was entered).
        """
        ...

    async def admit_slots(self, terms: LimitTerms, gate: str) -> Admission:
        """Grant free slots to the head of the line; which of ``gate``'s calls hold one now."""
        ...

    async def release_slot(
        self, terms: LimitTerms, call_id: str, lease: Lease, gate: str, used: float | None = None
    ) -> Admission:
        """Give a slot back (only under the lease it was taken with), then admit.

        ``used``: what the call used of a token budget (its cost until then).
        """
        ...

    async def leave_line(self, limit: str, call_id: str, lease: Lease) -> None:
        """Take a call that stopped waiting (cancelled) out of the line, under its lease."""
        ...

    async def slow_limit(self, limit: str, until: float) -> None:
        """Grant no slot of ``limit`` before ``until`` (a provider's ``Retry-After``)."""
        ...

    async def line_waits(self, run_ids: Sequence[str]) -> list[LineWait]:
        """What the calls of ``run_ids`` wait for, with their places in line."""
        ...
