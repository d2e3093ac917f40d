"""``MemoryStore``'s event logs: a list per run, appended under the store's lock."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from treadle._stores._events import LoggedEvent

if TYPE_CHECKING:
    from collections.abc import Iterable

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
