"""PostgreSQL for the scale-out tests: a fresh schema per test, dropped after it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from durable.conftest import drop_schemas, fresh_schema, postgres_dsn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from treadle.stores import PostgresStore

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn() -> str:
    """A reachable PostgreSQL; the test is skipped, saying why, without one."""
    return postgres_dsn()


@pytest.fixture
async def schema(dsn: str) -> AsyncIterator[str]:
    """A schema of the test's own, dropped afterwards with everything in it."""
    name = fresh_schema()
    yield name
    await drop_schemas([name])


@pytest.fixture
async def store(dsn: str, schema: str) -> AsyncIterator[PostgresStore]:
    """A ``PostgresStore`` on the test's schema."""
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    opened = PostgresStore(dsn, schema=schema)
    yield opened
    await opened.close()
