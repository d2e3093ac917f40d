"""Checkpoints: a barrier's committed point, encoded, sealed and restored.

A checkpoint holds everything the next superstep needs and nothing of
Python identity: pending messages with their stamps, fan-in buffers, the
committed state, executor snapshots, iteration counters, outputs so far and
the graph's fingerprint. Loaded into a fresh process with the same workflow
definition, it continues exactly.

A checkpoint is a *frame* and the *pieces* it names (see
:mod:`treadle._checkpoints._delta`): the frame holds what every superstep
replaces (pending messages, fan-in buffers, waits, counters); state values,
outputs and executor snapshots are pieces, written only when they change.
Checkpoints of format 1, written before pieces existed, hold everything in
their frame and still load.

Values go through the workflow's serializer (safe typed JSON by default);
the bytes of the frame and of every piece are then sealed with a checksum
(an HMAC when a key is given), so a flipped byte or a truncated write is a
:class:`CheckpointCorruptError` naming the run, the checkpoint and the
piece, never a crash or a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from treadle._checkpoints._blob import seal, unseal
from treadle._checkpoints._delta import Manifest, PieceCache, PieceReader, PieceWriter
from treadle._engine._barrier import BarrierState
from treadle._engine._counts import Counts
from treadle._engine._delivery import Envelope, FanInBuffer, HandoffContext
from treadle._engine._result import RunStatus
from treadle._engine._spawn import SpawnRecord
from treadle._engine._waits import (
    HandoffApproval,
    NestedRun,
    ScheduledMessage,
    Suspension,
    Wait,
    WaitBook,
)
from treadle._exceptions import CheckpointCorruptError, SerializationError
from treadle._values._serialization import dump_plain

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._stores._store import CheckpointRecord, Piece
    from treadle._values._serialization import Serializer

FORMAT = 2
"""Version of the frame's layout (inside the sealed blob): 2 names pieces."""
WHOLE_FORMAT = 1
"""The layout before pieces, every value in the frame: still read."""


@dataclass(frozen=True, slots=True)
class RestoredRun:
    """A decoded checkpoint, ready to seed a :class:`RunLoop`."""

    run_id: str
    checkpoint_id: str
    superstep: int
    status: str
    fingerprint: str
    pending: dict[str, list[Envelope]]
    fan_in_buffers: tuple[FanInBuffer, ...]
    state: dict[str, Any]
    iterations: dict[str, int]
    outputs: list[Any]
    snapshots: dict[str, Any]
    waits: WaitBook
    deadline_at: float | None
    spawned: tuple[SpawnRecord, ...]
    manifest: Manifest | None = None
    """Which pieces hold its values (``None``: a format-1 checkpoint, which has none)."""
    outcome: tuple[str, str | None] | None = None
    """The run's outcome as of this checkpoint (``ctx.set_outcome``): name and summary."""

    def piece_cache(self) -> PieceCache:
        """The cache a run going on from this checkpoint starts with: its pieces, reused."""
        if self.manifest is None:
            return PieceCache()
        return PieceCache.continuing(self.manifest, self.state, len(self.outputs))


class Encoded(NamedTuple):
    """One barrier encoded: the sealed frame, the pieces it names, and the new ones."""

    blob: bytes
    refs: tuple[str, ...]
    pieces: tuple[Piece, ...]
    requires: tuple[str, ...]


def _same(value: Any) -> Any:
    return value


def _envelope_out(envelope: Envelope, enc: Callable[[Any], Any] = _same) -> list[Any]:
    handoff = envelope.handoff
    journal = envelope.journal
    return [
        list(envelope.stamp),
        envelope.source,
        enc(envelope.payload),
        None if handoff is None else [handoff.source, handoff.reason],
        None if journal is None else [[kind, name, enc(value)] for kind, name, value in journal],
    ]


def _envelope_in(raw: list[Any]) -> Envelope:
    stamp, source, payload, handoff, journal = raw
    s0, s1, s2, s3 = stamp
    return Envelope(
        (s0, s1, s2, s3),
        source,
        payload,
        None if handoff is None else HandoffContext(handoff[0], handoff[1]),
        None if journal is None else [tuple(entry) for entry in journal],
    )


