"""``MemoryStore``'s search role: its runs filtered in Python, with the same meaning as SQL's.

A memory store holds its runs in a dict already, so a filter is the
reference matcher (:func:`treadle._values._filter_match.matches`) over them;
the SQL stores answer the same filter from an index instead.
"""

from __future__ import annotations

from abc import ABC
from collections import Counter
from typing import TYPE_CHECKING

from treadle._stores._sql_rules import check_limit, due_at
from treadle._values._filter_match import matches
from treadle._values._search_fields import merged

if TYPE_CHECKING:
    import threading
    from collections.abc import Collection, Sequence

    from treadle._stores._memory_ownership import MemoryRun
    from treadle._stores._records import CheckpointRecord, RunRecord
    from treadle._values._filter import RunFilter
    from treadle._values._search_fields import FieldValue


def after_cursor(listed: list[RunRecord], before: tuple[float, str]) -> list[RunRecord]:
    """The runs ``listed`` (newest first) after the one ``before`` names, as the SQL stores page."""
    created_at, run_id = before
    ids = [record.run_id for record in listed]
    if run_id in ids:
        return listed[ids.index(run_id) + 1 :]
    return [record for record in listed if record.created_at < created_at]


def set_fields(run: MemoryRun, checkpoints: Sequence[CheckpointRecord]) -> None:
    """Write the search fields that ``checkpoints`` set or unset (under the store's lock)."""
    for value in merged(checkpoint.fields for checkpoint in checkpoints):
        if value.unset:
            run.fields.pop(value.name, None)
        else:
            run.fields[value.name] = value


class MemorySearch(ABC):
    """``search_runs``, ``count_runs``, ``run_fields`` and ``run_counts`` over its dict of runs."""

    _runs: dict[str, MemoryRun]
    _lock: threading.RLock

    def _matching(self, where: RunFilter) -> list[RunRecord]:
        with self._lock:
            runs = [(run.record, dict(run.fields)) for run in reversed(self._runs.values())]
        kept = [
            record
            for record, fields in runs
            if matches(
                where.tree,
                {
                    "status": record.status,
                    "outcome": record.outcome,
                    "workflow": record.workflow,
                    "created_at": record.created_at,
                    "updated_at": record.updated_at,
                },
                fields,
            )
        ]
        # Stable, so runs with equal created_at stay newest-created first.
        kept.sort(key=lambda record: record.created_at, reverse=True)
        return kept

    async def search_runs(
        self,
        where: RunFilter,
        *,
        limit: int | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[RunRecord]:
        """The runs ``where`` keeps, newest first (see ``RunSearch``).

        Raises:
            ValueError: ``limit`` is negative.
        """
        check_limit(limit)
        kept = self._matching(where)
        if before is not None:
            ids = [record.run_id for record in kept]
            at = ids.index(before[1]) + 1 if before[1] in ids else 0
            kept = kept[at:] if at else [r for r in kept if r.created_at < before[0]]
        return kept if limit is None else kept[:limit]

    async def count_runs(self, where: RunFilter) -> int:
        """How many runs ``where`` keeps."""
        return len(self._matching(where))

    async def run_counts(self) -> dict[tuple[str, str], int]:
        """How many runs there are of each ``(workflow, status)`` (the ``RunCounts`` role's)."""
        with self._lock:
            return dict(Counter((r.record.workflow, r.record.status) for r in self._runs.values()))

    async def count_due_runs(self, now: float) -> int:
        """How many runs ``due_runs`` would list now (the ``RunCounts`` role's)."""
        with self._lock:
            return sum(
                1 for r in self._runs.values() if (at := due_at(r.record)) is not None and at <= now
            )

    async def answers_waiting(self, run_ids: Collection[str]) -> dict[str, set[str]]:
        """The requests of these runs whose answer waits in their inbox (``RunCounts``'s)."""
        with self._lock:
            waiting: dict[str, set[str]] = {}
            for run_id in run_ids:
                run = self._runs.get(run_id)
                if run is None:
                    continue
                for item, _ in run.inbox:
                    if item.seq > run.consumed and item.kind == "answer" and item.target:
                        waiting.setdefault(run_id, set()).add(item.target)
            return waiting

    async def run_fields(self, run_id: str) -> dict[str, FieldValue]:
        """The search fields a run has set, by name."""
        with self._lock:
            run = self._runs.get(run_id)
            return dict(sorted(run.fields.items())) if run is not None else {}
