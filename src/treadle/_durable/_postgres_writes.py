"""Writes that ``PostgresStore`` and a worker's ``LeasedStore`` make alike.

Kept apart from both so that importing the worker side needs no psycopg at
import time (the ``Connection`` type is for annotations only).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from treadle._durable import _sql
from treadle._durable._sql import POSTGRES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._durable._postgres_pools import Connection
    from treadle._durable._store import CheckpointRecord

_render = functools.cache(POSTGRES.render)


async def insert_checkpoints(
    connection: Connection, checkpoints: Sequence[CheckpointRecord]
) -> None:
    """Insert checkpoints in one statement, in order (their ``seq`` follows it).

    Raises:
        ValueError: an id is taken.
    """
    parameters = [value for c in checkpoints for value in _sql.checkpoint_parameters(c)]
    query = _render(_sql.insert_checkpoints(len(checkpoints)))
    if (await connection.execute(query, parameters)).rowcount < len(checkpoints):
        raise ValueError(_sql.taken_ids_message(checkpoints))
