"""How a checkpoint's frame is laid out, and how every layout ever written is read.

Checkpoints of format 1, written before pieces existed, hold everything in
their frame. Format 2 named pieces and spelled out every field of the
frame, empty or not, and the run's id. Both still load.

A frame of format 3 (written now) is a JSON array, ``[3, fingerprint,
superstep, status, parts]``, where ``parts`` (left out when empty) holds,
under one letter each, only what is not empty: ``p`` pending messages,
``f`` fan-in buffers and ``w`` waits (while they are inline), ``r`` the
pieces holding those two once they are not, ``s`` state, ``o`` outputs and
``n`` snapshots (their pieces), ``i`` iteration counts, ``d`` the
deadline, ``x`` spawned work and ``c`` the outcome. A message's envelope
drops its trailing nulls and a wait book its empty lists, in frames and
pieces alike. The run's id is not in the frame: its seal is bound to it
(see :mod:`treadle._checkpoints._blob`). A run parked on a timer keeps two
frames of about a hundred bytes each, where format 2 took some 480: most
of what it costs to store (``idle_runs`` in ``benchmarks/``).

The iteration counts name every executor that ever ran, so a run of many
executors has a long table in every frame, of which a superstep changes
the counts of the few it ran. :func:`frame_text` writes the table from the
previous frame's text (:class:`CountsText`), each executor's count encoded
again only when it changed: a frame's encoding costs what the superstep
changed, not how many executors came before it.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._engine._barrier import BarrierState
from treadle._engine._counts import Counts
from treadle._engine._delivery import Envelope, FanInBuffer, HandoffContext
from treadle._engine._result import RunStatus
from treadle._engine._slots import blank, unfrozen_twin
from treadle._engine._spawn import SpawnRecord
from treadle._engine._waits import (
    HandoffApproval,
    NestedRun,
    ScheduledMessage,
    Suspension,
    Wait,
    WaitBook,
)
from treadle._values._serialization import dump_plain

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._checkpoints._delta import Manifest

FORMAT = 3
"""Version of the frame's layout (inside the sealed blob): 3 is compact (see above)."""
SPELLED_FORMAT = 2
"""The layout naming pieces with every field spelled out: still read."""
WHOLE_FORMAT = 1
"""The layout before pieces, every value in the frame: still read."""


def same(value: Any) -> Any:
    return value


def envelope_out(envelope: Envelope, enc: Callable[[Any], Any] = same) -> list[Any]:
    """An envelope as stored: its trailing nulls (no handoff, no journal) left out."""
    handoff = envelope.handoff
    journal = envelope.journal
    out = [list(envelope.stamp), envelope.source, enc(envelope.payload)]
    if handoff is not None or journal is not None:
        out.append(None if handoff is None else [handoff.source, handoff.reason])
    if journal is not None:
        out.append([[kind, name, enc(value)] for kind, name, value in journal])
    return out


_SHORT_ENVELOPE = 3  # stamp, source, payload: the nulls after them left out


def envelope_in(raw: list[Any]) -> Envelope:
    """A stored envelope, made slot by slot (see ``_engine/_slots.py``)."""
    if len(raw) < _SHORT_ENVELOPE + 2:
        raw = [*raw, None, None][: _SHORT_ENVELOPE + 2]
    stamp, source, payload, handoff, journal = raw
    s0, s1, s2, s3 = stamp
    made: Any = blank(Envelope)
    made.stamp = (s0, s1, s2, s3)
    made.source = source
    made.payload = payload
    made.handoff = None if handoff is None else HandoffContext(handoff[0], handoff[1])
    made.journal = None if journal is None else [tuple(entry) for entry in journal]
    envelope: Envelope = made
    return envelope


def fan_in_out(buffers: tuple[FanInBuffer, ...], enc: Callable[[Any], Any]) -> list[Any]:
    return [
        [
            [source, [envelope_out(e, enc) for e in envelopes]]
            for source, envelopes in buffer.items()
        ]
        for buffer in buffers
    ]


PART_NAMES = MappingProxyType({"fan_in": "fan-in buffers", "waits": "waits"})


