"""Writes that ``PostgresStore`` and a worker's ``LeasedStore`` make alike.

Kept apart from both so that importing the worker side needs no psycopg at
import time (the ``Connection`` type is for annotations only).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from treadle._stores import _sql_rows, _sql_rules, _sql_statements
from treadle._stores._sql_dialect import POSTGRES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._postgres_pools import Connection
    from treadle._stores._store import CheckpointRecord

_render = functools.cache(POSTGRES.render)

READY_CHANNEL = "treadle_ready"
"""Where a run becoming ready is announced, so idle workers claim it at once."""

# Sent when the transaction commits (never for one rolled back), and only to
# listeners on this schema: writers of other schemas in the database do not wake them.
NOTIFY_READY = f"SELECT pg_notify('{READY_CHANNEL}', current_schema())"
"""Announce on :data:`READY_CHANNEL` that a run of this schema became ready."""


async def insert_checkpoints(
    connection: Connection, checkpoints: Sequence[CheckpointRecord]
) -> None:
    """Insert checkpoints in one statement, in order (their ``seq`` follows it).

    Raises:
        ValueError: an id is taken.
    """
    parameters = [value for c in checkpoints for value in _sql_rows.checkpoint_parameters(c)]
    query = _render(_sql_statements.insert_checkpoints(len(checkpoints)))
    if (await connection.execute(query, parameters)).rowcount < len(checkpoints):
        raise ValueError(_sql_rules.taken_ids_message(checkpoints))
