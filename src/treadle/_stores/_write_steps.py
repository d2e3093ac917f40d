"""The vocabulary of the SQL stores' writes, sans I/O: steps a plan yields, drivers execute.

A *plan* (:mod:`treadle._stores._write_plans`, :mod:`treadle._stores._control_plans`)
is a generator: it yields one :data:`Step` (a statement template of the
SQL modules, its parameters, and what it wants back), is sent the answer,
and returns the write's outcome or raises its refusal. It never touches a
connection. A *driver* runs it inside the transaction its store began:
:func:`treadle._stores._sqlite_transactions.drive` with sqlite3, blocking, on
the store's thread; :func:`treadle._stores._postgres_writes.drive` with
psycopg, awaiting. So the sequence of statements of a commit, a delete, a
migration or a pause is written once, as h11 writes HTTP once for httpcore
to drive over any socket.

Plans are values until driven, and each keeps to its own run's rows: a
driver may run several in one transaction (each in a savepoint of its own,
as ``SqliteStore`` groups commits), which is how commits of many runs can
share one transaction and one fsync.

What differs between the backends, beyond the dialect a driver renders
templates in, is a :class:`Backend` value the plans consult.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

from treadle._stores import _sql_audit, _sql_events, _sql_ownership, _sql_rows, _sql_statements

if TYPE_CHECKING:
    from treadle._stores._events import EventEntry

_T = TypeVar("_T")

COUNT: Final = "count"
"""A step wanting how many rows its statement changed."""
ONE: Final = "one"
"""A step wanting its statement's first row (``None``: none)."""
ALL: Final = "all"
"""A step wanting every row its statement returns."""
NOTHING: Final = "nothing"
"""A step wanting nothing back."""


Step: TypeAlias = "tuple[str, tuple[Any, ...] | list[Any], str, bool]"
"""One statement of a plan, and what the plan wants back from it.

A plain tuple, ``(template, parameters, want, lock)`` (a commit makes
several of them, on the hot path): ``template`` is a statement of the SQL
modules in the neutral dialect, ``parameters`` its parameters in order,
``want`` one of :data:`COUNT`, :data:`ONE`, :data:`ALL` or :data:`NOTHING`,
and ``lock`` marks a SELECT that locks the rows it reads until the
transaction ends (PostgreSQL's ``FOR UPDATE``; SQLite's one writer needs none).
"""


Plan: TypeAlias = Generator[Step, Any, _T]
"""A write, sans I/O: yields steps, is sent each one's answer, returns the outcome."""


@dataclass(frozen=True, slots=True)
class Backend:
    """What the plans do differently on one backend (the dialect aside).

    Attributes:
        name: The backend, for messages.
        advance: How a commit moves the run row on, without a lease.
        advance_parameters: The parameters of ``advance`` for a checkpoint.
        status_apart: The run's status is written by a statement of its own,
            only when it changes (SQLite: naming an indexed column in a SET
            rewrites its index entry, one more page per commit, changed or not).
        advance_and_release: One statement that advances the run row and
            gives the lease up (a run coming to rest), or ``None``: a
            release of its own follows the advance.
        clears_ready: A commit that applies the last delivered item clears
            the run's ``ready_at`` (SQLite; PostgreSQL's workers keep it set
            while they own the run, so a run whose worker died is claimed again).
        notifies: Tell idle workers when a write leaves a run ready
            (PostgreSQL's ``NOTIFY``).
        chain_lock: A statement making writers of the audit chain take turns
            until they commit, or ``None`` (SQLite's one writer takes turns already).
        returning: A commit's fenced advance reads the run row back in the
            statement (``RETURNING``); else it asks for the usual case in
            its WHERE and reads only a row that differs (SQLite, which
            stages RETURNING rows in a temporary table: see ``_advances``).
        event_row: The parameters of a row of a run's log for its events:
            the log's JSON (PostgreSQL, whose webhooks' trigger reads it as
            ``jsonb``), or SQLite's shorter layout (see ``_event_rows``).
        logs_in_checkpoints: A commit of one checkpoint writes its events
            in the checkpoint's row, not a row of the log's table (SQLite,
            where a commit costs what B-trees it writes: see ``_sql_events``).
    """

    name: str
    advance: str
    advance_parameters: Callable[[Any], tuple[Any, ...]]
    status_apart: bool
    advance_and_release: str | None
    clears_ready: bool
    notifies: bool
    chain_lock: str | None
    returning: bool
    event_row: Callable[[str, Sequence[EventEntry]], tuple[Any, ...]]
    logs_in_checkpoints: bool


SQLITE_WRITES = Backend(
    name="SQLite",
    advance=_sql_statements.ADVANCE_RUN_POSITION,
    advance_parameters=_sql_rows.position_parameters,
    status_apart=True,
    advance_and_release=_sql_ownership.ADVANCE_AND_RELEASE,
    clears_ready=True,
    notifies=False,
    chain_lock=None,
    returning=False,
    event_row=_sql_events.sqlite_event_row,
    logs_in_checkpoints=True,
)
"""``SqliteStore``'s writes."""

POSTGRES_WRITES = Backend(
    name="PostgreSQL",
    advance=_sql_statements.ADVANCE_RUN,
    advance_parameters=_sql_rows.advance_parameters,
    status_apart=False,
    advance_and_release=None,
    clears_ready=False,
    notifies=True,
    chain_lock=_sql_audit.LOCK_CHAIN,
    returning=True,
    event_row=_sql_events.event_row,
    logs_in_checkpoints=False,
)
"""``PostgresStore``'s writes (and a worker's ``LeasedStore``'s)."""
