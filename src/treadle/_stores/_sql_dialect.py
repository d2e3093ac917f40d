"""The few parts of SQL in which SQLite and PostgreSQL differ, and nothing else.

Every statement of the SQL stores is written once, in the subset of SQL that
both agree on (``TEXT``, ``BIGINT``, ``DOUBLE PRECISION``, ``INSERT ... ON
CONFLICT DO NOTHING``, ``LIMIT``), as a template. A :class:`Dialect`
(:data:`SQLITE`, :data:`POSTGRES`) fills in what differs: the bytes column
type, the driver's parameter marker, and the column that records insertion
order. A backend renders the templates it needs once, with its own dialect.

Insertion order matters twice: it breaks ties between rows with equal
timestamps, and retention keeps the most recently *committed* checkpoints,
which is the order a run actually moved in even when it was resumed from an
older point and so went back to a smaller superstep.

The templates themselves are :mod:`treadle._stores._sql_tables`' (tables),
:mod:`treadle._stores._sql_schema`'s (migrations),
:mod:`treadle._stores._sql_statements`' (runs and checkpoints)
and :mod:`treadle._stores._sql_ownership`'s (leases, the inbox, claims).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dialect:
    """The parts of the SQL that differ between backends, and nothing else.

    Attributes:
        blob_type: Column type for opaque bytes (``BLOB``, ``BYTEA``).
        placeholder: The driver's parameter marker (``?``, ``%s``); templates
            use ``?``.
        insertion_order: A column that grows with every insert, in both
            tables (SQLite's implicit ``rowid``; an identity column elsewhere).
        insertion_order_column: DDL declaring that column, followed by a
            comma; empty when the database provides it implicitly, as then
            (SQLite's ``rowid``) every index ends with it implicitly too.
        id_rows: A SELECT of one text column with a row per element of a
            JSON array of strings given as one parameter (``{ids}`` in a
            template): how a list of ids of any length travels as one value.
        binary_text: What makes text compare by code point (``{binary}`` in
            a template, after a column): nothing in SQLite, whose default
            does; PostgreSQL's ``"C"`` collation, whose default follows
            the database's locale. Filters of runs order text this way.
    """

    blob_type: str
    placeholder: str
    insertion_order: str
    insertion_order_column: str
    id_rows: str
    binary_text: str = ""

    def render(self, template: str) -> str:
        """Turn a template of the SQL stores into SQL for this dialect."""
        # An explicit order column must be named where an index breaks ties by it.
        tiebreak = f", {self.insertion_order}" if self.insertion_order_column else ""
        sql = template.format(
            blob=self.blob_type,
            order=self.insertion_order,
            order_column=self.insertion_order_column,
            tiebreak=tiebreak,
            ids=self.id_rows,
            binary=self.binary_text,
        )
        # Templates hold no literal question marks, so the rewrite is exact.
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)


SQLITE = Dialect(
    blob_type="BLOB",
    placeholder="?",
    insertion_order="rowid",
    insertion_order_column="",
    id_rows="SELECT value FROM json_each(?)",
)
"""SQLite: ``rowid`` never decreases here because the newest row of a run is never deleted."""

POSTGRES = Dialect(
    blob_type="BYTEA",
    placeholder="%s",
    insertion_order="seq",
    insertion_order_column="seq BIGINT GENERATED ALWAYS AS IDENTITY,",
    id_rows="SELECT json_array_elements_text(CAST(? AS json))",
    binary_text=' COLLATE "C"',
)
"""PostgreSQL: an identity column, in commit order per run (a commit locks its run row first)."""
