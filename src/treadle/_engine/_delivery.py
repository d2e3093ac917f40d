"""Stamps, inboxes and fan-in buffers: the pure half of the barrier.

No asyncio and no I/O here. Given what the invocations of superstep N sent,
in (rank, inbox position) order, these functions build the inboxes of
superstep N+1 and the new fan-in buffers. Because invocations are visited in
stamp order and each one's sends in send order, the inboxes come out sorted
without a sort; only a target that also completes a fan-in needs one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, TypeAlias

from treadle._engine._slots import blank as _blank

if TYPE_CHECKING:
    from treadle._graph._edges import FanInEdge

Stamp: TypeAlias = tuple[int, int, int, int]
"""(superstep sent in, source rank, source inbox position, send sequence)."""

Outgoing: TypeAlias = tuple[str, int, Any, "HandoffContext | None"]
"""One routed send: (target id, fan-in index or -1, payload, handoff)."""


@dataclass(frozen=True, slots=True)
class HandoffContext:
    """Who handed control to this executor, and why.

    Available to the receiving handler as ``ctx.handoff_context``.
    """

    source: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class HandoffRefused:
    """Sent back to an executor whose handoff was refused by a human.

    Attributes:
        target: Where it wanted to hand off.
        payload: What it wanted to hand over.
        reason: The reason it gave.
    """

    target: str
    payload: Any
    reason: str | None = None


class Envelope:
    """A message in flight, with the stamp that fixes its delivery order."""

    __slots__ = ("handoff", "journal", "payload", "source", "stamp")

    def __init__(
        self,
        stamp: Stamp,
        source: str,
        payload: Any,
        handoff: HandoffContext | None = None,
        journal: list[Any] | None = None,
    ) -> None:
        self.stamp = stamp
        self.source = source
        self.payload = payload
        self.handoff = handoff
        # For a message re-delivered after a durable wait: the journal of the
        # suspended invocation (see _engine/_waits.py).
        self.journal = journal

    def __repr__(self) -> str:
        return f"Envelope({self.stamp}, {self.source!r}, {self.payload!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Envelope) and (
            self.stamp,
            self.source,
            self.payload,
            self.handoff,
            self.journal,
        ) == (other.stamp, other.source, other.payload, other.handoff, other.journal)

    __hash__ = None  # type: ignore[assignment] # payloads may be unhashable


FanInBuffer: TypeAlias = Mapping[str, tuple[Envelope, ...]]
"""What one fan-in holds so far: source id → its envelopes, oldest first."""


SentBy: TypeAlias = tuple[str, int, int, Sequence[Outgoing]]
"""What one finished invocation sent: (source id, rank, inbox position, sends)."""


def build_inboxes(
    superstep: int,
    sent: Iterable[SentBy],
    fan_in_edges: Sequence[FanInEdge],
    buffers: tuple[FanInBuffer, ...],
    ranks: Mapping[str, int],
) -> tuple[dict[str, list[Envelope]], tuple[FanInBuffer, ...]]:
    """Route one superstep's sends into the next superstep's inboxes.

    ``sent`` must be in (rank, position) order. Returns the inboxes (each
    sorted by stamp) and the fan-in buffers after this superstep; buffers not
    touched are returned as the same objects (copy on write).
    """
    inboxes: dict[str, list[Envelope]] = {}
    fanned_in: dict[int, list[_FanInSend]] | None = None
    for source, rank, position, outgoing in sent:
        for seq, (target, fan_in, payload, handoff) in enumerate(outgoing):
            if fan_in < 0:
                # Built slot by slot: a class with a Python __init__ is called the
                # slow way, and every message passes here.
                envelope: Any = _blank(Envelope)
                envelope.stamp = (superstep, rank, position, seq)
                envelope.source = source
                envelope.payload = payload
                envelope.handoff = handoff
                envelope.journal = None
                inboxes.setdefault(target, []).append(envelope)
                continue
            # Into a fan-in: its stamp is made only if it needs an envelope of its own.
            send = (source, rank, position, seq, payload, handoff)
            if fanned_in is None:
                fanned_in = {fan_in: [send]}
            elif (sends := fanned_in.get(fan_in)) is None:
                fanned_in[fan_in] = [send]
            else:
                sends.append(send)
    if fanned_in is None:
        return inboxes, buffers
    new_buffers = list(buffers)
    for index, sends in fanned_in.items():
        edge = fan_in_edges[index]
        delivery, new_buffers[index] = _fill(superstep, edge, buffers[index], sends, ranks)
        if delivery is not None:
            box = inboxes.setdefault(edge.target, [])
            box.append(delivery)
            if len(box) > 1:
                box.sort(key=_STAMP)
    return inboxes, tuple(new_buffers)


_FanInSend: TypeAlias = tuple[str, int, int, int, Any, "HandoffContext | None"]
"""One send into a fan-in: (source id, rank, position, sequence, payload, handoff)."""


def _fill(
    superstep: int,
    edge: FanInEdge,
    buffer: FanInBuffer,
    sends: list[_FanInSend],
    ranks: Mapping[str, int],
) -> tuple[Envelope | None, FanInBuffer]:
    """Add one superstep's sends (in stamp order) to a fan-in's buffer.

    Returns the envelope to deliver if that fills it (the buffer is then
    empty), else ``None`` and the buffer with the sends added.
    """
    if not buffer and set(map(_SOURCE, sends)).issuperset(edge.sources):
        # Filled at once (a fan-out's branches, say): the sends are already in
        # source rank then stamp order, and none needs an envelope of its own.
        source, rank, position, seq, _, _ = sends[-1]
        payloads = list(map(_PAYLOAD, sends))
        return Envelope((superstep, rank, position, seq), source, payloads), {}
    filled = dict(buffer)
    for source, rank, position, seq, payload, handoff in sends:
        envelope = Envelope((superstep, rank, position, seq), source, payload, handoff)
        filled[source] = (*filled.get(source, ()), envelope)
    # A buffer holds only its sources, each with at least one envelope: count first.
    if len(filled) >= len(edge.sources) and all(filled.get(s) for s in edge.sources):
        return _fan_in_envelope(edge, filled, ranks), {}
    return None, filled


def _fan_in_envelope(edge: FanInEdge, buffer: FanInBuffer, ranks: Mapping[str, int]) -> Envelope:
    """One list of everything buffered, ordered by source rank then stamp."""
    ordered = [
        envelope
        for source in sorted(edge.sources, key=ranks.__getitem__)
        for envelope in buffer[source]
    ]
    last = max(ordered, key=_STAMP)
    return Envelope(last.stamp, last.source, [e.payload for e in ordered])


_STAMP: Callable[[Envelope], Stamp] = attrgetter("stamp")
_SOURCE: Callable[[_FanInSend], str] = itemgetter(0)
_PAYLOAD: Callable[[_FanInSend], Any] = itemgetter(4)


@dataclass(frozen=True, slots=True)
class StalledFanIn:
    """A fan-in that can never fill: the run has nothing else left to do.

    Attributes:
        target: The executor the fan-in delivers to.
        waiting_for: Sources that have not sent yet, in rank order.
        received_from: Sources whose messages are buffered.
    """

    target: str
    waiting_for: tuple[str, ...]
    received_from: tuple[str, ...]


def stalled_fan_ins(
    fan_in_edges: Sequence[FanInEdge], buffers: tuple[FanInBuffer, ...], ranks: Mapping[str, int]
) -> list[StalledFanIn]:
    """The partly filled fan-ins, for reporting a ``STALLED`` run."""
    stalled: list[StalledFanIn] = []
    for edge, buffer in zip(fan_in_edges, buffers, strict=True):
        if not buffer:
            continue
        sources = sorted(edge.sources, key=ranks.__getitem__)
        stalled.append(
            StalledFanIn(
                target=edge.target,
                waiting_for=tuple(s for s in sources if not buffer.get(s)),
                received_from=tuple(s for s in sources if buffer.get(s)),
            )
        )
    return stalled
