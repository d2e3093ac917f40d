"""A scan of every run never holds up a read of one run, a page, or a write (SQLite).

A search no index serves (an ``&&`` of ``!=`` on a field probes every run)
reads the whole store: half a second over the 20,000 runs here, about one
over 35,000. ``SqliteStore`` runs scans on a reader lane of their own
(``_stores/_sqlite_readers.py``), so a ``get_run`` called while one runs is
answered first. The tests assert the order things finish in, never a time:
the scan is hundreds of times longer than the reads it must not hold up.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from test_sqlite_store import wal_exists
from test_store_suite import T0, checkpoint, new_run

from search_support import SampleRun, populate_sqlite
from treadle._stores._sqlite import SqliteStore
from treadle._values._filter import MAX_TERMS, parse_filter

RUNS = 20_000

# Every comparison of the field after the first probes each run the first one keeps.
EVERY_RUN = parse_filter(" && ".join(f'fields.customer != "c{i}"' for i in range(MAX_TERMS)))


async def big_store(path) -> SqliteStore:
    """A store holding ``run-1`` (created through it) and RUNS more, loaded in bulk."""
    store = SqliteStore(path)
    await new_run(store)  # opens the file: the schema is made
    runs = [
        SampleRun(f"bulk-{n:06d}", "completed", None, "orders", T0 + n, {"customer": "a"})
        for n in range(RUNS)
    ]
    populate_sqlite(str(path), runs)
    assert (await store.get_run("run-1")).checkpoint_id == "c0"  # the readers have begun
    return store


async def count(store: SqliteStore) -> int:
    return await store.count_runs(EVERY_RUN)


async def page_of_a_search(store: SqliteStore) -> int:
    return len(await store.search_runs(EVERY_RUN, limit=51))


# Each scan and what it finds (run-1 has no customer field: no comparison of it holds).
SCANS = {"count": (count, RUNS), "page of a search": (page_of_a_search, 51)}


@pytest.mark.parametrize(("scan", "found"), SCANS.values(), ids=SCANS.keys())
async def test_reads_of_a_run_and_a_page_are_answered_while_a_scan_runs(tmp_path, scan, found):
    store = await big_store(tmp_path / "runs.sqlite")
    scanning = asyncio.create_task(scan(store))
    await asyncio.sleep(0)  # the scan is handed to the store before the reads below
    short = {
        asyncio.create_task(store.get_run("run-1")),
        asyncio.create_task(store.load_checkpoint("run-1")),
        asyncio.create_task(store.list_runs(limit=51)),  # the page: newest first, by index
        asyncio.create_task(store.commit(checkpoint("run-1", "c1", 1, created_at=T0 + 1))),
    }
    pending = set(short)
    while pending:
        done, _ = await asyncio.wait(pending | {scanning}, return_when="FIRST_COMPLETED")
        waiting = sorted(task.get_coro().__qualname__ for task in pending - done)
        assert scanning not in done, f"the scan was answered before {waiting}"
        pending -= done
    results = [task.result() for task in short]  # none failed
    assert len(results) == len(short)
    assert await scanning == found
    await store.close()


async def test_close_waits_for_a_scan_then_ends_every_thread_and_connection(tmp_path):
    path = tmp_path / "runs.sqlite"
    threads_before = set(threading.enumerate())
    store = await big_store(path)
    scanning = asyncio.create_task(store.count_runs(EVERY_RUN))
    await asyncio.sleep(0)
    store_threads = set(threading.enumerate()) - threads_before
    names = sorted(thread.name for thread in store_threads if thread.name.startswith("treadle"))
    assert names == ["treadle-sqlite", "treadle-sqlite-reader", "treadle-sqlite-scanner"]
    await store.close()
    assert scanning.done()  # called before close: finished first
    assert await scanning == RUNS
    assert not any(thread.is_alive() for thread in store_threads)
    # SQLite removes the log when the last connection to the file closes.
    assert not wal_exists(path)
