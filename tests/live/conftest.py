"""Stores for the live-event tests: two handles on one database, as two processes have.

``pair`` gives (driver, follower): two store objects on the same database,
each with a feed of its own, so what the follower reads comes the way it
would come to another process (the side file on SQLite, ``NOTIFY`` on
PostgreSQL), never from the driver's in-process fan-out. On memory both
are one store: its feed never leaves the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from durable.conftest import drop_schemas, fresh_schema, postgres_dsn
from treadle.stores import MemoryStore, SqliteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """(driver, follower) stores on one database (see the module)."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
        await store.close()
        return
    if request.param == "sqlite":
        path = tmp_path / "runs.sqlite"
        driver, follower = SqliteStore(path), SqliteStore(path)
        yield driver, follower
        await driver.close()
        await follower.close()
        return
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    dsn, schema = postgres_dsn(), fresh_schema()
    driver, follower = PostgresStore(dsn, schema=schema), PostgresStore(dsn, schema=schema)
    try:
        yield driver, follower
    finally:
        await driver.close()
        await follower.close()
        await drop_schemas([schema])
