"""How ``SqliteStore`` runs its work on a connection: set-up, transactions, busy errors.

A write is one ``BEGIN IMMEDIATE`` transaction, rolled back whole on any
error. Commits grouped into one transaction run one after another
(:func:`each_together`); one that is refused before it wrote anything (a
lost lease, an unknown run: the first statement of a commit finds no row)
fails alone and the others commit. One refused after it wrote (a taken id)
makes the group run again with a savepoint each (:func:`each_saved`), so
its refusal undoes it alone. Savepoints cost two statements a commit, which
is why the usual group goes without.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from treadle._exceptions import DurabilityError
from treadle._stores import _sql_events, _sql_outbox, _sql_schema
from treadle._stores._event_packing import define_functions
from treadle._stores._sql_dialect import SQLITE
from treadle._stores._sqlite_lanes import Unavailable

_T = TypeVar("_T")
_Row = tuple[Any, ...]
_Work = Callable[[sqlite3.Connection], _T]


class WroteThenRefused(Exception):  # noqa: N818 - a signal to the group's driver, not an error
    """A grouped write was refused after it wrote: only a savepoint can undo it alone."""


def each_together(
    works: list[_Work[Any]], connection: sqlite3.Connection
) -> list[tuple[Any, BaseException | None]]:
    """Run ``works`` in the caller's transaction; each refusal that wrote nothing is its own.

    Raises:
        WroteThenRefused: a write was refused after it changed rows (the
            caller rolls the transaction back and runs :func:`each_saved`).
    """
    outcomes: list[tuple[Any, BaseException | None]] = []
    for work in works:
        before = connection.total_changes
        try:
            outcomes.append((work(connection), None))
        except sqlite3.Error:
            raise  # the database itself failed: the whole group rolls back
        except Exception as refused:
            if connection.total_changes != before:
                raise WroteThenRefused from refused
            outcomes.append((None, refused))
    return outcomes


def group_now(
    connection: sqlite3.Connection, works: list[_Work[Any]], where: str
) -> list[tuple[Any, BaseException | None]]:
    """``works`` as one group in one transaction on the caller's thread, never waiting.

    What a group on the store's thread does, but a database locked by
    another connection is not waited for: nothing is done and
    :class:`~treadle._stores._sqlite_lanes.Unavailable` is raised, for the
    thread to wait instead. ``where`` names the store in errors.
    """
    try:
        try:
            return transaction(connection, functools.partial(each_together, works), write=True)
        except WroteThenRefused:  # rolled back: again, one savepoint each
            return transaction(connection, functools.partial(each_saved, works), write=True)
    except sqlite3.Error as error:
        if isinstance(error, sqlite3.OperationalError) and is_busy(error):
            raise Unavailable from error
        failure = DurabilityError(f"{where}: {error}")
        failure.__cause__ = error
        return [(None, failure)] * len(works)


def each_saved(
    works: list[_Work[Any]], connection: sqlite3.Connection
) -> list[tuple[Any, BaseException | None]]:
    outcomes: list[tuple[Any, BaseException | None]] = []
    for work in works:
        connection.execute("SAVEPOINT treadle_commit")
        try:
            outcomes.append((work(connection), None))
        except sqlite3.Error:
            raise  # the database itself failed: the whole group rolls back
        except Exception as refused:  # noqa: BLE001 - this commit's own refusal, reported to it
            connection.execute("ROLLBACK TO treadle_commit")
            outcomes.append((None, refused))
        connection.execute("RELEASE treadle_commit")
    return outcomes


def transaction(connection: sqlite3.Connection, work: _Work[_T], *, write: bool) -> _T:
    if not write:
        return work(connection)
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            # Keep the original error: a failed rollback means SQLite already rolled back.
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        raise
    return result


# Backoff between retries of a lock SQLite refused without waiting (seconds).
_FIRST_PAUSE = 0.001
_LONGEST_PAUSE = 0.05


def retrying(
    connection: sqlite3.Connection, work: _Work[_T], write: bool, busy_timeout: float, where: str
) -> _T:
    """:func:`transaction`, run again while the database is locked, up to ``busy_timeout``.

    The writer's connection answers "locked" at once (``timeout=0``), and so,
    in a few cases, does the reader's (a WAL reset or recovery by another
    process): retried here, on the store's thread, never an event loop's.
    """
    deadline = time.monotonic() + busy_timeout
    pause = _FIRST_PAUSE
    while True:
        try:
            return transaction(connection, work, write=write)
        except sqlite3.OperationalError as error:
            if not is_busy(error):
                raise
            if time.monotonic() >= deadline:
                raise DurabilityError(
                    f"{where} stayed locked by another connection "
                    f"for {busy_timeout:g} s (busy_timeout)"
                ) from error
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)


def is_busy(error: sqlite3.OperationalError) -> bool:
    # The low byte is the primary code: SQLITE_BUSY_SNAPSHOT and the like count too.
    code: int = getattr(error, "sqlite_errorcode", 0)
    return code & 0xFF in {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


def select(query: str, parameters: tuple[Any, ...], connection: sqlite3.Connection) -> list[_Row]:
    return connection.execute(query, parameters).fetchall()


# Caps the -wal file at rest: after a checkpoint SQLite truncates it to this,
# so one burst of writes does not leave a large file behind for good.
_WAL_SIZE_LIMIT = 16 * 1024 * 1024


def configure(connection: sqlite3.Connection, path: str) -> None:
    """Write-ahead logging and fsync'd commits, or a clear refusal where WAL is unavailable.

    Also the SQL functions that write and read packed event rows
    (:func:`~treadle._stores._event_packing.define_functions`).
    """
    (mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode != "wal":
        raise DurabilityError(
            f"SQLite store {path}: write-ahead logging is unavailable "
            f"(journal_mode stays {mode!r}); use a file on a local disk"
        )
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")
    define_functions(connection)


def migrate(connection: sqlite3.Connection, label: str) -> None:
    """Bring the file's schema up to date (``label`` names the store in errors)."""
    connection.execute(SQLITE.render(_sql_schema.CREATE_SCHEMA_TABLE))
    row = connection.execute(SQLITE.render(_sql_schema.SELECT_SCHEMA_VERSION)).fetchone()
    found = None if row is None else int(row[0])
    # MIGRATIONS is read at open, so a test can stand in the list of a newer treadle.
    for template, parameters in _sql_schema.upgrade(found, label, _sql_schema.MIGRATIONS):
        connection.execute(SQLITE.render(template), parameters)
    if found is None and connection.execute(_sql_events.ANY_EVENT).fetchone() is None:
        for statement in _sql_events.SQLITE_EVENTS_BY_KEY:  # a new file: see there
            connection.execute(statement)
    connection.execute(_sql_events.SQLITE_SEQ_GUARD)
    # An outbox feed made by an older treadle reads rows as JSON text, which a packed
    # row is not, or feeds from treadle_events alone: it is made again as it is now.
    if connection.execute(_sql_outbox.SQLITE_OLD_FEED).fetchone() is not None:
        for statement in (*_sql_outbox.SQLITE_DROP_FEED, *_sql_outbox.SQLITE_FEED):
            connection.execute(statement)
