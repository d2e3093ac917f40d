"""A run named by its id or by a prefix of it, as every door that takes a run's id reads it.

Ids are long and cut short in a narrow terminal, so any prefix that picks
out one run will do; but never the whole id of a run that is gone (its
audit entries say so), which is not taken as the prefix of another's: a
delete racing another for one run would otherwise delete a run nobody
named. The command line and the HTTP API each say what they find in their
own words (:func:`~treadle._operations._commands.get_run`,
``Served.find_run``); what a name picks out is decided here, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._exceptions import RunNotFoundError

if TYPE_CHECKING:
    from treadle._stores._store import RunRecord, Store

SHOWN = 10
"""How many runs an ambiguous prefix lists."""


async def runs_named(store: Store, given: str) -> RunRecord | list[RunRecord] | None:
    """What ``given`` names: its run; else the runs whose ids it starts; ``None`` if it is gone.

    The list holds at most ``SHOWN + 1`` runs (more than ``SHOWN``: there
    are more); empty, no run has that id or prefix. ``None``: ``given``
    is the whole id of a run that is gone.
    """
    try:
        return await store.get_run(given)
    except RunNotFoundError:
        if given and await store.read_audit(given, limit=1):
            return None
        return await store.list_runs(id_prefix=given, limit=SHOWN + 1) if given else []


def several(given: str, found: list[RunRecord]) -> str:
    """What is said of a prefix that starts the ids of several runs (some named)."""
    more = ", ..." if len(found) > SHOWN else ""
    ids = ", ".join(r.run_id for r in found[:SHOWN])
    return f"{given!r} starts the ids of several runs ({ids}{more}); give more of it"
