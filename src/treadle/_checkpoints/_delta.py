"""Checkpoints that store what changed: a barrier's values as pieces, shared where unchanged.

A checkpoint's *frame* (pending messages and counters: what each superstep
replaces) is written whole; its state values, outputs and executor
snapshots are :class:`~treadle._stores._store.Piece` s that the frame names
by id, and so are the fan-in buffers and waits (messages carried from one
superstep to many later ones) once a barrier finds them unchanged. A piece
is written once and named by every later checkpoint whose value it still
is, so:

* a state key no superstep wrote costs nothing but its id in the frame;
* items appended to a list (a reducer such as ``operator.add``, or
  ``state.set(key, old + new)``) are stored alone, in a piece that *extends*
  the piece holding the list before them, and outputs likewise;
* a fork or a run resumed from an older checkpoint starts from the pieces of
  the checkpoint it branches from.

Storage then grows with the distinct data, and the encoding work of a
superstep with what it changed. Each piece is sealed on its own (checksum,
or HMAC with a key) and carries its own id and the id of what it extends,
so a flipped byte, a truncated piece or a piece swapped for another is a
:class:`CheckpointCorruptError` naming the piece and what it holds.

Whether a value changed is told by *identity*, which costs nothing whatever
its size: a key not written in the superstep whose value is the object the
previous checkpoint encoded is unchanged; a written list whose first items
are the very objects the stored list held (the cache keeps their
references, not the list, which a handler may have appended to in place)
only grew. What is not seen is a change *inside* a committed value that no
``state.set`` or ``update`` announces; docs/semantics.md asks handlers to
set new values rather than mutate stored ones.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from treadle._checkpoints._blob import seal, unseal
from treadle._checkpoints._frame import CountsText
from treadle._exceptions import CheckpointCorruptError
from treadle._stores._store import Piece
from treadle._values._ids import random_bits
from treadle._values._serialization import dump_plain

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from treadle._values._serialization import Serializer

VALUE: Final = "v"
"""A piece holding one whole value."""
APPEND: Final = "+"
"""A piece holding items that follow the list of the piece it extends."""

# Types whose values cannot change in place: one written again as the same object is unchanged.
_IMMUTABLE: Final = frozenset({int, float, str, bool, bytes, type(None)})


def new_piece_id() -> str:
    """A fresh piece id: 128 random bits as 32 hex digits (unique, not secret)."""
    return f"{random_bits(128):032x}"


@dataclass(frozen=True, slots=True)
class Manifest:
    """Which pieces a checkpoint's values are in: what a frame names.

    Attributes:
        state: State key to the piece holding its value.
        outputs: The piece holding the outputs so far (``None``: none yet).
        snapshots: Executor id to the piece holding its snapshot.
        parts: Parts of the frame kept in pieces while they are not empty
            (``"fan_in"``, ``"waits"``) to the piece holding each.
    """

    state: Mapping[str, str]
    outputs: str | None
    snapshots: Mapping[str, str]
    parts: Mapping[str, str]

    def refs(self) -> list[str]:
        """Every piece the manifest names."""
        named = [*self.state.values(), *self.snapshots.values(), *self.parts.values()]
        if self.outputs is not None:
            named.append(self.outputs)
        return named


class PieceCache:
    """What one run's previous checkpoint stored, so the next stores only what changed.

    Attributes:
        state: State key to (piece id, the object its value was encoded
            from, and for a list the items it held then).
        outputs: (piece id, how many outputs it holds), or ``None``.
        snapshots: Executor id to (piece id, the snapshot's encoding).
        parts: Frame part to (its piece id, or ``None`` while it sits in
            the frame; its encoding).
        borrowed: The pieces were stored by a checkpoint this run continues
            from rather than by this process, until the next one is encoded:
            its commit checks they are still there.
        counts: The iteration counts as the last frame wrote them, so the
            next writes again only those that changed.
    """

    __slots__ = ("borrowed", "counts", "outputs", "parts", "snapshots", "state")

    def __init__(self) -> None:
        self.counts = CountsText()
        self.state: dict[str, tuple[str, Any, tuple[Any, ...] | None]] = {}
        self.outputs: tuple[str, int] | None = None
        self.snapshots: dict[str, tuple[str, Any]] = {}
        self.parts: dict[str, tuple[str | None, Any]] = {}
        self.borrowed = False

    @classmethod
    def continuing(cls, manifest: Manifest, state: Mapping[str, Any], outputs: int) -> PieceCache:
        """The cache of a run going on from a loaded checkpoint (resume, fork, time travel).

        ``state`` must be the very mapping the run goes on with, as loaded:
        its values' identity is what tells them unchanged later.
        """
        cache = cls()
        for key, piece_id in manifest.state.items():
            if key in state:
                cache.state[key] = (piece_id, state[key], _items(state[key]))
        if manifest.outputs is not None:
            cache.outputs = (manifest.outputs, outputs)
        cache.borrowed = True
        return cache


class PieceWriter:
    """Writes one barrier's values as pieces, reusing those its cache says are stored.

    Args:
        serializer: Encodes user values.
        key: The sealing key, if any.
        cache: The run's cache; updated as values are written.
    """

    __slots__ = ("_cache", "_enc", "_key", "_serializer", "pieces")

    def __init__(self, serializer: Serializer, key: bytes | None, cache: PieceCache) -> None:
        self._serializer = serializer
        self._key = key
        self._cache = cache
        self._enc: Callable[[Any], Any] | None = getattr(serializer, "to_json", None)
        self.pieces: list[Piece] = []

    def _write(self, extends: str | None, kind: str, content: Any, *, encoded: bool = False) -> str:
        piece_id = new_piece_id()
        enc = self._enc
        if enc is None:
            payload = self._serializer.dumps([piece_id, extends, kind, content])
        else:
            if encoded:
                data = content
            else:
                data = enc(content) if kind == VALUE else [enc(item) for item in content]
            payload = dump_plain([piece_id, extends, kind, data])
        self.pieces.append(Piece(piece_id, extends, seal(payload, key=self._key)))
        return piece_id

    def part(self, name: str, encoded: Any) -> str | None:
        """The piece of one part of the frame, given encoded; ``None``: keep it in the frame.

        A part is written into the frame while it changes (a piece would
        cost more than it saves), and becomes a piece once a barrier finds
        it as the previous one left it; later barrier that find it so again
        name that piece.
        """
        stored = self._cache.parts.get(name)
        if stored is None or stored[1] != encoded:
            self._cache.parts[name] = (None, encoded)
            return None
        piece_id = stored[0]
        if piece_id is None:
            piece_id = self._write(None, VALUE, encoded, encoded=True)
            self._cache.parts[name] = (piece_id, encoded)
        return piece_id

    def state(self, state: Mapping[str, Any], written: frozenset[str] | None) -> dict[str, str]:
        """The pieces of ``state``; ``written`` names the keys set since the last (None: all)."""
        known = self._cache.state
        names: dict[str, str] = {}
        now: dict[str, tuple[str, Any, tuple[Any, ...] | None]] = {}
        for key, value in state.items():
            stored = known.get(key)
            if stored is None:
                piece_id, items = self._write(None, VALUE, value), _items(value)
            else:
                piece_id, old, items = stored
                if value is old and (
                    (written is not None and key not in written) or type(value) in _IMMUTABLE
                ):
                    pass  # unchanged: the stored piece is still its value
                elif (grown := _grown(items, value)) is not None:
                    if grown:
                        piece_id, items = self._write(piece_id, APPEND, grown), tuple(value)
                else:
                    piece_id, items = self._write(None, VALUE, value), _items(value)
            names[key] = piece_id
            now[key] = (piece_id, value, items)
        self._cache.state = now
        return names

    def outputs(self, outputs: tuple[Any, ...]) -> str | None:
        """The piece of the outputs so far: those added since the last extend its piece."""
        stored = self._cache.outputs
        if not outputs:
            self._cache.outputs = None
            return None
        if stored is not None and stored[1] <= len(outputs):
            piece_id, count = stored
            if count < len(outputs):
                piece_id = self._write(piece_id, APPEND, outputs[count:])
        else:
            piece_id = self._write(None, APPEND, outputs)
        self._cache.outputs = (piece_id, len(outputs))
        return piece_id

    def snapshots(self, snapshots: Mapping[str, Any]) -> dict[str, str]:
        """The pieces of the executors' snapshots; one equal to the last keeps its piece."""
        known = self._cache.snapshots
        enc = self._enc
        names: dict[str, str] = {}
        now: dict[str, tuple[str, Any]] = {}
        for executor_id, snapshot in snapshots.items():
            encoded = enc(snapshot) if enc is not None else None
            stored = known.get(executor_id)
            if stored is not None and encoded is not None and stored[1] == encoded:
                piece_id = stored[0]
            else:
                piece_id = self._write(None, VALUE, snapshot)
            names[executor_id] = piece_id
            now[executor_id] = (piece_id, encoded)
        self._cache.snapshots = now
        return names

    def requires(self, refs: Iterable[str]) -> tuple[str, ...]:
        """The pieces of the checkpoint continued from that this one uses, once per run."""
        if not self._cache.borrowed:
            return ()
        self._cache.borrowed = False
        new = {piece.piece_id for piece in self.pieces}
        used = {*refs, *(piece.extends for piece in self.pieces if piece.extends is not None)}
        return tuple(sorted(used - new))


def _items(value: Any) -> tuple[Any, ...] | None:
    """The items of a list as they are now (a list may be appended to in place later)."""
    return tuple(value) if type(value) is list else None


def _grown(stored: tuple[Any, ...] | None, new: Any) -> list[Any] | None:
    """The items ``new`` adds to the ``stored`` ones, if it begins with them; else ``None``.

    By identity, at C speed: the items already stored are the very objects
    in ``new``. An empty list means ``new`` holds exactly the stored items.
    """
    if stored is None or type(new) is not list:
        return None
    count = len(stored)
    if len(new) < count or not all(map(operator.is_, stored, new)):
        return None
    return new[count:]


class PieceReader:
    """Reads the pieces one checkpoint needs, each verified, into its values.

    Args:
        serializer: Decodes user values.
        key: The sealing key, if any.
        pieces: The pieces the store returned with the checkpoint.
        run_id: The run, named in errors.
        checkpoint_id: The checkpoint, named in errors.
    """

    __slots__ = ("_checkpoint_id", "_content", "_key", "_pieces", "_run_id", "_serializer")

    def __init__(
        self,
        serializer: Serializer,
        key: bytes | None,
        pieces: Iterable[Piece],
        *,
        run_id: str,
        checkpoint_id: str,
    ) -> None:
        self._serializer = serializer
        self._key = key
        self._pieces = {piece.piece_id: piece for piece in pieces}
        self._run_id = run_id
        self._checkpoint_id = checkpoint_id
        self._content: dict[str, tuple[str | None, str, Any]] = {}

    def value(self, piece_id: str, what: str) -> Any:
        """The value a piece holds, following what it extends; ``what`` names it in errors.

        Raises:
            CheckpointCorruptError: a piece is missing, fails its seal, or is
                not what the frame names.
        """
        chunks: list[list[Any]] = []
        current: str | None = piece_id
        while current is not None:
            extends, kind, data = self._read(current, what)
            if kind == VALUE:
                if not chunks:
                    return data
                if not isinstance(data, list):
                    raise self._corrupt(current, what, "a list's items extend a value not a list")
                chunks.append(data)
                break
            if kind != APPEND or not isinstance(data, list):
                raise self._corrupt(current, what, f"unknown content {kind!r}")
            chunks.append(data)
            current = extends
        value: list[Any] = []
        for chunk in reversed(chunks):
            value.extend(chunk)
        return value

    def _read(self, piece_id: str, what: str) -> tuple[str | None, str, Any]:
        done = self._content.get(piece_id)
        if done is not None:
            return done
        piece = self._pieces.get(piece_id)
        if piece is None:
            raise self._corrupt(piece_id, what, "it is missing from the store")
        try:
            payload = unseal(
                piece.blob, key=self._key, run_id=self._run_id, checkpoint_id=self._checkpoint_id
            )
        except CheckpointCorruptError as error:
            raise self._corrupt(piece_id, what, error.reason) from None
        document = self._serializer.loads(payload)
        if (
            not isinstance(document, list)
            or len(document) != 4  # noqa: PLR2004 - id, extends, kind, content
            or document[0] != piece_id
            or document[1] != piece.extends
        ):
            raise self._corrupt(piece_id, what, "its content is not the piece stored under its id")
        _, extends, kind, data = document
        self._content[piece_id] = found = (extends, kind, data)
        return found

    def _corrupt(self, piece_id: str, what: str, reason: str) -> CheckpointCorruptError:
        return CheckpointCorruptError(
            self._run_id, self._checkpoint_id, f"piece {piece_id} ({what}): {reason}"
        )
