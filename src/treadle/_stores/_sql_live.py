"""The statements of a SQLite store's side file of live events (``<database>-live``).

SQLite only: a PostgreSQL store carries live events by ``NOTIFY`` and keeps
none (see :mod:`treadle._stores._sqlite_live` for why a side file).
"""

from __future__ import annotations

SIDE_FILE_SCHEMA = """
CREATE TABLE IF NOT EXISTS treadle_live (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    run_id TEXT NOT NULL,
    superstep INTEGER NOT NULL,
    kind TEXT NOT NULL,
    executor_id TEXT,
    at REAL NOT NULL,
    data TEXT NOT NULL,
    written REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS treadle_live_by_run ON treadle_live (run_id, id)"""
INSERT_LIVE = (
    "INSERT INTO treadle_live (origin, run_id, superstep, kind, executor_id, at, data, written)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
PRUNE_LIVE = (
    "DELETE FROM treadle_live WHERE written < ? OR id <= (SELECT MAX(id) FROM treadle_live) - ?"
)
NEWEST_LIVE = "SELECT COALESCE(MAX(id), 0) FROM treadle_live"
LIVE_AFTER = (
    "SELECT id, run_id, superstep, kind, executor_id, at, data FROM treadle_live"
    " WHERE id > ? AND run_id = ? AND origin != ? ORDER BY id"
)
LIVE_AFTER_FOR = (
    "SELECT l.id, l.run_id, l.superstep, l.kind, l.executor_id, l.at, l.data"
    " FROM json_each(?) AS f JOIN treadle_live AS l"
    " ON l.run_id = json_extract(f.value, '$[0]') AND l.id > json_extract(f.value, '$[1]')"
    " WHERE l.origin != ? ORDER BY l.id"
)
"""(a JSON array of [run id, the row read up to] for each run followed, origin): one read
for every follower, each run's rows from where its own reading got to (by its index)."""
