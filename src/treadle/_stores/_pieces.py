"""Which pieces a store deletes when checkpoints go, decided once for every backend.

Checkpoints share pieces (see :class:`~treadle._stores._store.Piece`): a
value no superstep rewrote is named by every checkpoint after the one that
stored it, a list's appended items extend the piece before them, and a fork
names its parent's pieces. So deleting a checkpoint (retention, ``prune``)
may delete only the pieces that no remaining checkpoint needs.

A store keeps one invariant: **every stored piece is needed** — named by a
kept checkpoint, or extended by a needed piece. Then, when checkpoints go,
only the pieces they named can have become unneeded, and then the pieces
those extend, and so on down the chains; nothing else needs looking at, so
the work is proportional to what the deleted checkpoints named, not to the
store.

:func:`collect` makes that decision without doing any I/O (the same code
serves SQLite on its thread, PostgreSQL on its event loop and the memory
store under its lock): it yields the ids it needs the links of, and is sent
back the ``(piece_id, extends)`` rows of the stored pieces that have one of
those ids or extend one of them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeAlias

from treadle._exceptions import CheckpointCorruptError, CheckpointNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable, Sequence

    from treadle._stores._store import CheckpointRecord, Piece

Links: TypeAlias = "list[tuple[str, str | None]]"
"""Rows of (piece id, the piece it extends or ``None``)."""

Collection: TypeAlias = "Generator[list[str], Links, set[str]]"


def collect(named: Iterable[str], needed: set[str]) -> Collection:
    """Decide which pieces to delete, given what deleted checkpoints named.

    Args:
        named: The pieces the deleted checkpoints named.
        needed: The pieces the remaining checkpoints of the lineage name
            (directly; what those extend is found through the links).

    Yields:
        Ids whose links are wanted; send back the links of the stored
        pieces with one of those ids or extending one of them.

    Returns:
        The ids of the pieces to delete.
    """
    doomed: set[str] = set()
    frontier = set(named) - needed
    while frontier:
        rows = yield sorted(frontier)
        extends_of: dict[str, str | None] = {}
        extenders: dict[str, list[str]] = {piece: [] for piece in frontier}
        for piece_id, extends in rows:
            if piece_id in frontier:
                extends_of[piece_id] = extends
            if extends in extenders and piece_id not in doomed:
                extenders[extends].append(piece_id)
        # Extended by a piece outside the frontier (needed, by the invariant), it stays;
        # and so does a piece extended by one that stays, to a fixed point.
        staying = {p for p in frontier if any(e not in frontier for e in extenders[p])}
        grown = True
        while grown:
            grown = False
            for piece in frontier - staying:
                if any(e in staying for e in extenders[piece]):
                    staying.add(piece)
                    grown = True
        gone = (frontier - staying) & extends_of.keys()  # one not found is gone already
        doomed |= gone
        below = {extends_of[piece] for piece in gone}
        frontier = {piece for piece in below if piece is not None} - needed - doomed - staying
    return doomed


def run_collection(collection: Collection, links: Callable[[list[str]], Links]) -> set[str]:
    """Drive :func:`collect` with a blocking ``links`` lookup; return the doomed ids."""
    try:
        wanted = next(collection)
        while True:
            wanted = collection.send(links(wanted))
    except StopIteration as done:
        doomed: set[str] = done.value
        return doomed


def complete(refs: Iterable[str], pieces: Iterable[Piece]) -> bool:
    """Whether ``pieces`` hold every piece in ``refs`` and every piece those extend."""
    found = {piece.piece_id: piece.extends for piece in pieces}
    wanted = [*refs, *(extends for extends in found.values() if extends is not None)]
    return all(piece in found for piece in wanted)


def required_pieces(checkpoints: Sequence[CheckpointRecord]) -> set[str]:
    """The pieces checkpoints about to be committed require to be stored already."""
    required = {piece for checkpoint in checkpoints for piece in checkpoint.requires}
    if required:
        required -= {piece.piece_id for c in checkpoints for piece in c.pieces}
    return required


def missing_required(
    checkpoints: Sequence[CheckpointRecord], stored: set[str]
) -> CheckpointNotFoundError:
    """The error for checkpoints whose required pieces are not all ``stored``."""
    info = next(c.info for c in checkpoints if c.requires)
    gone = ", ".join(sorted(required_pieces(checkpoints) - stored))
    return CheckpointNotFoundError(
        info.run_id,
        info.parent_checkpoint_id,
        f"it was pruned while the run went on from it (its pieces {gone} are gone)",
    )


def refs_text(refs: Iterable[str]) -> str | None:
    """How a checkpoint row stores the ids its frame names: a JSON array, or NULL for none."""
    listed = list(refs)
    return json.dumps(listed, separators=(",", ":")) if listed else None


def refs_of(text: object, run_id: str, checkpoint_id: str) -> tuple[str, ...]:
    """The ids :func:`refs_text` stored in the ``refs`` cell of checkpoint ``checkpoint_id``.

    Raises:
        CheckpointCorruptError: The cell holds anything but a JSON array of ids
            (a bad disk, a hand edit), named rather than raised as a decoding error.
    """
    if text is None or text == "":
        return ()
    try:
        listed = json.loads(text) if isinstance(text, str | bytes) else None
    except ValueError:  # not JSON (UnicodeDecodeError is one too)
        listed = None
    if not isinstance(listed, list) or not all(isinstance(ref, str) for ref in listed):
        shown = text[:60] if isinstance(text, str | bytes) else text
        reason = f"its refs cell is not a JSON array of piece ids: {shown!r}"
        raise CheckpointCorruptError(run_id, checkpoint_id, reason)
    return tuple(listed)


def refs_of_rows(rows: Iterable[Sequence[Any]]) -> list[str]:
    """Every id named by rows of (run id, checkpoint id, refs cell), as the SQL stores select them.

    Raises:
        CheckpointCorruptError: A row's cell is not what :func:`refs_text` writes.
    """
    return [
        ref for run_id, checkpoint_id, text in rows for ref in refs_of(text, run_id, checkpoint_id)
    ]


def ids_text(ids: Iterable[str]) -> str:
    """Ids as one JSON array parameter, which the SQL stores' ``{ids}`` expands to rows."""
    return json.dumps(list(ids), separators=(",", ":"))
