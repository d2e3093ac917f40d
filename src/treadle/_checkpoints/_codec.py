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
How a frame is laid out, and which older layouts still load, is
:mod:`treadle._checkpoints._frame`'s.

Values go through the workflow's serializer (safe typed JSON by default);
the bytes of the frame and of every piece are then sealed with a checksum
(an HMAC when a key is given), so a flipped byte or a truncated write is a
:class:`CheckpointCorruptError` naming the run, the checkpoint and the
piece, never a crash or a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from treadle._checkpoints._blob import seal_bound, unseal
from treadle._checkpoints._delta import Manifest, PieceCache, PieceReader, PieceWriter
from treadle._checkpoints._frame import (
    FORMAT,
    PART_NAMES,
    SPELLED_FORMAT,
    WHOLE_FORMAT,
    envelope_in,
    fan_in_in,
    fan_in_out,
    frame_of,
    frame_text,
    outcome_in,
    same,
    spelled,
    waits_in,
    waits_out,
)
from treadle._engine._slots import blank, unfrozen_twin
from treadle._engine._spawn import SpawnRecord
from treadle._exceptions import CheckpointCorruptError, SerializationError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._engine._barrier import BarrierState
    from treadle._engine._delivery import Envelope, FanInBuffer
    from treadle._engine._waits import WaitBook
    from treadle._stores._store import CheckpointRecord, Piece
    from treadle._values._serialization import Serializer


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
    branch: int = 0
    """The branch of the run it is on (``BarrierState.branch``)."""

    def piece_cache(self) -> PieceCache:
        """The cache a run going on from this checkpoint starts with: its pieces, reused."""
        if self.manifest is None:
            return PieceCache()
        return PieceCache.continuing(self.manifest, self.state, len(self.outputs))


_RestoredDraft = unfrozen_twin(RestoredRun)
"""``RestoredRun``'s unfrozen twin (see ``_engine/_slots.py``): every woken run decodes one."""


class Encoded(NamedTuple):
    """One barrier encoded: the sealed frame, the pieces it names, and the new ones."""

    blob: bytes
    refs: tuple[str, ...]
    pieces: tuple[Piece, ...]
    requires: tuple[str, ...]


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
        if cache is None:
            cache = PieceCache()
        writer = PieceWriter(self._serializer, self._key, cache)
        try:
            enc = to_json if to_json is not None else same
            book = barrier.waits
            # The frame's parts that carry messages across supersteps, those there are.
            framed: dict[str, Any] = {}
            if any(barrier.fan_in_buffers):
                framed["fan_in"] = fan_in_out(barrier.fan_in_buffers, enc)
            if book or book.answered or book.saved:
                framed["waits"] = waits_out(book, enc)
            parts = {
                name: piece_id
                for name, part in framed.items()
                if (piece_id := writer.part(name, part)) is not None
            }
            manifest = Manifest(
                state=writer.state(barrier.state, barrier.written),
                outputs=writer.outputs(barrier.outputs),
                snapshots=writer.snapshots(snapshots),
                parts=parts,
            )
            inline = {name: part for name, part in framed.items() if name not in parts}
            if to_json is None:
                document = frame_of(barrier, fingerprint, manifest, enc, inline)
                payload = self._serializer.dumps(document)
            else:
                payload = frame_text(barrier, fingerprint, manifest, enc, inline, cache.counts)
        except SerializationError as error:
            where = f"run {barrier.run_id!r} at superstep {barrier.superstep}"
            msg = f"cannot checkpoint {where}: {error}"
            raise SerializationError(msg) from error
        refs = tuple(manifest.refs())
        return Encoded(
            seal_bound(payload, barrier.run_id, key=self._key),
            refs,
            tuple(writer.pieces),
            writer.requires(refs),
        )

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
            if type(document) is list and document and document[0] == FORMAT:
                return self._restore(record, run_id, spelled(document))
            found = document.get("format") if isinstance(document, dict) else type(document)
            if found == FORMAT:  # only ever an array
                found = dict
            if found not in (SPELLED_FORMAT, WHOLE_FORMAT):
                msg = f"unknown checkpoint format {found!r}"
                raise TypeError(msg)  # noqa: TRY301 - reported below as corruption
            if document["run_id"] != run_id:
                msg = f"it belongs to run {document['run_id']!r}"
                raise TypeError(msg)  # noqa: TRY301 - reported below as corruption
            return self._restore(record, run_id, document)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            raise CheckpointCorruptError(
                run_id, record.info.checkpoint_id, f"malformed content: {error}"
            ) from error

    def _restore(
        self, record: CheckpointRecord, run_id: str, document: Mapping[str, Any]
    ) -> RestoredRun:
        """The run a frame of format 1 or 2 (or 3, spelled out as 2) holds.

        Raises:
            CheckpointCorruptError: as :meth:`decode`.
        """
        checkpoint_id = record.info.checkpoint_id
        found = document["format"]
        try:
            manifest = None
            if found != WHOLE_FORMAT:
                manifest = Manifest(
                    state=dict(document["state"]),
                    outputs=document["outputs"],
                    snapshots=dict(document["snapshots"]),
                    parts=dict(document["parts"]),
                )
                state, outputs, snapshots, parts = self._values(record, manifest, run_id)
                fan_in = parts.get("fan_in", document.get("fan_in", ()))
                waits = parts.get("waits", document.get("waits", {}))
            else:
                state = dict(document["state"])
                outputs = list(document["outputs"])
                snapshots = dict(document["snapshots"])
                fan_in, waits = document["fan_in"], document["waits"]
            # ``RestoredRun(...)``, made slot by slot (see ``_engine/_slots.py``).
            made: Any = blank(_RestoredDraft)
            made.run_id = run_id
            made.checkpoint_id = checkpoint_id
            made.superstep = int(document["superstep"])
            made.status = str(document["status"])
            made.fingerprint = str(document["fingerprint"])
            made.pending = {
                target: [envelope_in(e) for e in inbox] for target, inbox in document["pending"]
            }
            made.fan_in_buffers = fan_in_in(fan_in)
            made.state = state
            made.iterations = {str(k): int(v) for k, v in document["iterations"].items()}
            made.outputs = outputs
            made.snapshots = snapshots
            made.waits = waits_in(waits)
            made.deadline_at = document["deadline_at"]
            made.spawned = tuple(SpawnRecord(k, e, n) for k, e, n in document["spawned"])
            made.manifest = manifest
            made.outcome = outcome_in(document.get("outcome"))
            made.branch = int(document.get("branch") or 0)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CheckpointCorruptError(
                run_id, checkpoint_id, f"malformed content: {error}"
            ) from error
        made.__class__ = RestoredRun  # frozen from here on (see _RestoredDraft)
        restored: RestoredRun = made
        return restored

    def _values(
        self, record: CheckpointRecord, manifest: Manifest, run_id: str
    ) -> tuple[dict[str, Any], list[Any], dict[str, Any], dict[str, Any]]:
        if manifest.outputs is None and not (
            manifest.state or manifest.snapshots or manifest.parts
        ):
            return {}, [], {}, {}  # it names no piece (a run parked early): nothing to read
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
        parts = {name: reader.value(p, PART_NAMES[name]) for name, p in manifest.parts.items()}
        return state, list(outputs), snapshots, parts
