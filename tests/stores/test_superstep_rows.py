"""On SQLite a durable superstep's events are in its checkpoint's row, and the log is whole.

A commit of one checkpoint writes its superstep's events in the checkpoint's
row rather than a row of ``treadle_events`` (one B-tree less a commit: see
``treadle/_stores/_sql_events.py``). These tests hold that to what the log
promised before: every event once, in order, seqs 1, 2, 3, ... with rows
the store writes in SQL (a status set for a caller, an action's record)
numbered among them; retention and ``prune`` move a deleted checkpoint's
events to ``treadle_events`` first, so the log reads the same after; and
the webhooks' feed sends each event once, none again when it moves.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING

from log_rows import comparable, rows_of

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._stores._outbox import new_endpoint
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

STEPS = 6


def _counter(*, asks: bool = False):
    """A run counting to STEPS, one superstep a number, then resting on a timer.

    With ``asks``, it asks at 2 whether to go on (a request.created for the webhooks).
    """

    @executor(id="count")
    async def count(n: int, ctx: WorkflowContext[int]) -> None:
        if asks and n == 2:
            assert await ctx.request("go on?", str) == "yes"
        if n < STEPS:
            ctx.send_message(n + 1)
        else:
            await ctx.sleep(60)
            ctx.yield_output(n)

    name = "asking" if asks else "counter"
    return WorkflowBuilder(start=count, name=name).add_edge(count, count).build()


def _homes(path: Path, run_id: str) -> list[tuple[int, int, str]]:
    return rows_of(path, run_id, "first_seq, last_seq, home")


async def test_each_superstep_logs_in_its_checkpoint_row_and_the_log_reads_as_memorys(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    logs = {}
    for name, store in (("sqlite", SqliteStore(path)), ("memory", MemoryStore())):
        try:
            parked = await _counter().run(1, store=store, clock=FakeClock(start=10.0), run_id="r")
            assert parked.status is RunStatus.WAITING
            await store.pause("r")  # a status the store sets in SQL, after the rows of steps
            await store.unpause("r")
            logs[name] = await store.read_events("r")
            tails = [await store.read_events("r", after=k, limit=4) for k in range(len(logs[name]))]
            assert [e.seq for tail in tails for e in tail[:1]] == list(range(1, len(tails) + 1))
            assert await store.last_event_seq("r") == len(logs[name])
        finally:
            await store.close()
    assert comparable(logs["sqlite"]) == comparable(logs["memory"])
    assert [e.seq for e in logs["sqlite"]] == list(range(1, len(logs["sqlite"]) + 1))
    homes = _homes(path, "r")
    # The start's checkpoint row (with its record), one checkpoint row a superstep, then
    # the pause's and the unpause's rows, written in SQL: seqs with no gap, across tables.
    assert [home for _, _, home in homes] == [
        "treadle_checkpoints",
        *["treadle_checkpoints"] * STEPS,
        "treadle_events",
        "treadle_events",
    ]
    assert [first for first, _, _ in homes[1:]] == [last + 1 for _, last, _ in homes[:-1]]
    assert homes[-1][1] == len(logs["sqlite"])


async def test_retention_and_prune_move_a_checkpoints_events_and_the_feed_sends_none_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    workflow = _counter(asks=True)
    try:
        await store.outbox().add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
        clock = FakeClock(start=time.time())
        asked = await workflow.run(1, store=store, clock=clock, run_id="r")
        [request] = asked.pending_requests
        parked = await workflow.respond("r", {request.request_id: "yes"}, store=store, clock=clock)
        assert parked.status is RunStatus.WAITING
        before = await store.read_events("r")
        deleted = await store.prune("r", 1)  # all but its latest checkpoint
        assert deleted >= STEPS  # the start's, each number's but the last, the answer's
        await clock.advance(60)
        done = await workflow.resume("r", store=store, clock=clock)
        assert done.outputs == [STEPS]
        after = await store.read_events("r")
    finally:
        await store.close()
    assert after[: len(before)] == before  # the moved rows read as they did
    assert [e.seq for e in after] == list(range(1, len(after) + 1))
    with sqlite3.connect(path) as db:
        fed = db.execute(
            "SELECT event_type, event_seq FROM treadle_outbox ORDER BY event_seq"
        ).fetchall()
        # Prune kept the latest; the completion added one.
        kept = db.execute("SELECT COUNT(*) FROM treadle_checkpoints WHERE run_id = 'r'").fetchone()
    # Each message once, though the request's row moved after it was fed.
    asked_at = next(e.seq for e in before if e.kind == "request")
    answered_at = next(e.seq for e in before if e.kind == "request_answered")
    completed_at = after[-1].seq
    assert fed == [
        ("request.created", asked_at),
        ("request.answered", answered_at),
        ("run.completed", completed_at),
    ]
    assert kept == (2,)
    homes = [home for first, _, home in _homes(path, "r") if first <= len(before)]
    assert "treadle_checkpoints" in homes[-2:]  # the latest kept its own row
    assert homes.count("treadle_checkpoints") == 1  # the others' moved


async def test_a_store_keeping_the_last_checkpoints_keeps_the_whole_log(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SqliteStore(path, keep_last=2)
    memory = MemoryStore()
    try:
        for each in (store, memory):
            await _counter().run(1, store=each, clock=FakeClock(start=10.0), run_id="r")
        assert comparable(await store.read_events("r")) == comparable(await memory.read_events("r"))
        assert len(await store.list_checkpoints("r")) == 2
    finally:
        await store.close()
    firsts = [first for first, _, _ in _homes(path, "r")]
    assert firsts == sorted(set(firsts))  # each row once: moved, never copied
