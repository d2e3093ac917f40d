"""What a run's calls wait for: the limits, their places in line, when a slot is next expected.

One reading for every door: ``treadle show`` prints it, ``GET
/api/runs/{id}`` answers it (``waiting_for``), the page shows it. The
store keeps the lines (``_stores/_limit_roles.py``), so what is shown is
the same whichever process's calls are waiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._operations._shapes import iso_time
from treadle._stores._limit_roles import LimitSlots

if TYPE_CHECKING:
    from treadle._stores._store import Store


async def limit_waits(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Each call of ``run_id`` waiting for a slot, JSON-ready (empty: none waits)."""
    if not isinstance(store, LimitSlots):
        return []
    return [
        {
            "limit": wait.limit,
            "call": wait.call_id,
            "key": wait.key,
            "position": wait.position,
            "waiting_since": iso_time(wait.entered_at),
            "next_slot_at": iso_time(wait.next_slot_at),
        }
        for wait in await store.line_waits([run_id])
    ]


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