def waits_out(waits: WaitBook, enc: Callable[[Any], Any]) -> dict[str, Any]:
    """A wait book as stored: its empty lists left out (a reader takes them as empty)."""
    book = {
        "suspended": [
            [
                s.executor_id,
                envelope_out(s.envelope, enc),
                [[kind, name, enc(value)] for kind, name, value in s.journal],
                _wait_out(s.wait, enc),
            ]
            for s in waits.suspended
        ],
        "scheduled": [  # the key (cancel_scheduled) last: checkpoints without it still load
            [m.due_at, m.target, envelope_out(m.envelope, enc), m.key] for m in waits.scheduled
        ],
        "answered": sorted(waits.answered),
        "approvals": [
            [a.key, a.source, a.target, envelope_out(a.envelope, enc)] for a in waits.approvals
        ],
        "nested": [[key, _nested_out(run, enc)] for key, run in waits.nested.items()],
        "saved": [
            [key, [[step, enc(value)] for step, value in steps.items()]]
            for key, steps in waits.saved.items()
        ],
    }
    return {name: part for name, part in book.items() if part}


def _wait_out(wait: Wait, enc: Callable[[Any], Any]) -> list[Any]:
    out = [wait.kind, wait.key, wait.due_at, enc(wait.payload), wait.response_type]
    rules = wait.approvers or wait.four_eyes
    if wait.replay_key is not None or rules:  # only a migrated wait has one
        out.append(wait.replay_key)
    if rules:  # who may answer: a request without rules is written as before
        out.append({"approvers": list(wait.approvers), "four_eyes": wait.four_eyes})
    return out


_WaitDraft = unfrozen_twin(Wait)
"""``Wait``'s unfrozen twin (see ``_engine/_slots.py``): every suspension read makes one."""


def _wait_in(raw: list[Any]) -> Wait:
    made: Any = blank(_WaitDraft)
    made.kind = raw[0]
    made.key = raw[1]
    made.due_at = raw[2]
    made.payload = raw[3]
    made.response_type = raw[4]
    made.replay_key = raw[5] if len(raw) > 5 else None  # noqa: PLR2004 - see _wait_out
    if len(raw) > 6:  # noqa: PLR2004 - see _wait_out: who may answer
        rules = raw[6]
        made.approvers = tuple(str(entry) for entry in rules.get("approvers", ()))
        made.four_eyes = bool(rules.get("four_eyes", False))
    else:
        made.approvers = ()
        made.four_eyes = False
    made.__class__ = Wait  # frozen from here on
    wait: Wait = made
    return wait


def _nested_out(run: NestedRun, enc: Callable[[Any], Any]) -> dict[str, Any]:
    """A sub-workflow's run, whole, inside its parent's waits (it is what changes)."""
    barrier = run.barrier
    return {
        "path": run.path,
        "superstep": barrier.superstep,
        "status": barrier.status.value,
        "pending": [
            [target, [envelope_out(e, enc) for e in inbox]]
            for target, inbox in barrier.pending.items()
        ],
        "fan_in": fan_in_out(barrier.fan_in_buffers, enc),
        "state": {key: enc(value) for key, value in barrier.state.items()},
        "iterations": dict(barrier.iterations),
        "outputs": [enc(value) for value in barrier.outputs],
        "waits": waits_out(barrier.waits, enc),
        "deadline_at": barrier.deadline_at,
        "spawned": [[r.key, r.executor_id, r.name] for r in barrier.spawned],
        "snapshots": {key: enc(value) for key, value in run.snapshots.items()},
        "outcome": _outcome_out(barrier.outcome),
    }


def _nested_in(raw: dict[str, Any]) -> NestedRun:
    barrier = BarrierState(
        run_id="",  # a sub-workflow's run is named by its parent's invocation
        superstep=int(raw["superstep"]),
        status=RunStatus(raw["status"]),
        pending={target: tuple(envelope_in(e) for e in inbox) for target, inbox in raw["pending"]},
        fan_in_buffers=fan_in_in(raw["fan_in"]),
        state=dict(raw["state"]),
        iterations={str(k): int(v) for k, v in raw["iterations"].items()},
        outputs=tuple(raw["outputs"]),
        waits=waits_in(raw["waits"]),
        deadline_at=raw["deadline_at"],
        spawned=tuple(SpawnRecord(k, e, n) for k, e, n in raw["spawned"]),
        outcome=outcome_in(raw.get("outcome")),
    )
    return NestedRun(str(raw["path"]), barrier, dict(raw["snapshots"]))


