"""The async driver of the SQL stores' write plans, for ``PostgresStore`` and ``LeasedStore``.

:func:`drive` executes a plan's steps (see
:mod:`treadle._stores._write_steps`) with psycopg on a pooled connection,
awaiting each, inside the transaction its caller began. Kept apart from both
stores so that importing the worker side needs no psycopg at import time
(the ``Connection`` type is for annotations only).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._stores import _sql_ownership, _write_parts
from treadle._stores._sql_dialect import POSTGRES
from treadle._stores._write_steps import ALL, COUNT, ONE, POSTGRES_WRITES

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from psycopg import AsyncCursor

    from treadle._stores._audit import Recorded
    from treadle._stores._postgres_pools import Connection
    from treadle._stores._records import CheckpointRecord
    from treadle._stores._write_steps import Plan, Step

_T = TypeVar("_T")

_render = functools.cache(POSTGRES.render)
_LOCK = " FOR UPDATE"

READY_CHANNEL = _sql_ownership.READY_CHANNEL
"""Where a run becoming ready is announced, so idle workers claim it at once."""
NOTIFY_READY = _sql_ownership.NOTIFY_READY
"""Announce on :data:`READY_CHANNEL` that a run of this schema became ready."""


async def drive(plan: Plan[_T], connection: Connection) -> _T:
    """Execute ``plan`` on ``connection``, in its caller's transaction; return its outcome.

    A locking step selects ``FOR UPDATE``: the row stays locked until the
    transaction ends, so writers deciding about one run take turns.
    """
    try:
        template, parameters, want, lock = next(plan)
        while True:
            if lock:
                template += _LOCK
            cursor = await connection.execute(_render(template), parameters or None)
            template, parameters, want, lock = plan.send(await answer(cursor, want))
    except StopIteration as done:
        outcome: _T = done.value
        return outcome


async def ends_on_first_read(plan: Plan[_T], connection: Connection) -> tuple[bool, _T | None]:
    """Run ``plan``'s first statement alone, outside a transaction: ``(True, outcome)`` if it ends.

    For a plan that usually ends on the answer of a first statement that
    only reads: asked this way, that answer costs one round trip. Else
    (``(False, None)``: the plan goes on, or its first statement is no
    plain ``SELECT``) the plan is closed, nothing written, for its caller to
    run again whole, in a transaction.
    """
    template, parameters, want, lock = next(plan)
    if lock or not template.lstrip().upper().startswith("SELECT "):
        plan.close()
        return False, None
    cursor = await connection.execute(_render(template), parameters or None)
    try:
        plan.send(await answer(cursor, want))
    except StopIteration as done:
        return True, done.value
    plan.close()
    return False, None


async def run_batch(steps: Sequence[Step], connection: Connection) -> list[Any]:
    """Send ``steps`` as one query, run as one implicit transaction; each one's answer, in order.

    One round trip: the statements go together, with their parameters bound
    on this side (psycopg's client-side cursor: PostgreSQL's protocol takes
    several statements in one query only without parameters), and each
    statement's result is read from the query's results in turn. The
    connection must not be in a transaction (the pool's are in autocommit);
    an error in any statement rolls all of them back.
    """
    from psycopg import AsyncClientCursor  # noqa: PLC0415 - psycopg only when driven

    query = ";\n".join(_render(t) + (_LOCK if lock else "") for t, _, _, lock in steps)
    parameters = [value for _, given, _, _ in steps for value in given]
    cursor = AsyncClientCursor(connection)
    await cursor.execute(query, parameters)
    answers = []
    for position, (_, _, want, _) in enumerate(steps):
        if position:
            cursor.nextset()
        answers.append(await answer(cursor, want))
    return answers


async def insert_checkpoints(
    connection: Connection, checkpoints: Sequence[CheckpointRecord]
) -> None:
    """Insert checkpoints in one statement, in order, with their pieces and events.

    Raises:
        ValueError: an id is taken.
    """
    await drive(_write_parts.insert_checkpoints(checkpoints, POSTGRES_WRITES), connection)


async def record(connection: Connection, records: Iterable[Recorded], at: float) -> None:
    """Write each action's audit entry and its event in its run's log, in this transaction."""
    await drive(_write_parts.record(records, at, POSTGRES_WRITES), connection)


async def log_status(connection: Connection, run_id: str, at: float, by: str) -> None:
    """Record in the run's log the status the store just gave it for a caller (``by``)."""
    await drive(_write_parts.log_status(run_id, at, by), connection)


async def answer(cursor: AsyncCursor[Any], want: object) -> Any:
    """What a step that wants ``want`` is told of its statement's ``cursor``."""
    if want is COUNT:
        return cursor.rowcount
    if want is ONE:
        return await cursor.fetchone()
    if want is ALL:
        return await cursor.fetchall()
    return None
