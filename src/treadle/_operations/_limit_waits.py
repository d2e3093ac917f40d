"""What a run's calls wait for: the limits, their places in line, when a slot is next expected.

One reading for every door: ``treadle show`` and ``treadle runs`` print it,
``GET /api/runs/{id}`` and ``GET /api/runs`` answer it (``waiting_for``),
the page shows it. The store keeps the lines (``_stores/_limit_roles.py``),
so what is shown is the same whichever process's calls are waiting. A page
of runs is read in one store read (:func:`waits_by_run`), not one a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._engine._result import RunStatus
from treadle._operations._shapes import iso_time, run_json
from treadle._stores._limit_roles import LimitSlots

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from treadle._stores._limit_roles import LineWait
    from treadle._stores._store import RunRecord, Store


def _wait_json(wait: LineWait) -> dict[str, Any]:
    return {
        "limit": wait.limit,
        "call": wait.call_id,
        "key": wait.key,
        "position": wait.position,
        "waiting_since": iso_time(wait.entered_at),
        "next_slot_at": iso_time(wait.next_slot_at),
    }


async def limit_waits(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Each call of ``run_id`` waiting for a slot, JSON-ready (empty: none waits)."""
    if not isinstance(store, LimitSlots):
        return []
    return [_wait_json(wait) for wait in await store.line_waits([run_id])]


async def waits_by_run(store: Store, rows: Sequence[RunRecord]) -> dict[str, list[dict[str, Any]]]:
    """The waiting calls of a page of runs, by run id, in one store read.

    An ended run waits for nothing, so only the others are asked about;
    a page of ended runs costs no read at all.
    """
    asked = [row.run_id for row in rows if not RunStatus(row.status).is_final]
    if not asked or not isinstance(store, LimitSlots):
        return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for wait in await store.line_waits(asked):
        found.setdefault(wait.run_id, []).append(_wait_json(wait))
    return found


def listed_run(
    waiting: dict[str, list[dict[str, Any]]],
    shown: Callable[[RunRecord], dict[str, Any]] = run_json,
) -> Callable[[RunRecord], dict[str, Any]]:
    """How a page lists a run: as ``shown`` makes it, with its ``waiting_for`` from ``waiting``."""
    return lambda row: shown(row) | {"waiting_for": waiting.get(row.run_id, [])}


def wait_line(wait: dict[str, Any]) -> str:
    """One wait as ``treadle show`` prints it."""
    ahead = wait["position"]
    place = "next in line" if ahead == 0 else f"{ahead} call{'s' if ahead != 1 else ''} ahead"
    expected = (
        f"; next slot expected {wait['next_slot_at']}"
        if wait["next_slot_at"]
        else "; next slot when a call releases one"
    )
    key = f" (key {wait['key']!r})" if wait["key"] else ""
    return f"waiting for limit {wait['limit']!r}{key}: {place}{expected}"


def waiting_mark(waits: Sequence[dict[str, Any]]) -> str:
    """A run's waits in a word, as ``treadle runs`` marks its status: ``waiting: api #3``.

    ``#n`` is the place in line of the run's call nearest the head (1:
    next); a run whose calls wait several in one line says how many.
    """
    places: dict[str, list[int]] = {}
    for wait in waits:
        places.setdefault(wait["limit"], []).append(wait["position"] + 1)
    shown = [
        f"{limit} #{min(found)}" + (f" ({len(found)} calls)" if len(found) > 1 else "")
        for limit, found in places.items()
    ]
    return f"waiting: {', '.join(shown)}" if shown else ""
