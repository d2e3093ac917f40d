"""The SQL stores' statements about pieces, written once for both backends.

Templates in the neutral dialect of :mod:`treadle._stores._sql_dialect`;
``{ids}`` takes a list of ids as one JSON array parameter
(:func:`treadle._stores._pieces.ids_text`), so a statement's text does not
depend on how many ids it is given.
"""

from __future__ import annotations

import functools

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

# What the checkpoints of a run's whole lineage name: the run, the run it was
# forked from, and every fork of either, who may share its pieces.
SELECT_LINEAGE_REFS = """
SELECT c.refs
FROM treadle_checkpoints AS c
JOIN treadle_runs AS r ON r.run_id = c.run_id
WHERE r.lineage = (SELECT lineage FROM treadle_runs WHERE run_id = ?) AND c.refs IS NOT NULL"""
