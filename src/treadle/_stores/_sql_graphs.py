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

Because none is ever deleted, a store object that has seen a write naming a
description commit need not send it again (:class:`KeptGraphs`): the runs
of one workflow then cost one INSERT of their description per process, not
one per run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class Described:
    """A graph description as one write names it.

    Attributes:
        digest: What the run row names (:func:`digest_of`).
        graph: The description, for the write to store unless a row holds it
            already; ``None``: a write of this store object that named it
            has committed, so the store holds it and nothing is sent.
    """

    digest: bytes
    graph: bytes | None


_KNOWN_LIMIT = 256
"""Descriptions a store object remembers; past it, it forgets them all and starts again."""


class KeptGraphs:
    """The descriptions one store object has seen committed, so that it sends each once.

    Only a committed write counts (:meth:`committed` is called after the
    commit returns): a description stored by a write that rolled back is not
    in the store, and the next write stores it. Another process, or another
    store object on the same database, learns on its own first write, whose
    ``INSERT ... WHERE NOT EXISTS`` finds the row. The map is keyed by the
    description's bytes, whose hash Python keeps with the object, so a
    workflow that hands the same bytes each time is looked up without hashing
    them again. Each method is one or two steps on a dict, which the GIL
    keeps whole, so a store's event loops in several threads may share it: at
    worst one of them sends a description once more.
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[bytes, bytes] = {}

    def described(self, graph: bytes) -> Described:
        """``graph`` as the next write names it: without its bytes when the store holds it."""
        digest = self._known.get(graph)
        if digest is not None:
            return Described(digest, None)
        return Described(digest_of(graph), graph)

    def committed(self, described: Described) -> None:
        """A write naming ``described`` committed: the store holds its description now."""
        if described.graph is None:
            return
        if len(self._known) >= _KNOWN_LIMIT:
            self._known.clear()
        self._known[described.graph] = described.digest
