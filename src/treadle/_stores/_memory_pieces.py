"""The pieces ``MemoryStore`` keeps: stored once, shared by checkpoints, collected with them.

Which pieces go when checkpoints are deleted is decided by
:func:`treadle._stores._pieces.collect`, as in the SQL stores; this is only
where they live. Called under the store's lock.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from treadle._stores._pieces import (
    collect,
    missing_required,
    required_pieces,
    run_collection,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._stores._pieces import Links
    from treadle._stores._store import CheckpointRecord, Piece


class MemoryPieces:
    """Pieces by id, and which pieces extend each one."""

    __slots__ = ("_extended_by", "_pieces")

    def __init__(self) -> None:
        self._pieces: dict[str, Piece] = {}
        self._extended_by: dict[str, set[str]] = {}

    def check(self, checkpoints: Sequence[CheckpointRecord]) -> None:
        """Refuse checkpoints whose required pieces are gone.

        Raises:
            CheckpointNotFoundError: a required piece is gone (pruned meanwhile).
        """
        required = required_pieces(checkpoints)
        stored = {piece for piece in required if piece in self._pieces}
        if len(stored) < len(required):
            raise missing_required(checkpoints, stored)

    def add(self, checkpoints: Sequence[CheckpointRecord]) -> None:
        """Store the checkpoints' new pieces."""
        for checkpoint in checkpoints:
            for piece in checkpoint.pieces:
                self._pieces[piece.piece_id] = piece
                if piece.extends is not None:
                    self._extended_by.setdefault(piece.extends, set()).add(piece.piece_id)

    def needed(self, refs: Iterable[str]) -> tuple[Piece, ...]:
        """The pieces named by ``refs`` and all they extend (missing ones are absent)."""
        found: dict[str, Piece] = {}
        wanted = list(refs)
        while wanted:
            piece = self._pieces.get(wanted.pop())
            if piece is not None and piece.piece_id not in found:
                found[piece.piece_id] = piece
                if piece.extends is not None:
                    wanted.append(piece.extends)
        return tuple(found.values())

    def collect(self, named: Iterable[str], needed: set[str]) -> None:
        """Delete what deleted checkpoints ``named`` that no checkpoint naming ``needed`` needs."""
        doomed = run_collection(collect(named, needed), self._links)
        for piece_id in doomed:
            piece = self._pieces.pop(piece_id)
            self._extended_by.pop(piece_id, None)
            if piece.extends is not None:
                extenders = self._extended_by.get(piece.extends)
                if extenders is not None:
                    extenders.discard(piece_id)
                    if not extenders:
                        del self._extended_by[piece.extends]

    def __len__(self) -> int:
        """How many pieces are stored."""
        return len(self._pieces)

    def _links(self, ids: list[str]) -> Links:
        rows: Links = []
        for piece_id in ids:
            piece = self._pieces.get(piece_id)
            if piece is not None:
                rows.append((piece_id, piece.extends))
            rows.extend((extender, piece_id) for extender in self._extended_by.get(piece_id, ()))
        return rows


def bare(checkpoint: CheckpointRecord) -> CheckpointRecord:
    """A checkpoint as kept: its pieces live in the store's piece table, once."""
    if not checkpoint.pieces and not checkpoint.requires:
        return checkpoint
    return dataclasses.replace(checkpoint, pieces=(), requires=())
