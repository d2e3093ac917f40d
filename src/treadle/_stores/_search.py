"""The store's search role: runs by filter, read through the index of their search fields.

A workflow's search fields are written by its commits
(``CheckpointRecord.fields``, in the checkpoint's transaction); this role
reads them back: the runs a filter keeps, how many there are, and one run's
fields. :class:`SqlSearch` is the role written once for SQLite and
PostgreSQL (the filter compiled to SQL by
:mod:`treadle._stores._sql_search`); ``MemoryStore`` has its own
(:mod:`treadle._stores._memory_search`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from treadle._stores import _sql_rows, _sql_rules, _sql_search
from treadle._values._search_fields import FieldValue

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._records import RunRecord
    from treadle._stores._sql_dialect import Dialect
    from treadle._values._filter import RunFilter


class RunSearch(Protocol):
    """Runs found by a filter (``treadle runs --where``, ``GET /api/runs?where=``)."""

    async def search_runs(
        self,
        where: RunFilter,
        *,
        limit: int | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[RunRecord]:
        """The runs ``where`` keeps, newest first (as ``list_runs``, paged by ``before`` alike).

        Raises:
            ValueError: ``limit`` is negative.
        """
        ...

    async def count_runs(self, where: RunFilter) -> int:
        """How many runs ``where`` keeps."""
        ...

    async def run_fields(self, run_id: str) -> dict[str, FieldValue]:
        """The search fields a run has set, by name (empty: none, or no such run)."""
        ...


class SqlSearch(ABC):
    """:class:`RunSearch` for the SQL stores: each filter is one SQL query over the index."""

    search_dialect: ClassVar[Dialect]

    @abstractmethod
    async def _read(
        self, query: str, parameters: tuple[Any, ...], *, scan: bool = False
    ) -> Sequence[Sequence[Any]]:
        """Run one rendered SELECT; return its rows.

        ``scan``: it may read rows in proportion to the store. Every search and
        count is one: how many runs a filter reads is the planner's to know,
        and an ``&&`` of ``!=`` on fields reads every run.
        """

    async def search_runs(
        self,
        where: RunFilter,
        *,
        limit: int | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[RunRecord]:
        """The runs ``where`` keeps, newest first (see :class:`RunSearch`).

        Raises:
            ValueError: ``limit`` is negative.
        """
        _sql_rules.check_limit(limit)
        template, parameters = _sql_search.select_matching(where.tree, limit=limit, before=before)
        rows = await self._read(self.search_dialect.render(template), parameters, scan=True)
        return [_sql_rows.run_from_row(row) for row in rows]

    async def count_runs(self, where: RunFilter) -> int:
        """How many runs ``where`` keeps."""
        template, parameters = _sql_search.count_matching(where.tree)
        rows = await self._read(self.search_dialect.render(template), parameters, scan=True)
        return int(rows[0][0])

    async def run_fields(self, run_id: str) -> dict[str, FieldValue]:
        """The search fields a run has set, by name."""
        query = self.search_dialect.render(_sql_search.SELECT_RUN_FIELDS)
        rows = await self._read(query, (run_id,))
        return {name: FieldValue(name, kind, text, number) for name, kind, text, number in rows}
