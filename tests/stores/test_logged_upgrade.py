"""Event logs written by the release before layout 2 read as that release read them, and go on.

``data/logged-v17.sqlite`` was written by that release (schema version 17:
rows of the log's JSON as text, and deflated rows from 1 KiB) running
``logged_app.py``, and ``data/logged-v17.json`` holds every run's events as
it read them back. Today's treadle opens a copy: each event reads the same,
from any seq on; the runs go on, their logs continuing in layout 2 after
the old rows with no gap in the seqs; the file keeps its event table as it
was made (a table with rowids and an index beside it), which today's
statements read and write as they do a new file's.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

from log_rows import LOG_ROWS
from logged_app import ASKER, CANCELLED, FAILER, REPORTER, RUNS, SLEEP_S, SLEEPER, START, WOKEN
from logged_app import build as build_logged

from treadle import RunStatus, Runtime
from treadle._stores._event_rows import is_layout_2
from treadle._stores._outbox import new_endpoint
from treadle._stores._sql_schema import MIGRATIONS
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

DATA = Path(__file__).parent / "data"
FILE = DATA / "logged-v17.sqlite"
LOGS = json.loads((DATA / "logged-v17.json").read_text())


def copy_of_the_old_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    shutil.copyfile(FILE, path)
    return path


def rows(path: Path) -> list[tuple[str, int, str | bytes]]:
    """The log's rows, in both tables once today's treadle opened the file (log_rows.py)."""
    table = "treadle_events" if path == FILE else f"{LOG_ROWS} AS log"
    with sqlite3.connect(path) as db:
        return db.execute(
            f"SELECT run_id, first_seq, events FROM {table} ORDER BY run_id, first_seq"  # noqa: S608 - constants
        ).fetchall()


def test_the_file_holds_the_old_rows_of_every_kind() -> None:
    with sqlite3.connect(FILE) as db:
        assert db.execute("SELECT version FROM treadle_schema").fetchall() == [(17,)]
        runs = dict(db.execute("SELECT run_id, status FROM treadle_runs"))
    assert runs == {
        SLEEPER: "waiting",
        WOKEN: "completed",
        CANCELLED: "cancelled",
        REPORTER: "completed",
        FAILER: "failed",
        ASKER: "awaiting_input",
    }
    kinds = {type(events) for _, _, events in rows(FILE)}
    assert kinds == {str, bytes}  # text rows, and packed ones (an output, the tracebacks)
    assert all(events.startswith("[[") for _, _, events in rows(FILE) if isinstance(events, str))
    assert sorted(LOGS) == sorted(RUNS)


async def test_every_old_event_reads_as_the_release_that_wrote_it_read_it(tmp_path) -> None:
    store = SqliteStore(copy_of_the_old_file(tmp_path))
    try:
        for run_id in RUNS:
            events = [event.to_json() for event in await store.read_events(run_id)]
            assert events == LOGS[run_id], run_id
            for after in range(len(events) + 1):  # from any seq on, across packed rows too
                tail = await store.read_events(run_id, after=after, limit=3)
                assert [e.to_json() for e in tail] == LOGS[run_id][after : after + 3]
            assert await store.last_event_seq(run_id) == len(events)
    finally:
        await store.close()


async def go_on(store: SqliteStore) -> None:
    """The old file's runs go on, with a webhook endpoint: its sleeper wakes, its asker is
    resumed and answered."""
    workflow = build_logged()
    await store.outbox().add_endpoint(new_endpoint("http://127.0.0.1:9/hook", now=time.time()))
    clock = FakeClock(start=START + SLEEP_S)
    [woken] = await Runtime(store, [workflow], clock=clock).wake_due()
    assert (woken.run_id, woken.status, woken.outputs) == (SLEEPER, RunStatus.COMPLETED, ["awake"])
    asked = await workflow.resume(ASKER, store=store, clock=clock)
    [request] = asked.pending_requests
    done = await workflow.respond(ASKER, {request.request_id: "yes"}, store=store, clock=clock)
    assert done.outputs == ["answered yes"]


async def test_the_old_runs_go_on_and_their_logs_continue_in_layout_2(tmp_path) -> None:
    path = copy_of_the_old_file(tmp_path)
    store = SqliteStore(path)
    try:
        await go_on(store)
        for run_id in (SLEEPER, ASKER):
            events = await store.read_events(run_id)
            old = LOGS[run_id]
            assert [e.to_json() for e in events[: len(old)]] == old
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            assert events[-1].kind == "status_changed"
            assert events[-1].data == {"status": "completed", "error": None}
    finally:
        await store.close()
    # Every row a commit wrote since is in layout 2; an action's, written in SQL, is JSON.
    written = {
        (run, is_layout_2(text) or json.loads(text)[0][1])
        for run, first, text in rows(path)
        if first > len(LOGS.get(run, ()))
    }
    assert written == {
        (SLEEPER, True),
        (ASKER, True),
        (ASKER, "run_resumed"),
        (ASKER, "request_answered"),
    }
    with sqlite3.connect(path) as db:
        # The webhooks' trigger read the new rows: each message is fed, in order.
        fed = db.execute("SELECT run_id, event_type FROM treadle_outbox ORDER BY rowid").fetchall()
        assert db.execute("SELECT version FROM treadle_schema").fetchall() == [(len(MIGRATIONS),)]
        (made,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'treadle_events'")
    assert "WITHOUT ROWID" not in made[0]  # the old file's table, as it was made
    assert fed == [
        (SLEEPER, "run.completed"),
        (ASKER, "request.answered"),
        (ASKER, "run.completed"),
    ]


def test_the_file_was_made_by_the_workflow_beside_it() -> None:
    with sqlite3.connect(FILE) as db:
        names = {name for (name,) in db.execute("SELECT DISTINCT workflow FROM treadle_runs")}
    assert names == {build_logged().name}