def _outcome_out(outcome: tuple[str, str | None] | None) -> list[str | None] | None:
    return None if outcome is None else [outcome[0], outcome[1]]


def outcome_in(raw: list[Any] | None) -> tuple[str, str | None] | None:
    """An outcome as a checkpoint keeps it (checkpoints from before outcomes have none)."""
    if raw is None:
        return None
    name, summary = raw
    return str(name), None if summary is None else str(summary)


def fan_in_in(raw: list[Any]) -> tuple[FanInBuffer, ...]:
    return tuple(
        {source: tuple(envelope_in(e) for e in envs) for source, envs in buffer} for buffer in raw
    )


_ABSENT: tuple[()] = ()
"""What :func:`waits_in` reads for a part a book left out: nothing to go through."""
_NONE_ANSWERED: frozenset[str] = frozenset()  # the answered ids of a book that has none


def waits_in(raw: dict[str, Any]) -> WaitBook:
    """A stored wait book; a part left out (every empty one) is not gone through."""
    get = raw.get
    stored = get("suspended", _ABSENT)
    suspended = (
        ()
        if stored is _ABSENT
        else tuple(
            _suspension_in(executor_id, envelope, journal, wait)
            for executor_id, envelope, journal, wait in stored
        )
    )
    stored = get("scheduled", _ABSENT)
    scheduled = (
        ()
        if stored is _ABSENT
        else tuple(
            ScheduledMessage(float(due), target, envelope_in(envelope), *key)
            for due, target, envelope, *key in stored
        )
    )
    stored = get("approvals", _ABSENT)
    approvals = (
        ()
        if stored is _ABSENT
        else tuple(
            HandoffApproval(key, source, target, envelope_in(envelope))
            for key, source, target, envelope in stored
        )
    )
    stored = get("nested", _ABSENT)
    nested = {} if stored is _ABSENT else {key: _nested_in(run) for key, run in stored}
    stored = get("saved", _ABSENT)
    saved = {} if stored is _ABSENT else {key: dict(steps) for key, steps in stored}
    stored = get("answered", _ABSENT)
    # Made blank and its slots set (see ``_engine/_slots.py``): every woken run reads one.
    # Its parts as WaitBook keeps them: tuples and a frozenset (see there).
    book: Any = blank(WaitBook)
    book.suspended = suspended
    book.scheduled = scheduled
    book.answered = _NONE_ANSWERED if stored is _ABSENT else frozenset(stored)
    book.approvals = approvals
    book.nested = nested
    book.saved = saved
    read: WaitBook = book
    return read


def _suspension_in(
    executor_id: str, envelope: list[Any], journal: list[Any], wait: list[Any]
) -> Suspension:
    """``Suspension(...)`` of a stored one, made slot by slot (see ``_engine/_slots.py``)."""
    made: Any = blank(Suspension)
    made.executor_id = executor_id
    made.envelope = envelope_in(envelope)
    made.journal = [(kind, name, value) for kind, name, value in journal]
    made.wait = _wait_in(wait)
    suspension: Suspension = made
    return suspension


def _table_of(iterations: Mapping[str, int]) -> dict[str, int]:
    """The iteration counts as a dict, copied whole (not read a key at a time)."""
    if type(iterations) is Counts:
        return dict(iterations.table())
    return dict(iterations)


class CountsText:
    """A run's iteration counts as its last frame wrote them, kept to write the next one's.

    One per run (in its :class:`~treadle._checkpoints._delta.PieceCache`):
    each executor's count and its ``"id":count`` member, in the table's
    order. When the counts to write were made from the last ones by one
    superstep (:meth:`Counts.changed_since`), only that superstep's
    executors are counted and encoded again, and the counts are not worked
    out (the barrier does that now and then); otherwise (a run's first
    frame, a run resumed, counts read meanwhile) every member is.
    """

    __slots__ = ("counts", "members", "values")

    def __init__(self) -> None:
        self.counts: Counts | None = None  # the counts the members were written from
        self.values: dict[str, int] = {}
        self.members: dict[str, str] = {}

    def text(self, iterations: Mapping[str, int]) -> str | None:
        """``iterations`` as a compact JSON object (``None``: it is empty)."""
        last = self.counts
        changed = (
            iterations.changed_since(last)
            if type(iterations) is Counts and last is not None
            else None
        )
        members = self.members
        if changed is None:
            table = iterations.table() if type(iterations) is Counts else iterations
            self.values = dict(table)
            self.members = members = {
                executor_id: f"{encode_basestring_ascii(executor_id)}:{int(count)}"
                for executor_id, count in table.items()
            }
        else:
            values = self.values
            for executor_id in changed:
                count = values[executor_id] = values.get(executor_id, 0) + 1
                members[executor_id] = f"{encode_basestring_ascii(executor_id)}:{count}"
        self.counts = iterations if type(iterations) is Counts else None
        if not members:
            return None
        return "{" + ",".join(members.values()) + "}"


