"""The webhooks' outbox behaves alike on every store: memory, SQLite and PostgreSQL (issue 29).

A request asked by a run becomes a ``request.created`` message in the
transaction of its event (the memory store's feed, the SQL stores'
trigger); a claim leases it; a failed delivery past the endpoint's
attempts leaves a dead letter, which ``resend`` makes due again; an
endpoint made for a person keeps its link offer, and the link a message
carries is kept once however often it is offered.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from test_store_suite import new_run

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._stores import _sql_outbox as sql
from treadle._stores._answer_links import LinkOffer
from treadle._stores._events import EventEntry
from treadle._stores._outbox import new_endpoint, offered_link
from treadle.stores import PostgresStore, SqliteStore

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from server_app import Brief, approval


async def test_a_request_is_a_message_claimed_dead_and_resent_on_every_store(store):
    outbox = store.outbox()
    offer = LinkOffer("maria", ("finance",), 3600.0, "https://treadle.example.com")
    endpoint = new_endpoint(
        "http://127.0.0.1:9/hook", now=time.time(), attempts=1, backoff=0.1, links=offer
    )
    await outbox.add_endpoint(endpoint)
    assert [e.links for e in await outbox.endpoints()] == [offer]
    await approval.run(Brief("hooks", 3), store=store, run_id="r1")
    (message,) = await outbox.claim_messages("sender-a", time.time(), 30.0, 10)
    assert (message.run_id, message.event_type) == ("r1", "request.created")
    assert await outbox.claim_messages("sender-b", time.time(), 30.0, 10) == []  # leased
    link = offered_link(message, endpoint)
    assert link is not None
    assert (link.principal, link.groups) == ("maria", ("finance",))
    assert link.request_id == message.event[4]["request_id"]
    await outbox.add_link(link)
    await outbox.use_link(link.nonce, time.time(), "maria")
    await outbox.add_link(offered_link(message, endpoint))  # offered again: kept as it was
    kept = await outbox.link(link.nonce)
    assert kept is not None
    assert kept.used_by == "maria"
    await outbox.message_failed(message.message_id, "sender-a", "HTTP 500", None)
    (dead,) = await outbox.messages("dead")
    assert (dead.message_id, dead.attempts, dead.last_error) == (message.message_id, 1, "HTTP 500")
    assert await outbox.resend(None, time.time()) == 1
    (again,) = await outbox.claim_messages("sender-b", time.time(), 30.0, 10)
    assert again.webhook_id == message.webhook_id
    await outbox.message_sent(again.message_id, "sender-b")
    assert await outbox.messages("pending") == []
    assert await outbox.messages("dead") == []


async def test_a_number_json_cannot_write_in_a_runs_events_fails_no_commit_the_feed_reads(store):
    # The feed reads each event row as JSON (SQLite's json_each, PostgreSQL's jsonb):
    # an output of infinity once went into the log as the bare word Infinity, which
    # is not JSON, and failed the run's commits once any endpoint existed.
    @executor(id="measure")
    async def measure(n: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(float("inf"))

    outbox = store.outbox()
    await outbox.add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
    result = await WorkflowBuilder(start=measure).build().run(1, store=store, run_id="r1")
    assert result.status.value == "completed"
    assert result.outputs == [float("inf")]
    (output,) = [e for e in await store.read_events("r1") if e.kind == "output"]
    assert output.data == {"value": "Infinity"}
    claimed = await outbox.claim_messages("sender", time.time(), 30.0, 10)
    assert [m.event_type for m in claimed] == ["run.completed"]


async def test_a_request_with_a_deadline_settled_in_its_own_row_leaves_no_reminder(store):
    # A row of the log that asks with a deadline and then settles it (the run fails; an
    # answer): the memory store's feed drops the reminder it adds, event by event. The SQL
    # stores' feeds dropped a row's settled reminders before adding its messages, so the
    # reminder outlived its run.
    outbox = store.outbox()
    await outbox.add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
    at = time.time()

    def asked(request_id: str) -> EventEntry:
        data = {"request_id": request_id, "deadline_at": at + 7200}
        return EventEntry(0, "request", "ask", at, json.dumps(data))

    answered = EventEntry(0, "request_answered", "ask", at, json.dumps({"request_id": "q1"}))
    failed = EventEntry(0, "status_changed", None, at, json.dumps({"status": "failed"}))
    rows = {
        "answered": (asked("q1"), answered),
        "ended": (asked("q2"), failed),
        "asked-after": (failed, asked("q3")),  # settled by nothing after it: kept
    }
    for run_id, events in rows.items():
        await new_run(store, run_id, first=f"{run_id}-c0")
        await store.set_status(run_id, "awaiting_input", None, events=events)
    pending = await outbox.messages("pending")
    reminders = [m.run_id for m in pending if m.event_type == "request.deadline_near"]
    assert reminders == ["asked-after"]
    assert sorted(m.event_type for m in pending if m.run_id != "asked-after") == [
        "request.answered",
        "request.created",
        "request.created",
        "run.failed",
    ]


def _drops_first(feed: str) -> str:
    """``feed`` as a treadle before this one wrote it: reminders dropped, then rows added."""
    start, middle = feed.index("    INSERT INTO treadle_outbox"), feed.index("    DELETE FROM")
    end = feed.index(";", feed.index("'cancelled'", middle)) + 1
    return feed[:start] + feed[middle:end] + "\n" + feed[start:middle] + feed[end:]


@pytest.mark.integration
async def test_an_older_postgres_feed_is_made_again_when_the_store_opens(dsn, schema):
    import psycopg  # noqa: PLC0415 - only this test needs it

    old = _drops_first(sql.POSTGRES_FEED_FUNCTION)
    assert old.index("DELETE FROM treadle_outbox") < old.index("INSERT INTO treadle_outbox")
    store = PostgresStore(dsn, schema=schema)
    try:
        await store.outbox().add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(f"SET search_path TO {schema}")
        await db.execute(old)
        found = await db.execute(sql.POSTGRES_OLD_FEED)
        assert await found.fetchone() == (1,)  # the older feed, as found at open
    store = PostgresStore(dsn, schema=schema)
    try:
        await new_run(store, "r1", first="r1-c0")  # opens the store: the feed is made again
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(f"SET search_path TO {schema}")
        found = await db.execute(sql.POSTGRES_OLD_FEED)
        assert await found.fetchone() is None


async def test_an_older_sqlite_feed_is_made_again_when_the_file_opens(tmp_path):
    import sqlite3  # noqa: PLC0415 - only this test needs it

    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    try:
        await store.outbox().add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        made = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        for name in ("treadle_outbox_feed", "treadle_outbox_step_feed"):
            db.execute(f"DROP TRIGGER {name}")
            db.execute(_drops_first(made[name]))
        assert db.execute(sql.SQLITE_OLD_FEED).fetchone() == (1,)
    store = SqliteStore(path)
    try:
        await new_run(store, "r1", first="r1-c0")  # opens the file: its feed is made again
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute(sql.SQLITE_OLD_FEED).fetchone() is None
        again = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
    assert {name: again[name] for name in made} == made


async def test_deleting_a_run_deletes_its_answer_links_on_every_store(store):
    # Request ids are unique within a run only: a run made later under a deleted run's id
    # asks the same ids, and a link left behind would answer its question.
    outbox = store.outbox()
    offer = LinkOffer("maria", (), 3600.0, "https://treadle.example.com")
    endpoint = new_endpoint("http://127.0.0.1:9/hook", now=time.time(), links=offer)
    await outbox.add_endpoint(endpoint)
    links = {}
    for run_id in ("r1", "r2"):
        await approval.run(Brief("hooks", 3), store=store, run_id=run_id)
    for message in await outbox.claim_messages("sender", time.time(), 30.0, 10):
        link = offered_link(message, endpoint)
        assert link is not None
        await outbox.add_link(link)
        links[message.run_id] = link.nonce
    assert sorted(links) == ["r1", "r2"]
    await store.delete_run("r1")
    assert await outbox.link(links["r1"]) is None
    kept = await outbox.link(links["r2"])
    assert kept is not None
    assert kept.run_id == "r2"
