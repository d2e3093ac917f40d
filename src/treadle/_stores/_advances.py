"""How a commit moves its run row on under a lease, and learns what it must of the row.

A commit's advance is fenced: it changes the row only while the lease's
owner and epoch are the row's. It must also learn whether a pause was
asked meanwhile (the commit then honours it) and, where the status is
written by a statement of its own (SQLite), whether the status stored is
the one the commit leaves. PostgreSQL reads that in the advance itself
(``RETURNING``). SQLite stages a statement's RETURNING rows in a temporary
table, which costs more instructions than another statement, so its
advance instead asks in its WHERE for the usual case (no pause asked, the
status as it was); only a row that differs is read, then advanced.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from treadle._stores import _sql_ownership
from treadle._stores._write_steps import COUNT, NOTHING, ONE

if TYPE_CHECKING:
    from treadle._stores._write_steps import Backend, Plan


# What a fenced advance reads back from the run row: whether a pause was asked
# meanwhile, and the status too where a commit writes it apart (only when it changes).
_ASKED = "pause_requested"
_ASKED_AND_STATUS = "pause_requested, status"
_NOT_ASKED = (None,)


@functools.cache
def fenced(advance: str) -> str:
    """A run row's advance under a lease: only while its owner and epoch are the lease's."""
    return advance + _sql_ownership.FENCE


@functools.cache
def _returning(advance: str, columns: str) -> str:
    return f"{advance} RETURNING {columns}"


# SQLite's fenced advance, taking the usual case for granted: no pause asked, and
# (where the status is written apart) the run's status what this commit leaves.
_AS_USUAL = " AND pause_requested IS NULL"
_AS_USUAL_WITH_STATUS = _AS_USUAL + " AND status = ?"


@functools.cache
def _as_usual(advance: str, with_status: bool) -> str:
    return advance + (_AS_USUAL_WITH_STATUS if with_status else _AS_USUAL)


@functools.cache
def _read_fenced(columns: str) -> str:
    return (
        f"SELECT {columns} FROM treadle_runs WHERE run_id = ?"  # noqa: S608 - constants only
        + _sql_ownership.FENCE
    )


def advanced(
    advance: str,
    parameters: tuple[object, ...],
    fence: tuple[object, ...],
    status: str | None,
    run_id: str,
    backend: Backend,
) -> Plan[tuple[object, ...] | None]:
    """A fenced advance of a run row: whether a pause was asked (and the row's status).

    The status is read with ``status`` (the one this commit leaves); ``None``
    is returned when nothing advanced: the lease is gone. See the module
    docstring for how each backend reads them.
    """
    columns = _ASKED if status is None else _ASKED_AND_STATUS
    if backend.returning:
        row: tuple[object, ...] | None = yield (
            _returning(advance, columns),
            (*parameters, *fence),
            ONE,
            False,
        )
        return row
    usual = (*parameters, *fence) if status is None else (*parameters, *fence, status)
    if (yield (_as_usual(advance, status is not None), usual, COUNT, False)) == 1:
        return _NOT_ASKED if status is None else (None, status)
    row = yield (_read_fenced(columns), (run_id, *fence), ONE, False)
    if row is None:
        return None  # not this lease's any more
    yield (advance, (*parameters, *fence), NOTHING, False)
    return row