def _fan_in_out(buffers: tuple[FanInBuffer, ...], enc: Callable[[Any], Any]) -> list[Any]:
    return [
        [
            [source, [_envelope_out(e, enc) for e in envelopes]]
            for source, envelopes in buffer.items()
        ]
        for buffer in buffers
    ]


_PART_NAMES = MappingProxyType({"fan_in": "fan-in buffers", "waits": "waits"})

_NO_WAITS: Final[Mapping[str, Any]] = {
    "suspended": [],
    "scheduled": [],
    "answered": [],
    "approvals": [],
}


def _waits_out(waits: WaitBook, enc: Callable[[Any], Any]) -> dict[str, Any]:
    return {
        "suspended": [
            [
                s.executor_id,
                _envelope_out(s.envelope, enc),
                [[kind, name, enc(value)] for kind, name, value in s.journal],
                _wait_out(s.wait, enc),
            ]
            for s in waits.suspended
        ],
        "scheduled": [  # the key (cancel_scheduled) last: checkpoints without it still load
            [m.due_at, m.target, _envelope_out(m.envelope, enc), m.key] for m in waits.scheduled
        ],
        "answered": sorted(waits.answered),
        "approvals": [
            [a.key, a.source, a.target, _envelope_out(a.envelope, enc)] for a in waits.approvals
        ],
        "nested": [[key, _nested_out(run, enc)] for key, run in waits.nested.items()],
        "saved": [
            [key, [[step, enc(value)] for step, value in steps.items()]]
            for key, steps in waits.saved.items()
        ],
    }


def _wait_out(wait: Wait, enc: Callable[[Any], Any]) -> list[Any]:
    out = [wait.kind, wait.key, wait.due_at, enc(wait.payload), wait.response_type]
    rules = wait.approvers or wait.four_eyes
    if wait.replay_key is not None or rules:  # only a migrated wait has one
        out.append(wait.replay_key)
    if rules:  # who may answer: a request without rules is written as before
        out.append({"approvers": list(wait.approvers), "four_eyes": wait.four_eyes})
    return out


def _wait_in(raw: list[Any]) -> Wait:
    rules = raw[6] if len(raw) > 6 else {}  # noqa: PLR2004 - see _wait_out
    return Wait(
        raw[0],
        raw[1],
        raw[2],
        raw[3],
        raw[4],
        raw[5] if len(raw) > 5 else None,  # noqa: PLR2004 - see _wait_out
        tuple(str(entry) for entry in rules.get("approvers", ())),
        bool(rules.get("four_eyes", False)),
    )


def _nested_out(run: NestedRun, enc: Callable[[Any], Any]) -> dict[str, Any]:
    """A sub-workflow's run, whole, inside its parent's waits (it is what changes)."""
    barrier = run.barrier
    return {
        "path": run.path,
        "superstep": barrier.superstep,
        "status": barrier.status.value,
        "pending": [
            [target, [_envelope_out(e, enc) for e in inbox]]
            for target, inbox in barrier.pending.items()
        ],
        "fan_in": _fan_in_out(barrier.fan_in_buffers, enc),
        "state": {key: enc(value) for key, value in barrier.state.items()},
        "iterations": dict(barrier.iterations),
        "outputs": [enc(value) for value in barrier.outputs],
        "waits": _waits_out(barrier.waits, enc),
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
        pending={target: tuple(_envelope_in(e) for e in inbox) for target, inbox in raw["pending"]},
        fan_in_buffers=_fan_in_in(raw["fan_in"]),
        state=dict(raw["state"]),
        iterations={str(k): int(v) for k, v in raw["iterations"].items()},
        outputs=tuple(raw["outputs"]),
        waits=_waits_in(raw["waits"]),
        deadline_at=raw["deadline_at"],
        spawned=tuple(SpawnRecord(k, e, n) for k, e, n in raw["spawned"]),
        outcome=_outcome_in(raw.get("outcome")),
    )
    return NestedRun(str(raw["path"]), barrier, dict(raw["snapshots"]))


def _table_of(iterations: Mapping[str, int]) -> dict[str, int]:
    """The iteration counts as a dict, copied whole (not read a key at a time)."""
    if type(iterations) is Counts:
        return dict(iterations.table())
    return dict(iterations)


def _outcome_out(outcome: tuple[str, str | None] | None) -> list[str | None] | None:
    return None if outcome is None else [outcome[0], outcome[1]]


