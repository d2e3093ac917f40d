"""Where runs and their checkpoints live.

``SqliteStore(path)`` is the embedded default (WAL, fsync'd commits, safe for
several processes on one file); ``PostgresStore(dsn)`` keeps them in
PostgreSQL, for many workers (it needs the ``postgres`` extra, and psycopg is
imported only when the name is first used); ``MemoryStore()`` keeps everything
in the process, for tests and throwaway work. All implement :class:`Store`,
the small port any backend implements, whose methods take and return the
records exported here (:class:`RunRecord`, :class:`CheckpointInfo`,
:class:`CheckpointRecord`, :class:`Lease`, :class:`InboxItem`,
:class:`Claimed`, :class:`Unpaused`, and a run's event log as
:class:`LoggedEvent` and :class:`EventEntry`); ``treadle.serialization`` holds the
serializers that turn checkpoint values into bytes.
"""

from typing import TYPE_CHECKING

from treadle._extras import importing_extra
from treadle._public import publish
from treadle._stores._memory import MemoryStore
from treadle._stores._pausing import Unpaused
from treadle._stores._schedules import ScheduleCursor, ScheduleRow, TickRow
from treadle._stores._sqlite import SqliteStore
from treadle._stores._store import (
    CheckpointInfo,
    CheckpointRecord,
    Claimed,
    EventEntry,
    InboxItem,
    Lease,
    LoggedEvent,
    RunRecord,
    Store,
)

if TYPE_CHECKING:
    from treadle._stores._postgres import PostgresStore

__all__ = [
    "CheckpointInfo",
    "CheckpointRecord",
    "Claimed",
    "EventEntry",
    "InboxItem",
    "Lease",
    "LoggedEvent",
    "MemoryStore",
    "PostgresStore",
    "RunRecord",
    "ScheduleCursor",
    "ScheduleRow",
    "SqliteStore",
    "Store",
    "TickRow",
    "Unpaused",
]

publish(__name__, globals(), __all__)  # PostgresStore: when it is first asked for


def __getattr__(name: str) -> object:
    """Import ``PostgresStore``, and so psycopg, only when it is asked for."""
    if name == "PostgresStore":
        with importing_extra("treadle.stores.PostgresStore", "postgres"):
            from treadle._stores._postgres import PostgresStore  # noqa: PLC0415 - lazy on purpose

        globals()[name] = PostgresStore  # later lookups skip this function
        publish(__name__, globals(), [name])
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
