"""SQLite's layout 2 of an event-log row reads back every event exactly as it was written.

Layout 2 (``treadle._stores._event_rows``) writes kinds as codes, leaves out
what an event shares with the one before it, and writes the fields of the
commonest events' data by position: a parked run's log is 390 bytes, not
810. What a store gives back must not change: each event's superstep, kind,
executor, time (its type and sign too: ``-0.0``, an integer) and data (its
fields in their order), for data of each known shape, near misses of it
(a field more, another order, an escape, a space) and anything else.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_store_suite import checkpoint, new_run

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._stores._event_packing import PACK_FROM, events_text, pack_events
from treadle._stores._event_rows import decoded, is_layout_2, log_text, short_text
from treadle._stores._events import EventEntry
from treadle.errors import EventLogCorruptError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

ACTOR = (
    '{"kind":"python","name":"ann@box","label":"python:ann@box","door":"python",'
    '"role":"admin","groups":["a","b"]}'
)
HASH = "93" * 32

# The data of each shape as its writers spell it, and near misses that must keep their object.
SHAPED = [
    ("run_started", '{"resumed":true,"from_status":"waiting","by":"box:12:ab"}'),
    ("run_started", '{"resumed":true,"from_status":"running","by":null}'),
    ("superstep_started", '{"executor_ids":["a","b c","ü"]}'),
    ("superstep_started", '{"executor_ids":[]}'),
    ("executor_invoked", '{"position":0,"attempt":1}'),
    ("executor_invoked", '{"position":-3,"attempt":12}'),
    ("executor_completed", '{"position":7}'),
    ("executor_suspended", '{"position":0,"wait":"timer","key":"tim-4bbd06548d76"}'),
    ("checkpoint_saved", '{"checkpoint_id":"01a222673a567ae28bacedb6babbbae3"}'),
    ("checkpoint_saved", '{"checkpoint_id":""}'),
    ("status_changed", '{"status":"waiting","error":null}'),
    ("run_created", f'{{"actor":{ACTOR},"audit":{{"seq":12,"hash":"{HASH}"}}}}'),
]
NEAR_MISSES = [
    ("run_started", '{"resumed":false,"from_status":"waiting","by":"x"}'),
    ("superstep_started", '{"executor_ids":["a\\"b"]}'),
    ("superstep_started", '{"executor_ids":["a"],"more":1}'),
    ("executor_invoked", '{"attempt":1,"position":0}'),
    ("executor_invoked", '{"position":0, "attempt":1}'),
    ("executor_invoked", '{"position":1.0,"attempt":1}'),
    ("executor_completed", '{"position":0,"value":{"position":1}}'),
    ("executor_suspended", '{"position":0,"wait":"timer","key":"a\\\\b"}'),
    ("executor_suspended", '{"position":0,"wait":"timer","key":"k","key2":"v"}'),
    ("executor_suspended", '{"position":0,"key":"k","wait":"timer","key":"k2"}'),
    ("checkpoint_saved", '{"checkpoint_id":"a\\"b"}'),
    ("checkpoint_saved", '{"checkpoint_id":"a","b":"c"}'),
    ("checkpoint_saved", '{"checkpoint_id":"a","b":{"c":"d"}}'),
    ("checkpoint_saved", '{"checkpoint_id":5}'),
    ("status_changed", '{"status":"failed","error":"boom"}'),
    ("status_changed", '{"status":"cancelled","by":"cancel"}'),
    ("status_changed", '{"status":"completed","error":null,"outcome":"ok"}'),
    ("run_created", f'{{"actor":{ACTOR},"audit":{{"seq":1,"hash":"{HASH}"}},"x":1}}'),
    ("run_created", f'{{"input":[1],"actor":{ACTOR},"audit":{{"seq":1,"hash":"h"}}}}'),
    ("run_created", '{"actor":{"kind":"user","name":"a\\u00e9"},"audit":{"seq":1,"hash":"h"}}'),
]
OTHERS = [
    ("output", '{"value":"naïve \\"quoted\\" \\\\ ✓ 𝄞"}'),
    ("output", "{}"),
    ("custom", '{"data":{"nested":[1,2.5,null,true]}}'),
    ('a kind "of its" own', '{"x":1}'),
    ("", "{}"),
]
ALL_DATA = SHAPED + NEAR_MISSES + OTHERS


def written(entries):
    """What a reader must get back: each event, its data parsed, its time by its text."""
    return [(s, k, e, repr(a), list(json.loads(d).items())) for s, k, e, a, d in entries]


def read(events):
    return [(s, k, e, repr(a), list(d.items())) for s, k, e, a, d in events]


def test_a_parked_runs_two_rows_are_short() -> None:
    first = [
        EventEntry(0, "run_started", None, 0.0, "{}"),
        EventEntry(0, "checkpoint_saved", None, 0.0, SHAPED[8][1]),
        EventEntry(0, "status_changed", None, 0.0, '{"status":"running","error":null}'),
        EventEntry(0, "run_created", None, 0.0, SHAPED[-1][1]),
    ]
    second = [
        EventEntry(1, "superstep_started", None, 0.0, '{"executor_ids":["nap"]}'),
        EventEntry(1, "executor_invoked", "nap", 0.0, SHAPED[4][1]),
        EventEntry(1, "executor_suspended", "nap", 0.0, SHAPED[7][1]),
        EventEntry(1, "superstep_completed", None, 0.0, "{}"),
        EventEntry(1, "checkpoint_saved", None, 0.0, SHAPED[8][1]),
        EventEntry(1, "status_changed", None, 0.0, SHAPED[10][1]),
    ]
    assert short_text(second) == (
        '[2,1,0.0,[3,["nap"]],[6,0,1,"nap"],'
        '[9,{"position":0,"wait":"timer","key":"tim-4bbd06548d76"},"nap"],[4],'
        '[10,{"checkpoint_id":"01a222673a567ae28bacedb6babbbae3"}],[12,"waiting"]]'
    )
    for entries in (first, second):
        text = short_text(entries)
        assert is_layout_2(text)
        assert read(decoded(text)) == written(entries)
        old = "[" + ",".join(json.dumps([*e[:4], json.loads(e[4])]) for e in entries) + "]"
        assert 5 * len(text) < len(old) * 3  # under three fifths of the log's JSON
        assert json.loads(log_text(text)) == json.loads(old)


@pytest.mark.parametrize(("kind", "data"), ALL_DATA)
def test_each_data_reads_back_with_its_fields_in_order(kind: str, data: str) -> None:
    for executor_id in (None, "exec", 'ex"ec'):
        entries = [EventEntry(3, kind, executor_id, 5.5, data)]
        assert read(decoded(short_text(entries))) == written(entries)


_times = st.sampled_from([0.0, -0.0, 1.5, 1_700_000_000.123456, 3, 0, 1e300, -2.25])
_entries = st.lists(
    st.builds(
        EventEntry,
        st.integers(-2, 3),
        st.just(""),
        st.one_of(st.none(), st.text(max_size=4)),
        _times,
        st.just(""),
    ).flatmap(
        lambda e: st.sampled_from(ALL_DATA).map(lambda kd: e._replace(kind=kd[0], data=kd[1]))
    ),
    min_size=1,
    max_size=8,
)


@given(entries=_entries)
@settings(max_examples=300, deadline=None)
def test_any_events_in_any_order_read_back_as_written(entries: list[EventEntry]) -> None:
    text = short_text(entries)
    assert read(decoded(text)) == written(entries)
    assert [tuple(e[:3]) for e in json.loads(log_text(text))] == [tuple(e[:3]) for e in entries]
    row = pack_events(text)
    assert events_text(row) == log_text(text)


def test_a_long_row_is_packed_and_reads_back() -> None:
    entries = [EventEntry(1, "output", "x", 2.0, json.dumps({"value": "y" * PACK_FROM}))]
    row = pack_events(short_text(entries))
    assert isinstance(row, bytes)
    assert read(json.loads(events_text(row))) == written(entries)


@pytest.mark.parametrize(
    "text",
    [
        "[2]",
        "[2,0,0.0]",
        "[2,0,0.0,[99]]",
        "[2,0,0.0,[12]]",
        "[2,0,0.0,[12,5]]",
        "[2,0,0.0,[0,[1]]]",
        "[2,0,0.0,[0,{},null,0.0,1,9]]",
        "[2,0,0.0,7]",
        "[2,0,0.0,[true]]",
    ],
)
def test_a_damaged_row_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        decoded(text)


async def test_a_store_gives_back_exactly_what_was_logged(store) -> None:
    # Every backend (memory, SQLite, PostgreSQL) reads the same events back.
    await new_run(store)
    batches = [ALL_DATA[i : i + 5] for i in range(0, len(ALL_DATA), 5)]
    logged = []
    for n, batch in enumerate(batches, start=1):
        entries = [
            EventEntry(n + i % 2, kind, None if i % 3 else "exec", 100.0 + (i > 2), data)
            for i, (kind, data) in enumerate(batch)
        ]
        logged += entries
        await store.commit(dataclasses.replace(checkpoint("run-1", f"c{n}", n), events=entries))
    events = await store.read_events("run-1")
    assert [e.seq for e in events] == list(range(1, len(logged) + 1))
    assert read((e.superstep, e.kind, e.executor_id, e.at, e.data) for e in events) == written(
        logged
    )
    tail = await store.read_events("run-1", after=7, limit=4)
    assert [e.seq for e in tail] == [8, 9, 10, 11]


async def test_a_parked_run_writes_layout_2_and_a_damaged_row_is_named(tmp_path: Path) -> None:
    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(60)

    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    try:
        await (
            WorkflowBuilder(start=nap, name="nap")
            .build()
            .run(1, store=store, clock=FakeClock(start=0.0), run_id="r1")
        )
        kinds = [e.kind for e in await store.read_events("r1")]
    finally:
        await store.close()
    assert kinds[-4:] == [
        "executor_suspended",
        "superstep_completed",
        "checkpoint_saved",
        "status_changed",
    ]
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT first_seq, events FROM treadle_events UNION ALL SELECT first_seq, events"
            " FROM treadle_checkpoints WHERE first_seq IS NOT NULL ORDER BY first_seq"
        )
        assert [(first, is_layout_2(text)) for first, text in rows] == [(1, True), (5, True)]
        (made,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'treadle_events'")
        assert made[0].endswith("WITHOUT ROWID")  # a new file: no index beside the table
        # The park's events are in its checkpoint's row (see _stores/_sql_events.py).
        db.execute("UPDATE treadle_checkpoints SET events = '[2,1,0.0,[14]]' WHERE first_seq = 5")
    store = SqliteStore(path)
    try:
        with pytest.raises(EventLogCorruptError) as raised:
            await store.read_events("r1")
        assert (raised.value.run_id, raised.value.first_seq) == ("r1", 5)
    finally:
        await store.close()
