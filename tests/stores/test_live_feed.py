"""A store's live feed: what a driver publishes reaches followers elsewhere, never blocking it.

Every backend (memory, SQLite, PostgreSQL) is held to the same behaviour,
through two store objects on one database (``pair``): each has a feed of
its own, so what the follower reads comes the way it would come to another
process (the side file on SQLite, ``NOTIFY`` on PostgreSQL), never from the
driver's in-process fan-out. On memory both are one store: its feed never
leaves the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from store_backends import drop_schemas, fresh_schema, postgres_dsn
from treadle._stores._events import EventEntry
from treadle._stores._live import FOLLOWER_BUFFER
from treadle.stores import MemoryStore, SqliteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """(driver, follower) stores on one database (see the module)."""
    if request.param == "memory":
        store = MemoryStore()
        yield store, store
        await store.close()
        return
    if request.param == "sqlite":
        path = tmp_path / "runs.sqlite"
        driver, follower = SqliteStore(path), SqliteStore(path)
        yield driver, follower
        await driver.close()
        await follower.close()
        return
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    dsn, schema = postgres_dsn(), fresh_schema()
    driver, follower = PostgresStore(dsn, schema=schema), PostgresStore(dsn, schema=schema)
    try:
        yield driver, follower
    finally:
        await driver.close()
        await follower.close()
        await drop_schemas([schema])


def entry(n: int, text: str = "", kind: str = "agent_delta") -> EventEntry:
    return EventEntry(1, kind, "courier", 1000.0 + n, json.dumps({"delta": text or f"d{n}"}))


async def received(follower, count: int) -> list:
    async with asyncio.timeout(20):
        return [await follower.get() for _ in range(count)]


async def test_followers_get_what_is_published_after_they_began_in_order_and_only_their_run(pair):
    driver, follower_store = pair
    driver.live.publish("r1", entry(0, "before anyone followed"))
    await asyncio.sleep(0.5)  # sent before the follower begins (the sender has a thread)
    async with follower_store.live.follow("r1") as follower, driver.live.follow("r1") as here:
        for n in range(1, 6):
            driver.live.publish("r2", entry(n, "another run's"))
            driver.live.publish("r1", entry(n))
        driver.live.publish("r1", entry(6, "ünïcode ✓"))
        for events in (await received(follower, 6), await received(here, 6)):
            assert [e.data["delta"] for e in events] == ["d1", "d2", "d3", "d4", "d5", "ünïcode ✓"]
            assert {(e.run_id, e.seq, e.superstep, e.kind, e.executor_id) for e in events} == {
                ("r1", 0, 1, "agent_delta", "courier")
            }
            assert [e.at for e in events] == [1001.0, 1002.0, 1003.0, 1004.0, 1005.0, 1006.0]
        await asyncio.sleep(0.3)  # time for anything else to arrive: nothing does
        assert follower.get_nowait() is None
        assert here.get_nowait() is None


async def test_an_event_larger_than_a_notification_arrives_whole(pair):
    driver, follower_store = pair
    big = "".join(chr(0x41 + n % 26) for n in range(30_000)) + "é" * 5000  # > 8,000 bytes
    async with follower_store.live.follow("r1") as follower:
        driver.live.publish("r1", entry(1, big))
        driver.live.publish("r1", entry(2, "small"))
        first, second = await received(follower, 2)
    assert first.data["delta"] == big
    assert second.data["delta"] == "small"


async def test_a_follower_that_never_reads_neither_blocks_the_driver_nor_grows_without_bound(pair):
    driver, follower_store = pair
    total = FOLLOWER_BUFFER + 2000
    async with follower_store.live.follow("r1") as follower:
        for n in range(total):
            driver.live.publish("r1", entry(n))  # never waits for the follower
            if n % 1000 == 999:
                await asyncio.sleep(0.2)  # the sender's pace (its own queue is bounded too)
        async with asyncio.timeout(30):  # every event arrived: kept, or dropped as the oldest
            while follower.dropped + follower.waiting < total:  # noqa: ASYNC110 - another thread
                await asyncio.sleep(0.05)
        assert follower.waiting == FOLLOWER_BUFFER
        assert follower.dropped == total - FOLLOWER_BUFFER
        kept = []
        while (event := follower.get_nowait()) is not None:
            kept.append(event.data["delta"])
        assert kept == [f"d{n}" for n in range(total - FOLLOWER_BUFFER, total)]  # the newest


async def test_a_locked_side_file_never_blocks_the_driver_and_later_events_still_arrive(tmp_path):
    from treadle.stores import SqliteStore  # noqa: PLC0415

    driver, other = SqliteStore(tmp_path / "runs.sqlite"), SqliteStore(tmp_path / "runs.sqlite")
    try:
        async with other.live.follow("r1") as follower:
            locker = sqlite3.connect(tmp_path / "runs.sqlite-live", isolation_level=None)
            locker.execute("BEGIN EXCLUSIVE")  # no one else may write (or read) the side file
            for n in range(100):
                driver.live.publish("r1", entry(n))  # returns at once: queued for the sender
            await asyncio.sleep(2)  # the sender gives up on the locked file and drops
            locker.execute("ROLLBACK")
            locker.close()
            await asyncio.sleep(1.5)  # the sender's pause after a failed write
            driver.live.publish("r1", entry(500, "after the lock"))
            async with asyncio.timeout(20):
                while (await follower.get()).data["delta"] != "after the lock":
                    pass
    finally:
        await driver.close()
        await other.close()


@pytest.mark.parametrize("path", [":memory:"])
async def test_an_in_memory_sqlite_store_keeps_its_live_events_in_its_process(path):
    from treadle.stores import SqliteStore  # noqa: PLC0415

    store = SqliteStore(path)
    try:
        async with store.live.follow("r1") as follower:
            store.live.publish("r1", entry(1))
            (event,) = await received(follower, 1)
        assert event.data["delta"] == "d1"
    finally:
        await store.close()


@pytest.mark.integration
async def test_stores_on_two_schemas_not_yet_made_never_hear_each_others_runs():
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only here

    dsn, mine, theirs = postgres_dsn(), fresh_schema(), fresh_schema()
    driver, follower = PostgresStore(dsn, schema=mine), PostgresStore(dsn, schema=mine)
    other = PostgresStore(dsn, schema=theirs)
    try:  # none of the three has touched its schema: it does not exist yet
        async with follower.live.follow("r1") as here, other.live.follow("r1") as there:
            for n in range(3):
                driver.live.publish("r1", entry(n))
            assert [e.data["delta"] for e in await received(here, 3)] == ["d0", "d1", "d2"]
            await asyncio.sleep(0.5)  # time for a stray notification to arrive: none does
            assert there.get_nowait() is None
    finally:
        for store in (driver, follower, other):
            await store.close()
        await drop_schemas([mine, theirs])


async def test_followers_that_come_and_go_each_get_their_runs_events_once(pair):
    """Followers in one process share what carries the events (one PostgreSQL connection):
    one leaving early, one joining late, and run ids JSON escapes, each gets its own once."""
    driver, follower_store = pair
    quoted = 'r"é\\'
    async with (
        follower_store.live.follow("r1") as first,
        follower_store.live.follow("r1") as second,
        follower_store.live.follow(quoted) as odd,
    ):
        async with follower_store.live.follow("r2") as leaving:
            driver.live.publish("r2", entry(1))
            assert [e.data["delta"] for e in await received(leaving, 1)] == ["d1"]
        driver.live.publish("r2", entry(2, "nobody follows r2 now"))
        driver.live.publish("r1", entry(3))
        driver.live.publish(quoted, entry(4))
        for follower in (first, second):
            assert [e.data["delta"] for e in await received(follower, 1)] == ["d3"]
        async with follower_store.live.follow("r1") as late:
            driver.live.publish("r1", entry(5))
            assert [e.data["delta"] for e in await received(late, 1)] == ["d5"]
        for follower in (first, second):
            assert [e.data["delta"] for e in await received(follower, 1)] == ["d5"]
        assert [(e.run_id, e.data["delta"]) for e in await received(odd, 1)] == [(quoted, "d4")]
        await asyncio.sleep(0.3)  # time for anything else to arrive: nothing does
        assert {f.get_nowait() for f in (first, second, odd)} == {None}


def _side_file_descriptors(database: Path) -> int:
    """How many descriptors of this process are open on the side file (and its log, its shm)."""
    side = f"{database}-live"
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            count += str(fd.readlink()).startswith(side)
    return count


async def test_many_sqlite_followers_share_one_reader_of_the_side_file(tmp_path):
    # Each follow block opened the side file (its log and shared memory too) and polled it on
    # a thread: 120 event streams of treadle serve used up 256 open files, and the server
    # could take no connection at all.
    path = tmp_path / "runs.sqlite"
    driver, follower_store = SqliteStore(path), SqliteStore(path)
    try:
        async with follower_store.live.follow("r0") as first:
            one = _side_file_descriptors(path)
            async with contextlib.AsyncExitStack() as stack:
                followers = [
                    await stack.enter_async_context(follower_store.live.follow(f"r{n % 4}"))
                    for n in range(12)
                ]
                assert _side_file_descriptors(path) == one
                for n in range(4):
                    driver.live.publish(f"r{n}", entry(n))
                for n, follower in enumerate(followers):
                    assert [e.data["delta"] for e in await received(follower, 1)] == [f"d{n % 4}"]
            assert [e.data["delta"] for e in await received(first, 1)] == ["d0"]
        await driver.close()  # its writer's connection: the one left open, and now closed
        assert _side_file_descriptors(path) == 0  # the last follower closed the reader's
    finally:
        await driver.close()
        await follower_store.close()
