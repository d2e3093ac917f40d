"""The one PostgreSQL plugin of the tests: where the server is, and a schema per test.

Every test that needs PostgreSQL finds it through :func:`postgres_dsn` (it
skips, saying why, without a server) and works in a schema of its own that
is dropped afterwards with everything in it: the ``schema`` fixture for one,
``new_schema`` for several, :func:`fresh_schema` with :func:`drop_schemas`
(or :func:`drop_schemas_now` outside an event loop) where a fixture or a
helper makes its own. Registered for every folder by ``tests/conftest.py``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import uuid
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable

# Where the tests look for PostgreSQL: TREADLE_TEST_POSTGRES_DSN alone when it is
# set (then an unreachable server fails the tests), else the local server as
# postgres or as root.
POSTGRES_CANDIDATES = (
    "postgresql://postgres@127.0.0.1:5432/test",
    "postgresql://root@127.0.0.1:5432/test",
)


@functools.cache
def _reachable_postgres() -> tuple[str | None, str]:
    import psycopg  # noqa: PLC0415 - only PostgreSQL tests need it

    if explicit := os.environ.get("TREADLE_TEST_POSTGRES_DSN"):
        with psycopg.connect(explicit, connect_timeout=5):
            return explicit, ""
    failures = []
    for dsn in POSTGRES_CANDIDATES:
        try:
            with psycopg.connect(dsn, connect_timeout=5):
                return dsn, ""
        except psycopg.OperationalError as error:
            failures.append(f"{dsn}: {' '.join(str(error).split())}")
    return None, "no PostgreSQL server reachable; tried " + "; ".join(failures)


def postgres_dsn() -> str:
    """The DSN of a reachable PostgreSQL; skips the test when there is none."""
    dsn, why = _reachable_postgres()
    if dsn is None:
        pytest.skip(why)
    return dsn


def fresh_schema() -> str:
    """A schema name no other test uses; the store creates it, ``drop_schemas`` drops it."""
    return f"treadle_test_{uuid.uuid4().hex[:16]}"


def drop_schemas_now(schemas: Iterable[str]) -> None:
    """Drop each schema with everything in it (blocking: for sync fixtures and helpers)."""
    import psycopg  # noqa: PLC0415 - only PostgreSQL tests need it
    from psycopg import sql  # noqa: PLC0415

    schemas = list(schemas)
    if not schemas:
        return
    with psycopg.connect(postgres_dsn(), autocommit=True) as db:
        for schema in schemas:
            db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def drop_schemas(schemas: Iterable[str]) -> None:
    """Drop each schema with everything in it, off the event loop's thread."""
    await asyncio.to_thread(drop_schemas_now, list(schemas))


@pytest.fixture
def dsn() -> str:
    """The DSN of a reachable PostgreSQL server; the test is skipped without one."""
    return postgres_dsn()


@pytest.fixture
async def new_schema() -> AsyncIterator[Callable[[], str]]:
    """Names fresh schemas; each is dropped after the test, with what it holds.

    Nothing is asked of PostgreSQL until a schema is named, so a test
    parametrised over stores may take it for its PostgreSQL case alone.
    """
    made: list[str] = []

    def make() -> str:
        postgres_dsn()  # skip here, before anything is made, without a server
        made.append(fresh_schema())
        return made[-1]

    yield make
    await drop_schemas(made)


@pytest.fixture
def schema(new_schema: Callable[[], str]) -> str:
    """A schema of the test's own, dropped afterwards with everything in it."""
    return new_schema()
