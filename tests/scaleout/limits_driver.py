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

from limits_app import api, limited

from treadle import Runtime
from treadle.stores import SqliteStore


async def main(path: str, first: int, count: int) -> None:
    store = SqliteStore(path)
    runtime = Runtime(store, [limited], limits=[api], poll_interval=0.2)
    async with runtime:
        await asyncio.gather(
            *(runtime.start(limited, n, run_id=f"run-{n:04}") for n in range(first, first + count))
        )
        while True:
            with sqlite3.connect(path) as db:
                (left,) = db.execute(  # a run that failed is left too: the test says so
                    "SELECT count(*) FROM treadle_runs"
                    " WHERE status NOT IN ('completed', 'failed', 'cancelled')"
                ).fetchone()
            if not left:
                break
            await asyncio.sleep(0.2)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
