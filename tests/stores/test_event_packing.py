"""A SQLite store packs its large event rows, and reads them, text rows and all, as before.

A row a commit writes of ``PACK_FROM`` characters or more (an output, a
traceback) is deflated against a fixed dictionary
(``treadle._stores._event_packing``); smaller rows, rows the store writes
in SQL (a status it set for a caller) and rows written before packing
stay JSON text. A reader gets the same events either way, a damaged packed row is
an ``EventLogCorruptError`` naming its run and seq, and a webhook feed made
before packing is made again when the file opens, so it still sees every
event.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import pytest
from log_rows import LOG_ROWS, comparable, rows_of

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._stores._event_packing import events_text
from treadle._stores._outbox import new_endpoint
from treadle.errors import EventLogCorruptError
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from server_app import Brief, approval


def _chain():
    @executor(id="first")
    async def first(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(n + 1)

    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(60)
        ctx.yield_output(REPORT * n)  # its commit's row is large: packed

    return WorkflowBuilder(start=first, name="packed").add_edge(first, nap).build()


REPORT = "a line of the report, as long as a traceback's. " * 12


def _rows(path: Path, run_id: str) -> list[tuple[str, int]]:
    return rows_of(path, run_id, "typeof(events), length(events)")


async def test_commits_write_packed_rows_that_read_as_the_memory_store_reads_its_log(
    tmp_path: Path,
) -> None:
    wf = _chain()
    stores = {"sqlite": SqliteStore(tmp_path / "runs.db"), "memory": MemoryStore()}
    logs = {}
    for name, store in stores.items():
        clock = FakeClock(start=1000.0)
        parked = await wf.run(4, store=store, clock=clock, run_id="r1")
        assert parked.status is RunStatus.WAITING
        await clock.advance(60)
        done = await wf.resume("r1", store=store, clock=clock)
        assert done.outputs == [REPORT * 5]
        logs[name] = comparable(await store.read_events("r1"))
    try:
        assert logs["sqlite"] == logs["memory"]
        assert [kind for _, _, kind, _, _ in logs["sqlite"]].count("checkpoint_saved") >= 3
        rows = _rows(tmp_path / "runs.db", "r1")
        # The output's row is packed, the others are text.
        assert [kind for kind, _ in rows].count("blob") == 1
        with sqlite3.connect(tmp_path / "runs.db") as db:
            packed = [
                row
                for (row,) in db.execute(
                    f"SELECT events FROM {LOG_ROWS} AS log WHERE run_id = 'r1'"  # noqa: S608 - constant
                )
                if isinstance(row, bytes)
            ]
        # Under a quarter of the bytes of the JSON text it holds.
        assert 4 * sum(map(len, packed)) < sum(len(events_text(row)) for row in packed)
        # Reading from any seq gives the same tail.
        assert comparable(await stores["sqlite"].read_events("r1", after=3)) == logs["sqlite"][3:]
    finally:
        await stores["sqlite"].close()


async def test_small_rows_and_a_status_set_for_a_caller_stay_text_and_all_read_in_order(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    try:
        clock = FakeClock(start=1000.0)
        wf = _chain()
        await wf.run(4, store=store, clock=clock, run_id="r1")
        await clock.advance(60)
        await wf.resume("r1", store=store, clock=clock)
        await wf.run(4, store=store, clock=clock, run_id="r2")
        await store.cancel("r2")
        for run_id in ("r1", "r2"):
            events = await store.read_events(run_id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.kind for e in events][-1:] == ["status_changed"]
        assert events[-1].data == {"status": "cancelled", "by": "cancel"}
        outputs = [e.data for e in await store.read_events("r1") if e.kind == "output"]
        assert outputs == [{"value": REPORT * 5}]
        assert "blob" in [kind for kind, _ in _rows(tmp_path / "runs.db", "r1")]
        assert {kind for kind, _ in _rows(tmp_path / "runs.db", "r2")} == {"text"}
    finally:
        await store.close()


async def test_a_damaged_packed_row_is_named_by_run_and_seq(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    try:
        clock = FakeClock(start=1000.0)
        await _chain().run(4, store=store, clock=clock, run_id="r1")
        await clock.advance(60)
        await _chain().resume("r1", store=store, clock=clock)
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "runs.db") as db:
        (first, home) = db.execute(
            f"SELECT first_seq, home FROM {LOG_ROWS} AS log"  # noqa: S608 - constant
            " WHERE run_id = 'r1' AND typeof(events) = 'blob'"
        ).fetchone()
        db.execute(
            f"UPDATE {home} SET events = substr(events, 1, length(events) - 3)"  # noqa: S608 - a table's name
            " WHERE run_id = 'r1' AND first_seq = ?",
            (first,),
        )
    store = SqliteStore(tmp_path / "runs.db")
    try:
        with pytest.raises(EventLogCorruptError) as raised:
            await store.read_events("r1")
        assert (raised.value.run_id, raised.value.first_seq) == ("r1", first)
    finally:
        await store.close()


_TEXT_FEED = ("json_each(treadle_events_text(NEW.events))", "json_each(NEW.events)")


async def test_a_webhook_feed_made_before_packing_is_made_again_and_reads_every_row(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    try:
        endpoint = new_endpoint("http://127.0.0.1:9/hook", now=time.time())
        await store.outbox().add_endpoint(endpoint)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:  # the feed as a treadle before packing made it
        (made,) = db.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'treadle_outbox_feed'"
        ).fetchone()
        assert _TEXT_FEED[0] in made
        db.execute("DROP TRIGGER treadle_outbox_feed")
        db.execute(made.replace(*_TEXT_FEED))
    store = SqliteStore(path)
    try:
        await approval.run(Brief("hooks", 3), store=store, run_id="r1")
        clock = FakeClock(start=time.time())
        await _chain().run(4, store=store, clock=clock, run_id="r2")
        await clock.advance(60)
        await _chain().resume("r2", store=store, clock=clock)
        assert "blob" in [kind for kind, _ in _rows(path, "r2")]  # completed in a packed row
        claimed = await store.outbox().claim_messages("sender", time.time() + 120, 30.0, 10)
        assert sorted((m.run_id, m.event_type) for m in claimed) == [
            ("r1", "request.created"),
            ("r2", "run.completed"),
        ]
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        (made,) = db.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'treadle_outbox_feed'"
        ).fetchone()
    assert _TEXT_FEED[0] in made
