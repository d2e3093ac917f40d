"""``MemoryStore``'s event logs (a list per run) and its audit log, appended under its lock."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from treadle._stores._audit import GENESIS, AuditEntry, entry_of
from treadle._stores._events import LoggedEvent

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable, Mapping

    from treadle._stores._audit import Recorded
    from treadle._stores._events import EventEntry
    from treadle._stores._memory_ownership import MemoryRun


def append(run: MemoryRun, entries: Iterable[EventEntry]) -> None:
    """Append events to the run's log, numbered after its last (the caller holds the lock)."""
    log = run.events
    run_id = run.record.run_id
    for superstep, kind, executor_id, at, data in entries:
        log.append(
            LoggedEvent(run_id, len(log) + 1, superstep, kind, executor_id, at, json.loads(data))
        )


def log_status(run: MemoryRun, at: float, by: str) -> None:
    """Record the status the store just gave the run for a caller (``by``)."""
    record = run.record
    data = {"status": record.status, "by": by}
    log = run.events
    log.append(
        LoggedEvent(record.run_id, len(log) + 1, record.superstep, "status_changed", None, at, data)
    )


def read(run: MemoryRun, after: int, limit: int | None) -> list[LoggedEvent]:
    """The events after ``after`` (seq ``n`` is at index ``n - 1``), at most ``limit``."""
    start = max(after, 0)
    end = None if limit is None else start + limit
    return run.events[start:end]


def record(
    audit: list[AuditEntry], runs: Mapping[str, MemoryRun], records: Iterable[Recorded], at: float
) -> None:
    """Write each action's audit entry and its run's event (the caller holds the lock)."""
    for action in records:
        prev = audit[-1].hash if audit else GENESIS
        row = action.row(len(audit) + 1, at, prev)
        audit.append(entry_of(row))
        run = runs.get(action.run_id) if action.run_id is not None else None
        if action.logged and run is not None:
            log = run.events
            data = json.loads(action.event_data(row[0], row[-1]))
            superstep = run.record.superstep
            log.append(
                LoggedEvent(
                    run.record.run_id, len(log) + 1, superstep, action.action, None, at, data
                )
            )


class MemoryAudit:
    """``MemoryStore``'s audit log: a list for the store, appended under its lock."""

    _audit: list[AuditEntry]
    _lock: threading.RLock
    _runs: dict[str, MemoryRun]

    def _record(self, records: Iterable[Recorded], at: float) -> None:
        """Write each action's record, under the lock the caller holds with its effect."""
        record(self._audit, self._runs, records, at)

    async def read_audit(
        self, run_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries after ``after``, oldest first, at most ``limit`` (only ``run_id``'s)."""
        with self._lock:
            found = [
                e for e in self._audit[max(after, 0) :] if run_id is None or e.run_id == run_id
            ]
        return found if limit is None else found[:limit]
