"""A ``SqliteStore`` used in a forked child: the child opens its own, the parent goes on.

A program that forks (``multiprocessing`` on Linux, a pre-forking server)
after using a store hands its children the store object, whose threads
did not come along: a child's first call once waited for ever on a lane
nobody served. Now the child starts over with connections and threads of
its own, and leaves the parent's untouched (closing them would checkpoint
and remove the write-ahead log the parent is still writing).

A fork also waits until no thread of the store is inside SQLite: a mutex
SQLite holds for the whole process (the file's locks, its write-ahead
log's index) taken at the moment of the fork would never be let go in the
child, whose next use of the file would wait for ever.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import signal
import sqlite3
import threading
import time
from typing import TYPE_CHECKING

import pytest

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.filterwarnings(
    # Python 3.12 warns on any fork of a process with threads; this test forks on purpose.
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)


@executor(id="double")
async def double(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.state.set("seen", n)
    ctx.report_progress(n, 10, "doubling")  # live, through the store's feed
    ctx.yield_output(2 * n)


WORKFLOW = WorkflowBuilder(start=double, name="doubler").add_state("seen", default=0).build()


def in_forked_child(store: SqliteStore, parent_run: str, n: int) -> tuple[int, int]:
    """Fork; the child uses ``store`` and reports what it saw on a pipe; its pid and the pipe."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid:
        os.close(writable)
        return pid, readable
    os.close(readable)
    code = 1
    # Should the child hang, its threads' stacks go to the test's captured stderr first.
    faulthandler.dump_traceback_later(15)
    try:

        async def child() -> dict[str, object]:
            result = await WORKFLOW.run(n, store=store, run_id=f"child-{n}")
            parents = await store.get_run(parent_run)
            await store.close()
            return {"outputs": result.outputs, "parent": parents.status}

        report = asyncio.run(asyncio.wait_for(child(), 30))
        os.write(writable, json.dumps(report).encode())
        code = 0
    finally:
        os._exit(code)  # no interpreter shutdown: nothing of the parent's is finalized here


def reported(pid: int, readable: int, timeout: float = 20) -> dict[str, object]:
    """The child's report, once it exited; killed (and the test failed) if it does not."""
    deadline = time.monotonic() + timeout
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child never finished with the store it inherited")
        time.sleep(0.02)
    assert os.waitstatus_to_exitcode(done[1]) == 0
    with os.fdopen(readable, "rb") as pipe:
        return json.loads(pipe.read())


async def test_a_fork_waits_for_the_call_a_thread_of_the_store_is_making(tmp_path: Path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        await WORKFLOW.run(1, store=store)  # the file open, the writer's thread started
        started, finished = threading.Event(), []

        def slow(connection: sqlite3.Connection) -> int:
            started.set()
            counted = connection.execute(
                "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n"
                " WHERE x < 2000000) SELECT count(*) FROM n"
            ).fetchone()[0]
            finished.append(time.monotonic())
            return int(counted)

        calling = asyncio.create_task(store._call(slow, write=False))
        assert await asyncio.to_thread(started.wait, 10)
        pid = os.fork()
        if not pid:
            os._exit(0)
        forked = time.monotonic()
        await asyncio.to_thread(os.waitpid, pid, 0)
        assert await calling == 2_000_000
    finally:
        await store.close()
    assert finished, "the call had not finished when the fork went ahead"
    assert finished[0] <= forked


async def test_forked_children_use_the_store_they_inherit_and_the_parent_goes_on(
    tmp_path: Path,
):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    try:
        first = await WORKFLOW.run(1, store=store, run_id="parent-1")
        await store.get_run("parent-1")  # the reader's thread and connection, too
        async with store.live.follow("child-2") as follower:
            children = [in_forked_child(store, first.run_id, n) for n in (2, 3)]
            reports = [await asyncio.to_thread(reported, *child) for child in children]
            # The child's feed is its own: the parent does not take its events for its own.
            progress = await asyncio.wait_for(follower.get(), 10)
        again = await WORKFLOW.run(4, store=store, run_id="parent-4")
        kept = {run.run_id: run.status for run in await store.list_runs()}
        resumed = await WORKFLOW.resume("child-2", store=store)
    finally:
        await store.close()
    assert reports == [
        {"outputs": [4], "parent": "completed"},
        {"outputs": [6], "parent": "completed"},
    ]
    assert (progress.kind, progress.data["message"]) == ("progress", "doubling")
    assert again.outputs == [8]
    assert kept == dict.fromkeys(["parent-1", "child-2", "child-3", "parent-4"], "completed")
    assert resumed.state == {"seen": 2}
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
