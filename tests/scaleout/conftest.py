"""PostgreSQL for the scale-out tests: a store on the test's own schema (``tests/postgres.py``).

Every test in this directory is marked ``integration`` (by the hook below:
a ``pytestmark`` in a conftest is ignored), since they all need PostgreSQL,
worker processes or both.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from treadle.stores import PostgresStore

_HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test collected under this directory ``integration``."""
    for item in items:
        if item.path.is_relative_to(_HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
async def store(dsn: str, schema: str) -> AsyncIterator[PostgresStore]:
    """A ``PostgresStore`` on the test's schema."""
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    opened = PostgresStore(dsn, schema=schema)
    yield opened
    await opened.close()
