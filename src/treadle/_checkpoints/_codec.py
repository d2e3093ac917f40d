"""Checkpoints: a barrier's committed point, encoded, sealed and restored.

A checkpoint holds everything the next superstep needs and nothing of
Python identity: pending messages with their stamps, fan-in buffers, the
committed state, executor snapshots, iteration counters, outputs so far and
the graph's fingerprint. Loaded into a fresh process with the same workflow
definition, it continues exactly.

Values go through the workflow's serializer (safe typed JSON by default);
the bytes are then sealed with a checksum (an HMAC when a key is given), so
a flipped byte or a truncated write is a :class:`CheckpointCorruptError`
naming the run and checkpoint, never a crash or a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._blob import seal, unseal
from treadle._engine._delivery import Envelope, FanInBuffer, HandoffContext
from treadle._engine._spawn import SpawnRecord
from treadle._engine._waits import (
    HandoffApproval,
    ScheduledMessage,
    Suspension,
    Wait,
    WaitBook,
)
from treadle._exceptions import CheckpointCorruptError, SerializationError
from treadle._values._serialization import dump_plain

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._engine._barrier import BarrierState
    from treadle._values._serialization import Serializer

FORMAT = 1
"""Version of the checkpoint payload layout (inside the sealed blob)."""


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


def _waits_out(waits: WaitBook, enc: Callable[[Any], Any]) -> dict[str, Any]:
    return {
        "suspended": [
            [
                s.executor_id,
                _envelope_out(s.envelope, enc),
                [[kind, name, enc(value)] for kind, name, value in s.journal],
                [s.wait.kind, s.wait.key, s.wait.due_at, enc(s.wait.payload), s.wait.response_type],
            ]
            for s in waits.suspended
        ],
        "scheduled": [
            [m.due_at, m.target, _envelope_out(m.envelope, enc)] for m in waits.scheduled
        ],
        "answered": sorted(waits.answered),
        "approvals": [
            [a.key, a.source, a.target, _envelope_out(a.envelope, enc)] for a in waits.approvals
        ],
    }


class EncodeCache:
    """What one run's previous checkpoint already encoded.

    State is a new mapping only when a superstep wrote to it, and outputs
    only grow, so most barriers can reuse both instead of encoding them again.
    """

    __slots__ = ("_outputs", "_state", "_state_json")

    def __init__(self) -> None:
        self._state: Any = None
        self._state_json: Any = None
        self._outputs: list[Any] = []

    def state(self, state: Any, enc: Callable[[Any], Any]) -> Any:
        """The encoded state, reused while it is the same object."""
        if state is not self._state:
            self._state_json = enc(dict(state))
            self._state = state
        return self._state_json

    def outputs(self, outputs: tuple[Any, ...], enc: Callable[[Any], Any]) -> list[Any]:
        """The encoded outputs, encoding only those added since last time."""
        done = self._outputs
        if len(outputs) < len(done):
            done.clear()
        done.extend(enc(value) for value in outputs[len(done) :])
        return done


def _waits_in(raw: dict[str, Any]) -> WaitBook:
    suspended = [
        Suspension(
            executor_id,
            _envelope_in(envelope),
            [(kind, name, value) for kind, name, value in journal],
            Wait(wait[0], wait[1], wait[2], wait[3], wait[4]),
        )
        for executor_id, envelope, journal, wait in raw["suspended"]
    ]
    scheduled = [
        ScheduledMessage(float(due), target, _envelope_in(envelope))
        for due, target, envelope in raw["scheduled"]
    ]
    approvals = [
        HandoffApproval(key, source, target, _envelope_in(envelope))
        for key, source, target, envelope in raw["approvals"]
    ]
    return WaitBook(suspended, scheduled, set(raw["answered"]), approvals)


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
        cache: EncodeCache | None = None,
    ) -> bytes:
        """The sealed bytes of one barrier.

        With a serializer that can encode single values (``to_json``), only
        user values go through it and the checkpoint's own structure is
        dumped as plain JSON; ``cache`` (one per run) then saves re-encoding
        unchanged state and earlier outputs.

        Raises:
            SerializationError: a message, state value, output or snapshot
                cannot be encoded; the error names where it sits.
        """
        to_json: Callable[[Any], Any] | None = getattr(self._serializer, "to_json", None)
        try:
            if to_json is None:
                payload = self._serializer.dumps(self._document(barrier, fingerprint, snapshots))
            else:
                cache = cache or EncodeCache()
                document = self._document(barrier, fingerprint, snapshots, to_json, cache)
                payload = dump_plain(document)
        except SerializationError as error:
            where = f"run {barrier.run_id!r} at superstep {barrier.superstep}"
            msg = f"cannot checkpoint {where}: {error}"
            raise SerializationError(msg) from error
        return seal(payload, key=self._key)

    def _document(
        self,
        barrier: BarrierState,
        fingerprint: str,
        snapshots: Mapping[str, Any],
        enc: Callable[[Any], Any] = _same,
        cache: EncodeCache | None = None,
    ) -> dict[str, Any]:
        return {
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
            "fan_in": [
                [
                    [source, [_envelope_out(e, enc) for e in envelopes]]
                    for source, envelopes in buffer.items()
                ]
                for buffer in barrier.fan_in_buffers
            ],
            "state": cache.state(barrier.state, enc) if cache else enc(dict(barrier.state)),
            "iterations": dict(barrier.iterations),
            "outputs": cache.outputs(barrier.outputs, enc) if cache else enc(list(barrier.outputs)),
            "snapshots": enc(dict(snapshots)),
            "waits": _waits_out(barrier.waits, enc),
            "deadline_at": barrier.deadline_at,
            "spawned": [[r.key, r.executor_id, r.name] for r in barrier.spawned],
        }

    def decode(self, blob: bytes, *, run_id: str, checkpoint_id: str) -> RestoredRun:
        """Verify, unseal and decode one checkpoint.

        Raises:
            CheckpointCorruptError: the seal does not verify, or the content
                is not a checkpoint of this run.
            SerializationError: the content names a type that is not
                allowed (nothing is imported, evaluated or unpickled).
        """
        payload = unseal(blob, key=self._key, run_id=run_id, checkpoint_id=checkpoint_id)
        document = self._serializer.loads(payload)
        try:
            if not isinstance(document, dict) or document.get("format") != FORMAT:
                found = document.get("format") if isinstance(document, dict) else type(document)
                msg = f"unknown checkpoint format {found!r}"
                raise TypeError(msg)  # noqa: TRY301 - reported below as corruption
            if document["run_id"] != run_id:
                msg = f"it belongs to run {document['run_id']!r}"
                raise TypeError(msg)  # noqa: TRY301 - reported below as corruption
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
                fan_in_buffers=tuple(
                    {source: tuple(_envelope_in(e) for e in envs) for source, envs in buffer}
                    for buffer in document["fan_in"]
                ),
                state=dict(document["state"]),
                iterations={str(k): int(v) for k, v in document["iterations"].items()},
                outputs=list(document["outputs"]),
                snapshots=dict(document["snapshots"]),
                waits=_waits_in(document["waits"]),
                deadline_at=document["deadline_at"],
                spawned=tuple(SpawnRecord(k, e, n) for k, e, n in document["spawned"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointCorruptError(
                run_id, checkpoint_id, f"malformed content: {error}"
            ) from error
