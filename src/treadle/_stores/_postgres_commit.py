"""The statements of one PostgreSQL commit of checkpoints, shared by commits and migrations."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from treadle._stores import _sql_ownership, _sql_rows, _sql_statements
from treadle._stores._postgres_ownership import Owned, honour_pause, refusal, release_lease
from treadle._stores._postgres_writes import delete_old, insert_checkpoints
from treadle._stores._sql_dialect import POSTGRES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._postgres_pools import Connection
    from treadle._stores._store import CheckpointRecord

_render = functools.cache(POSTGRES.render)
_FENCED_ADVANCE = _sql_statements.ADVANCE_RUN + _sql_ownership.FENCE + " RETURNING pause_requested"


async def commit_checkpoints(
    checkpoints: Sequence[CheckpointRecord],
    keep_last: int | None,
    owned: Owned,
    connection: Connection,
) -> bool:
    """Add ``checkpoints`` to their run and move its row on, in ``connection``'s transaction.

    The run row first: its lock makes concurrent commits (and pauses) of one
    run take turns. Under ``owned.lease`` only while it is current; the inbox
    items it applied are marked consumed; a pause asked of the run is honoured
    here, its barrier. Returns whether the run paused.

    Raises:
        RunNotFoundError, LeaseLostError: as the store's ``commit_many``.
    """
    info = checkpoints[-1].info
    lease = owned.lease
    asked = None  # when a pause was asked of the run, if it was
    if lease is None:
        advanced = await connection.execute(
            _render(_sql_statements.ADVANCE_RUN), _sql_rows.advance_parameters(checkpoints[-1])
        )
        if advanced.rowcount == 0:
            raise await refusal(connection, info.run_id, lease)
    else:
        fenced = (*_sql_rows.advance_parameters(checkpoints[-1]), lease.owner, lease.epoch)
        row = await (await connection.execute(_render(_FENCED_ADVANCE), fenced)).fetchone()
        if row is None:
            raise await refusal(connection, info.run_id, lease)
        asked = row[0]
    await insert_checkpoints(connection, checkpoints)
    now = time.time()
    if owned.consumed is not None:
        consumed = (now, info.run_id, owned.consumed)
        await connection.execute(_render(_sql_ownership.CONSUME_INBOX), consumed)
    paused = False
    if asked is not None:  # this barrier is where the run stops; the lease goes with it
        paused = await honour_pause(connection, info.run_id, info.status)
    elif lease is not None and owned.release:
        await release_lease(connection, lease, now)
    if keep_last is not None:
        await delete_old(connection, info.run_id, keep_last)
    return paused