def frame_text(
    barrier: BarrierState,
    fingerprint: str,
    manifest: Manifest,
    enc: Callable[[Any], Any],
    inline: Mapping[str, Any],
    counts: CountsText,
) -> bytes:
    """:func:`frame_of` as compact JSON bytes, its counts written by ``counts`` (see above).

    The rest of the frame goes through the JSON encoder, without its
    counts; they join its parts (the frame's last item) as their last
    member, ``i``.
    """
    table = counts.text(barrier.iterations)
    document = frame_of(barrier, fingerprint, manifest, enc, inline, iterations=False)
    text = dump_plain(document)
    if table is None:
        return text
    if len(document) > _FRAME_HEAD:  # ...,{parts}] -> ...,{parts,"i":{...}}]
        return b"".join((text[:-2], b',"i":', table.encode("ascii"), b"}]"))
    return b"".join((text[:-1], b',{"i":', table.encode("ascii"), b"}]"))


_FRAME_HEAD = 4  # format, fingerprint, superstep, status: the parts follow, when there are any


def frame_of(
    barrier: BarrierState,
    fingerprint: str,
    manifest: Manifest,
    enc: Callable[[Any], Any],
    inline: Mapping[str, Any],
    *,
    iterations: bool = True,
) -> list[Any]:
    """A barrier's frame of format 3: what is not empty, under one letter each (see above).

    ``iterations=False`` leaves the counts out (:func:`frame_text` writes them).
    """
    parts: dict[str, Any] = {}
    if barrier.pending:
        parts["p"] = [
            [target, [envelope_out(e, enc) for e in inbox]]
            for target, inbox in barrier.pending.items()
        ]
    if "fan_in" in inline:
        parts["f"] = inline["fan_in"]
    if "waits" in inline:
        parts["w"] = inline["waits"]
    if manifest.parts:
        parts["r"] = dict(manifest.parts)
    if manifest.state:
        parts["s"] = dict(manifest.state)
    if manifest.outputs is not None:
        parts["o"] = manifest.outputs
    if manifest.snapshots:
        parts["n"] = dict(manifest.snapshots)
    if iterations and barrier.iterations:
        parts["i"] = _table_of(barrier.iterations)
    if barrier.deadline_at is not None:
        parts["d"] = barrier.deadline_at
    if barrier.spawned:
        parts["x"] = [[r.key, r.executor_id, r.name] for r in barrier.spawned]
    if barrier.outcome is not None:
        parts["c"] = _outcome_out(barrier.outcome)
    if barrier.branch:
        parts["b"] = barrier.branch
    frame = [FORMAT, fingerprint, barrier.superstep, barrier.status.value]
    if parts:
        frame.append(parts)
    return frame


def spelled(frame: list[Any]) -> dict[str, Any]:
    """A frame of format 3 as format 2 spelled it, for the one reader of both.

    Raises:
        ValueError, TypeError, KeyError, IndexError: it is not a frame of format 3.
    """
    _, fingerprint, superstep, status, *rest = frame
    parts = rest[0] if rest else {}
    return {
        "format": SPELLED_FORMAT,
        "fingerprint": fingerprint,
        "superstep": superstep,
        "status": status,
        "pending": parts.get("p", ()),
        "fan_in": parts.get("f", ()),
        "waits": parts.get("w", {}),
        "parts": parts.get("r", {}),
        "state": parts.get("s", {}),
        "outputs": parts.get("o"),
        "snapshots": parts.get("n", {}),
        "iterations": parts.get("i", {}),
        "deadline_at": parts.get("d"),
        "spawned": parts.get("x", ()),
        "outcome": parts.get("c"),
        "branch": parts.get("b", 0),
    }
