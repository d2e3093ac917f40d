"""The SQL stores' graph descriptions, each kept once however many runs name it.

A run keeps the description of the graph it was started with (what a resume
checks the workflow against). Every run of one workflow version has the same
one, a few hundred bytes or more: kept in each run's row, it was a fifth of
what a parked run cost its store. ``treadle_graphs`` keeps each distinct
description once, under its digest (the first 16 bytes of its SHA-256), and a
run's row names it in ``graph_digest``, its own ``graph`` column left empty.

A write stores the description in the transaction that names it, unless a
row holds it already, and never waits for another writer: without a unique
key, two PostgreSQL transactions that store one new description at once each
add a row of the same bytes, which reads take either of. Rows written before
schema version 16 (and pending runs, which have no description yet) hold
their own in ``graph`` with ``graph_digest`` NULL: a read takes the named
description when there is one, else the row's own. A description outlives
its runs: it is a workflow's shape, not a run's data, and a later run may
name it again.
"""

from __future__ import annotations

import hashlib

INSERT_GRAPH = """
INSERT INTO treadle_graphs (digest, graph)
SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM treadle_graphs WHERE digest = ?)"""

GRAPH_OF_RUN = (
    "COALESCE((SELECT g.graph FROM treadle_graphs AS g WHERE g.digest = r.graph_digest LIMIT 1),"
    " r.graph)"
)
"""A run's description, from ``r`` (its row in ``treadle_runs``), for a SELECT list."""

ELSEWHERE = b""
"""What a row naming its description by digest holds in its own ``graph`` column."""


def digest_of(graph: bytes) -> bytes:
    """The key ``graph`` is kept under: 128 bits of SHA-256, as good as unique."""
    return hashlib.sha256(graph).digest()[:16]


def insert_parameters(digest: bytes, graph: bytes) -> tuple[bytes, bytes, bytes]:
    """The parameters of :data:`INSERT_GRAPH`."""
    return (digest, graph, digest)