def _outcome_in(raw: list[Any] | None) -> tuple[str, str | None] | None:
    """An outcome as a checkpoint keeps it (checkpoints from before outcomes have none)."""
    if raw is None:
        return None
    name, summary = raw
    return str(name), None if summary is None else str(summary)


def _fan_in_in(raw: list[Any]) -> tuple[FanInBuffer, ...]:
    return tuple(
        {source: tuple(_envelope_in(e) for e in envs) for source, envs in buffer} for buffer in raw
    )


def _waits_in(raw: dict[str, Any]) -> WaitBook:
    suspended = [
        Suspension(
            executor_id,
            _envelope_in(envelope),
            [(kind, name, value) for kind, name, value in journal],
            _wait_in(wait),
        )
        for executor_id, envelope, journal, wait in raw["suspended"]
    ]
    scheduled = [
        ScheduledMessage(float(due), target, _envelope_in(envelope), *key)
        for due, target, envelope, *key in raw["scheduled"]
    ]
    approvals = [
        HandoffApproval(key, source, target, _envelope_in(envelope))
        for key, source, target, envelope in raw["approvals"]
    ]
    nested = {key: _nested_in(run) for key, run in raw.get("nested", ())}
    saved = {key: dict(steps) for key, steps in raw.get("saved", ())}
    return WaitBook(suspended, scheduled, set(raw["answered"]), approvals, nested, saved)


