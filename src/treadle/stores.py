"""Where runs and their checkpoints live.

``SqliteStore(path)`` is the embedded default (WAL, fsync'd commits, safe for
several processes on one file); ``MemoryStore()`` keeps everything in the
process, for tests and throwaway work. Both implement :class:`Store`, the
small port any backend implements; ``treadle.serialization`` holds the
serializers that turn checkpoint values into bytes.
"""

from treadle._durable._memory import MemoryStore
from treadle._durable._sqlite import SqliteStore
from treadle._durable._store import CheckpointInfo, CheckpointRecord, RunRecord, Store

__all__ = [
    "CheckpointInfo",
    "CheckpointRecord",
    "MemoryStore",
    "RunRecord",
    "SqliteStore",
    "Store",
]
