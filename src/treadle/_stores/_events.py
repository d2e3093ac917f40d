"""A run's event log: what it reported, kept in its store for anyone to read later.

A run's events used to reach only the process that ran it. Kept here, a
run started anywhere (another process, a worker, the server) can be
watched, its failures read with their tracebacks, and an event stream
resumed from the last event a client saw.

The log is append-only and holds exactly what committed: a superstep's
events are written in the transaction of the checkpoint they belong to,
so a superstep a crash interrupts leaves none (it runs again and reports
again), and the log never shows work the run's state does not hold. Each
event gets the next ``seq`` of its run (1, 2, 3, ...) as it is written,
in commit order, so "every event after ``seq`` N" misses nothing and
repeats nothing, whoever wrote them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol


class EventEntry(NamedTuple):
    """One event on its way into the log (its ``seq`` is given by the store).

    Attributes:
        superstep: The superstep it belongs to.
        kind: What happened (``"executor_failed"``, ``"output"``, ...).
        executor_id: The executor it is about, or ``None`` for the run.
        at: When it happened (epoch seconds, the run's clock).
        data: Its other fields, as JSON text of an object.
    """

    superstep: int
    kind: str
    executor_id: str | None
    at: float
    data: str


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event of a run's log, as the store returns it.

    Attributes:
        run_id: The run.
        seq: Its place in the run's log: 1 for the first, then one more each.
        superstep: The superstep it belongs to.
        kind: What happened (see ``docs/server.md`` for every kind and its data).
        executor_id: The executor it is about, or ``None`` for the run.
        at: When it happened (epoch seconds).
        data: Its other fields.
    """

    run_id: str
    seq: int
    superstep: int
    kind: str
    executor_id: str | None
    at: float
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The event as plain data, the shape the CLI and the HTTP API give."""
        return {
            "seq": self.seq,
            "run_id": self.run_id,
            "superstep": self.superstep,
            "type": self.kind,
            "executor_id": self.executor_id,
            "at": self.at,
            "data": self.data,
        }


def status_entry(superstep: int, status: str, at: float, **data: Any) -> EventEntry:
    """A ``status_changed`` entry: the run moved to ``status``."""
    return EventEntry(superstep, "status_changed", None, at, json.dumps({"status": status, **data}))


class EventLog(Protocol):
    """What the store port asks of a store about event logs (a part of ``Store``).

    Events are written with the checkpoints they belong to (in
    ``CheckpointRecord.events``), with a status recorded without one (in
    ``set_status``'s ``events``), and by the store itself when it changes a
    run's status on a caller's behalf (cancel, pause, unpause).
    """

    async def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[LoggedEvent]:
        """The run's events with ``seq`` above ``after``, oldest first, at most ``limit``.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def last_event_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's newest event (0: none yet): where a follower starts.

        Raises:
            RunNotFoundError: no such run.
        """
        ...
