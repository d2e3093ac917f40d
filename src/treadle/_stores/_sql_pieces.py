"""The SQL stores' statements about pieces, written once for both backends.

Templates in the neutral dialect of :mod:`treadle._stores._sql_dialect`;
``{ids}`` takes a list of ids as one JSON array parameter
(:func:`treadle._stores._pieces.ids_text`), so a statement's text does not
depend on how many ids it is given.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from treadle._stores._store import CheckpointRecord

INSERT_PIECE = """
INSERT INTO treadle_pieces (piece_id, extends, blob) VALUES (?, ?, ?)
ON CONFLICT (piece_id) DO NOTHING"""

_ONE_PIECE = "(?, ?, ?)"

PIECES_PER_STATEMENT = 300
"""At most this many pieces per INSERT: 900 parameters, within every SQLite's limit."""


@functools.cache
def insert_pieces(count: int) -> str:
    """``INSERT_PIECE`` for ``count`` pieces at once."""
    return INSERT_PIECE.replace(_ONE_PIECE, ", ".join([_ONE_PIECE] * count))


def piece_inserts(checkpoints: Sequence[CheckpointRecord]) -> Iterator[tuple[str, list[Any]]]:
    """The statements (template, parameters) that insert the checkpoints' new pieces."""
    pieces = [piece for checkpoint in checkpoints for piece in checkpoint.pieces]
    for start in range(0, len(pieces), PIECES_PER_STATEMENT):
        batch = pieces[start : start + PIECES_PER_STATEMENT]
        values = [value for piece in batch for value in (piece.piece_id, piece.extends, piece.blob)]
        yield insert_pieces(len(batch)), values


# The pieces a checkpoint needs: those its frame names (the parameter), and
# every piece they extend, down each chain. One statement: one read, one snapshot.
SELECT_NEEDED = """
WITH RECURSIVE needed(piece_id) AS (
    {ids}
    UNION
    SELECT p.extends FROM treadle_pieces AS p
    JOIN needed AS n ON p.piece_id = n.piece_id
    WHERE p.extends IS NOT NULL
)
SELECT p.piece_id, p.extends, p.blob
FROM needed AS n JOIN treadle_pieces AS p ON p.piece_id = n.piece_id"""

# Which of the given pieces are stored.
SELECT_STORED = "SELECT piece_id FROM treadle_pieces WHERE piece_id IN ({ids})"

# The links retention looks at: the given pieces, and those extending one of
# them (the ids come twice, as two parameters).
SELECT_LINKS = """
SELECT piece_id, extends FROM treadle_pieces WHERE piece_id IN ({ids})
UNION
SELECT piece_id, extends FROM treadle_pieces WHERE extends IN ({ids})"""

DELETE_PIECES = "DELETE FROM treadle_pieces WHERE piece_id IN ({ids})"

# What the checkpoints of a run's whole lineage name: the runs that may share
# its pieces are those it was forked from, up to the root, and every fork of
# the root, down the tree (each step an index lookup: runs are few per tree).
SELECT_LINEAGE_REFS = """
WITH RECURSIVE up(run_id, parent) AS (
    SELECT run_id, parent_run_id FROM treadle_runs WHERE run_id = ?
    UNION
    SELECT r.run_id, r.parent_run_id FROM treadle_runs AS r JOIN up ON r.run_id = up.parent
),
down(run_id) AS (
    SELECT run_id FROM up WHERE parent IS NULL
    UNION
    SELECT r.run_id FROM treadle_runs AS r JOIN down ON r.parent_run_id = down.run_id
)
SELECT c.run_id, c.checkpoint_id, c.refs
FROM down JOIN treadle_checkpoints AS c ON c.run_id = down.run_id
WHERE c.refs IS NOT NULL"""
