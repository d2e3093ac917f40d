"""Where runs and their checkpoints live.

``SqliteStore(path)`` is the embedded default (WAL, fsync'd commits, safe for
several processes on one file); ``PostgresStore(dsn)`` keeps them in
PostgreSQL, for many workers (it needs the ``postgres`` extra, and psycopg is
imported only when the name is first used); ``MemoryStore()`` keeps everything
in the process, for tests and throwaway work. All implement :class:`Store`,
the small port any backend implements; ``treadle.serialization`` holds the
serializers that turn checkpoint values into bytes.
"""

from typing import TYPE_CHECKING

from treadle._stores._memory import MemoryStore
from treadle._stores._sqlite import SqliteStore
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord, Store

if TYPE_CHECKING:
    from treadle._stores._postgres import PostgresStore

__all__ = [
    "CheckpointInfo",
    "CheckpointRecord",
    "MemoryStore",
    "PostgresStore",
    "RunRecord",
    "SqliteStore",
    "Store",
]


def __getattr__(name: str) -> object:
    """Import ``PostgresStore``, and so psycopg, only when it is asked for."""
    if name == "PostgresStore":
        from treadle._stores._postgres import PostgresStore  # noqa: PLC0415 - lazy on purpose

        globals()[name] = PostgresStore  # later lookups skip this function
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
