"""One process driving runs of ``limits_app.limited`` on a SQLite file, as a campaign starts it.

``python limits_driver.py DB FIRST COUNT``: start runs ``run-FIRST`` ..
``run-(FIRST+COUNT-1)`` in a ``Runtime`` declaring the ``api`` limit, then
keep its timer service (which takes over runs whose process died) going
until every run in the file has ended.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from typing import TYPE_CHECKING

from limits_app import api, limited

from treadle import Runtime
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from treadle import CallLimit, Workflow


async def drive_runs(
    path: str, workflow: Workflow, limit: CallLimit, first: int, count: int
) -> None:
    """Start ``workflow``'s runs ``run-FIRST`` .. under ``limit``; return once every run has ended.

    The ``Runtime``'s timer service goes on meanwhile: it takes over the runs
    of a process on the file that died.
    """
    store = SqliteStore(path)
    runtime = Runtime(store, [workflow], limits=[limit], poll_interval=0.2)
    async with runtime:
        await asyncio.gather(
            *(runtime.start(workflow, n, run_id=f"run-{n:04}") for n in range(first, first + count))
        )
        while True:
            with sqlite3.connect(path) as db:
                (left,) = db.execute(  # a run that failed is left too: the test says so
                    "SELECT count(*) FROM treadle_runs"
                    " WHERE status NOT IN ('completed', 'failed', 'cancelled')"
                ).fetchone()
            if not left:
                break
            await asyncio.sleep(0.1)
    await store.close()


if __name__ == "__main__":
    asyncio.run(drive_runs(sys.argv[1], limited, api, int(sys.argv[2]), int(sys.argv[3])))
