"""Finding runs by filter, for every door: the CLI's ``--where``, ``?where=`` and the bulk actions.

A filter's text is read once here (:func:`run_filter`), together with the
older one-column options (``--status``, ``--workflow``, ``--outcome``),
which become parts of the same filter, so every door answers a listing
the same way: through the store's search role
(:class:`~treadle._stores._search.RunSearch`), which reads the index of
the runs' search fields. :func:`matching_ids` lists every run a filter
keeps, a page at a time, for a bulk action to act on.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from treadle._engine._result import RunStatus
from treadle._exceptions import CommandError
from treadle._values._filter import AllOf, Compare, RunFilter, Subject, Value, parse_filter

if TYPE_CHECKING:
    from treadle._stores._records import RunRecord
    from treadle._stores._run_roles import RunReads
    from treadle._stores._search import RunSearch
    from treadle._values._search_fields import FieldValue


class SearchableStore(Protocol):
    """A store that can search: what a filtered listing needs."""

    async def search_runs(
        self,
        where: RunFilter,
        *,
        limit: int | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[RunRecord]:
        """See :class:`~treadle._stores._search.RunSearch`."""
        ...

    async def count_runs(self, where: RunFilter) -> int:
        """See :class:`~treadle._stores._search.RunSearch`."""
        ...

    async def run_fields(self, run_id: str) -> dict[str, FieldValue]:
        """See :class:`~treadle._stores._search.RunSearch`."""
        ...


_KNOWN = MappingProxyType({"status": frozenset(status.value for status in RunStatus)})
"""The columns of few, fixed values: a filter naming another of them is refused, not empty."""

PAGE = 500
"""How many runs :func:`matching_ids` reads at a time."""


def run_filter(
    where: str | None,
    *,
    status: str | None = None,
    workflow: str | None = None,
    outcome: str | None = None,
) -> RunFilter | None:
    """The filter ``where`` and the one-column options say together (``None``: no filter).

    Raises:
        FilterError: ``where`` cannot be read (names the fault and its column).
    """
    if where is None:
        return None
    given = parse_filter(where, known=_KNOWN)
    columns = {"status": status, "workflow": workflow, "outcome": outcome}
    extra = tuple(
        Compare(Subject(name, field=False), "==", (Value("text", value),))
        for name, value in columns.items()
        if value is not None
    )
    if not extra:
        return given
    return RunFilter(given.text, AllOf((given.tree, *extra)))


def searching(store: RunReads | RunSearch) -> SearchableStore:
    """``store`` as one that searches.

    Raises:
        CommandError: it cannot (a worker's view of a run has no search).
    """
    if not callable(getattr(store, "search_runs", None)):
        msg = f"{store!r} cannot search runs by filter"
        raise CommandError(msg)
    return store  # type: ignore[return-value]


async def matching_ids(store: SearchableStore, where: RunFilter) -> list[str]:
    """Every run ``where`` keeps now, newest first, read a page at a time."""
    found: list[str] = []
    before: tuple[float, str] | None = None
    while True:
        page = await store.search_runs(where, limit=PAGE, before=before)
        found.extend(run.run_id for run in page)
        if len(page) < PAGE:
            return found
        before = (page[-1].created_at, page[-1].run_id)