class CheckpointCodec:
    """Encodes barrier states to sealed bytes and back.

    Args:
        serializer: Turns values into bytes (``JsonSerializer`` by default).
        key: When given, checkpoints are sealed with a keyed digest (HMAC),
            and a checkpoint sealed without it, or with another key, is
            refused.
    """

    def __init__(self, serializer: Serializer, key: bytes | None = None) -> None:
        self._serializer = serializer
        self._key = key

    @property
    def serializer(self) -> Serializer:
        """The serializer user values go through."""
        return self._serializer

    def encode(
        self,
        barrier: BarrierState,
        fingerprint: str,
        snapshots: Mapping[str, Any],
        cache: PieceCache | None = None,
    ) -> Encoded:
        """One barrier as a sealed frame and the pieces it names.

        ``cache`` (one per run) holds what the run's previous checkpoint
        stored: values it still holds are named, not written again, and
        lists that only grew are written as their new items. Without it
        every value is written.

        Raises:
            SerializationError: a message, state value, output or snapshot
                cannot be encoded; the error names where it sits.
        """
        to_json: Callable[[Any], Any] | None = getattr(self._serializer, "to_json", None)
        writer = PieceWriter(self._serializer, self._key, cache or PieceCache())
        try:
            enc = to_json if to_json is not None else _same
            book = barrier.waits
            held = book or book.answered or book.saved
            framed = {  # the frame's parts that carry messages across supersteps
                "fan_in": _fan_in_out(barrier.fan_in_buffers, enc),
                "waits": _waits_out(book, enc) if held else _NO_WAITS,
            }
            filled = {"fan_in": any(barrier.fan_in_buffers), "waits": held}
            parts = {
                name: piece_id
                for name, part in framed.items()
                if filled[name] and (piece_id := writer.part(name, part)) is not None
            }
            manifest = Manifest(
                state=writer.state(barrier.state, barrier.written),
                outputs=writer.outputs(barrier.outputs),
                snapshots=writer.snapshots(snapshots),
                parts=parts,
            )
            inline = {name: part for name, part in framed.items() if name not in parts}
            document = self._document(barrier, fingerprint, manifest, enc, inline)
            payload = self._serializer.dumps(document) if to_json is None else dump_plain(document)
        except SerializationError as error:
            where = f"run {barrier.run_id!r} at superstep {barrier.superstep}"
            msg = f"cannot checkpoint {where}: {error}"
            raise SerializationError(msg) from error
        refs = tuple(manifest.refs())
        return Encoded(
            seal(payload, key=self._key), refs, tuple(writer.pieces), writer.requires(refs)
        )

    def _document(
        self,
        barrier: BarrierState,
        fingerprint: str,
        manifest: Manifest,
        enc: Callable[[Any], Any],
        inline: Mapping[str, Any],
    ) -> dict[str, Any]:
        return {
            **inline,
            "format": FORMAT,
            "serializer": self._serializer.name,
            "run_id": barrier.run_id,
            "superstep": barrier.superstep,
            "status": barrier.status.value,
            "fingerprint": fingerprint,
            "pending": [
                [target, [_envelope_out(e, enc) for e in inbox]]
                for target, inbox in barrier.pending.items()
            ],
            "state": dict(manifest.state),
            "iterations": _table_of(barrier.iterations),
            "outputs": manifest.outputs,
            "snapshots": dict(manifest.snapshots),
            "parts": dict(manifest.parts),
            "deadline_at": barrier.deadline_at,
            "spawned": [[r.key, r.executor_id, r.name] for r in barrier.spawned],
            "outcome": _outcome_out(barrier.outcome),
        }

    def decode(self, record: CheckpointRecord, *, run_id: str) -> RestoredRun:
        """Verify, unseal and decode one checkpoint: its frame and the pieces it names.

        Raises:
            CheckpointCorruptError: the frame or a piece does not verify, a
                piece is missing, or the content is not a checkpoint of this
                run (the error names the piece and what it holds).
            SerializationError: the content names a type that is not
                allowed (nothing is imported, evaluated or unpickled).
        """
        checkpoint_id = record.info.checkpoint_id
        payload = unseal(record.blob, key=self._key, run_id=run_id, checkpoint_id=checkpoint_id)
        document = self._serializer.loads(payload)
        try:
            found = document.get("format") if isinstance(document, dict) else type(document)
            if found not in (FORMAT, WHOLE_FORMAT):
                msg = f"unknown checkpoint format {found!r}"
                raise TypeError(msg)  # noqa: TRY301 - reported below as corruption
            if document["run_id"] != run_id:
                msg = f"it belongs to run {document['run_id']!r}"
                raise TypeError(msg)  # noqa: TRY301 - reported below as corruption
            manifest = None
            if found == FORMAT:
                manifest = Manifest(
                    state=dict(document["state"]),
                    outputs=document["outputs"],
                    snapshots=dict(document["snapshots"]),
                    parts=dict(document["parts"]),
                )
                state, outputs, snapshots, parts = self._values(record, manifest, run_id)
                fan_in = parts.get("fan_in", document.get("fan_in"))
                waits = parts.get("waits", document.get("waits"))
            else:
                state = dict(document["state"])
                outputs = list(document["outputs"])
                snapshots = dict(document["snapshots"])
                fan_in, waits = document["fan_in"], document["waits"]
            return RestoredRun(
                run_id=run_id,
                checkpoint_id=checkpoint_id,
                superstep=int(document["superstep"]),
                status=str(document["status"]),
                fingerprint=str(document["fingerprint"]),
                pending={
                    target: [_envelope_in(e) for e in inbox]
                    for target, inbox in document["pending"]
                },
                fan_in_buffers=_fan_in_in(fan_in),
                state=state,
                iterations={str(k): int(v) for k, v in document["iterations"].items()},
                outputs=outputs,
                snapshots=snapshots,
                waits=_waits_in(waits),
                deadline_at=document["deadline_at"],
                spawned=tuple(SpawnRecord(k, e, n) for k, e, n in document["spawned"]),
                manifest=manifest,
                outcome=_outcome_in(document.get("outcome")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CheckpointCorruptError(
                run_id, checkpoint_id, f"malformed content: {error}"
            ) from error

    def _values(
        self, record: CheckpointRecord, manifest: Manifest, run_id: str
    ) -> tuple[dict[str, Any], list[Any], dict[str, Any], dict[str, Any]]:
        reader = PieceReader(
            self._serializer,
            self._key,
            record.pieces,
            run_id=run_id,
            checkpoint_id=record.info.checkpoint_id,
        )
        state = {key: reader.value(p, f"state key {key!r}") for key, p in manifest.state.items()}
        outputs = [] if manifest.outputs is None else reader.value(manifest.outputs, "outputs")
        snapshots = {
            executor_id: reader.value(p, f"snapshot of executor {executor_id!r}")
            for executor_id, p in manifest.snapshots.items()
        }
        parts = {name: reader.value(p, _PART_NAMES[name]) for name, p in manifest.parts.items()}
        return state, list(outputs), snapshots, parts
