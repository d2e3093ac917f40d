"""The store port: the handful of operations durability needs, as roles.

A store keeps two things per run: one **run row** (status, latest
checkpoint, lineage) and its **checkpoints** (one per committed superstep:
a sealed, opaque frame, and the :class:`Piece` s it names, which successive
checkpoints and forks share). It never interprets a blob; encoding, checksums and
graph fingerprints belong to the checkpoint codec, so a backend is small and
the same conformance suite (``tests/stores/test_store_suite.py``) can hold
every backend to the same behaviour.

The port is a union of **roles**, small protocols of at most eight methods
each (:data:`ROLES`; ``tests/stores/test_store_roles.py`` holds them to it):
a consumer is typed by the roles it uses, not by the whole :class:`Store`.
Every method is a coroutine; a backend whose driver blocks (sqlite3) runs it
on a thread of its own so the event loop never waits on disk.
"""

from __future__ import annotations

import inspect
import os
from typing import Protocol, cast

from treadle._stores._audit import AuditEntry, AuditLog
from treadle._stores._events import EventEntry, EventLog, LoggedEvent
from treadle._stores._lease_roles import Claims, Deliveries, Leases
from treadle._stores._live import LiveEvents
from treadle._stores._pausing import Pausing
from treadle._stores._records import (
    CheckpointInfo,
    CheckpointRecord,
    Claimed,
    InboxItem,
    Lease,
    Piece,
    RunRecord,
)
from treadle._stores._run_roles import RunCounts, RunReads, RunRemoval, RunWrites
from treadle._stores._schedules import ScheduleBook
from treadle._stores._starts import Admission, Admissions, StartRequest

DEFAULT_LEASE = 30.0
"""Seconds a lease lasts without a heartbeat, unless a store says otherwise: how long
a run whose owner died waits to be taken over."""


__all__ = [
    "DEFAULT_LEASE",
    "ROLES",
    "Admission",
    "Admissions",
    "AuditEntry",
    "AuditLog",
    "CheckpointInfo",
    "CheckpointRecord",
    "Claimed",
    "Claims",
    "Deliveries",
    "EventEntry",
    "EventLog",
    "InboxItem",
    "Lease",
    "Leases",
    "LiveEvents",
    "LoggedEvent",
    "Pausing",
    "Piece",
    "RunCounts",
    "RunReads",
    "RunRecord",
    "RunRemoval",
    "RunWrites",
    "ScheduleBook",
    "StartRequest",
    "Store",
    "role_methods",
]


class Store(
    RunReads,
    RunCounts,
    RunWrites,
    RunRemoval,
    Leases,
    Claims,
    Deliveries,
    Pausing,
    Admissions,
    EventLog,
    AuditLog,
    LiveEvents,
    ScheduleBook,
    Protocol,
):
    """Where runs and their checkpoints live: every role of the port, and ``close``.

    Implementations: ``MemoryStore`` (tests, ephemeral work), ``SqliteStore``
    (the embedded default), ``PostgresStore`` (many workers). The roles:
    :class:`RunReads`, :class:`RunCounts` (what a scrape reads),
    :class:`RunWrites` (the writes a lease fences),
    :class:`RunRemoval`, :class:`Leases`, :class:`Claims`,
    :class:`Deliveries` (the inbox), :class:`Pausing`, :class:`Admissions`
    (start policies), :class:`EventLog`, :class:`AuditLog`,
    :class:`LiveEvents` (its feed of live events) and :class:`ScheduleBook`
    (schedules and the record of their ticks).

    **The record.** Every write that is an action on a run from outside
    (``deliver``, ``cancel``, ``pause``, ``unpause``, ``acquire`` for a
    resume, ``delete_run``, ``prune``, ``migrate_run``, and ``create_run``
    for a run whose row says who started it) takes the ``actor`` taking it
    and writes, in the transaction of its effect, the action's event in the
    run's log and its entry in the store's audit chain (see
    :mod:`treadle._stores._audit`; ``read_audit`` reads it). Without an
    actor nothing is recorded: that is for the runtime's own writes
    (``treadle._workflow._actions`` is the one caller that gives one).
    """

    async def close(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""
        ...


ROLES: tuple[type, ...] = (
    RunReads,
    RunCounts,
    RunWrites,
    RunRemoval,
    Leases,
    Claims,
    Deliveries,
    Pausing,
    Admissions,
    EventLog,
    AuditLog,
    LiveEvents,
    ScheduleBook,
)
"""The roles :class:`Store` unites, in the order it names them."""


def role_methods(role: type) -> frozenset[str]:
    """The methods a role (or a union of roles) asks for, its bases' included."""
    return frozenset(
        name
        for base in role.__mro__
        if base is not Protocol and getattr(base, "_is_protocol", False)
        for name, value in vars(base).items()
        if inspect.isfunction(value) and not name.startswith("_")
    )


def checked_store(store: object) -> Store:
    """``store`` once it is a store, not a path to one or a connection string.

    A store is made by its class (``SqliteStore(path)``, ``PostgresStore(dsn)``,
    ``MemoryStore()``): a ``str`` or a ``Path`` given where a store goes used to
    be taken, and the first run failed far from the mistake.

    Raises:
        TypeError: ``store`` has none of a store's methods (naming what it is).
    """
    if all(callable(getattr(store, name, None)) for name in _CHECKED):
        return cast("Store", store)
    hint = ""
    if isinstance(store, (str, os.PathLike)):
        text = str(os.fspath(store))
        made = "PostgresStore" if text.startswith(("postgresql:", "postgres:")) else "SqliteStore"
        hint = f": for this one, pass {made}({text!r}) (from treadle.stores)"
    msg = (
        f"store must be a treadle store (SqliteStore, PostgresStore, MemoryStore), "
        f"got {type(store).__name__}{hint}"
    )
    raise TypeError(msg)


_CHECKED = ("create_run", "commit", "load_checkpoint", "get_run")
"""A few of the port's methods: what a value given as a store must have to be taken for one."""
