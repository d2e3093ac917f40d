"""A run's log with rows in both tables (SQLite: a checkpoint's events in its row) stays whole.

Any interleaving of single commits (their events in the checkpoint's row),
batches (a row of ``treadle_events``), statuses with events, pauses, prunes
(recorded or not) and retention reads as the memory store's: the same
events, from any seq on with any limit, the same last seq, and the same
webhook messages, each once.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_rows import comparable, rows_of
from test_store_suite import T0, checkpoint, new_run

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._stores._events import EventEntry
from treadle._stores._outbox import new_endpoint
from treadle._values._actors import Actor
from treadle.errors import ExecutorFailedError, RunNotFoundError
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

_request_ids = itertools.count()


def _entry(superstep: int, n: int) -> EventEntry:
    """One of the kinds the webhooks' feed turns into messages, or a plain one.

    A request has a deadline (a ``request.deadline_near`` message) when n is 1 mod 5; an
    answer (n 2 mod 5) answers the one just before it, in its own write or an earlier
    one; a failure (n 3 mod 5) ends every reminder before it. Where in a write each
    falls is free: the SQL stores' feeds settle a reminder by the events after it in
    its row, as the memory store's does, event by event.
    """
    at = T0 + superstep
    kind = n % 5
    if kind in (0, 1):
        data: dict[str, Any] = {"request_id": f"q{n}"}
        if kind == 1:
            data["deadline_at"] = at + 3600
        return EventEntry(superstep, "request", "x", at, json.dumps(data))
    if kind == 2:
        answered = {"request_id": f"q{n - 1}"}
        return EventEntry(superstep, "request_answered", "x", at, json.dumps(answered))
    if kind == 3:
        return EventEntry(superstep, "status_changed", None, at, json.dumps({"status": "failed"}))
    return EventEntry(superstep, "note", "x", at, json.dumps({"n": n}))


def _entries(superstep: int, count: int, counter: Any) -> tuple[EventEntry, ...]:
    """``count`` events, the next of the kinds :func:`_entry` cycles through."""
    return tuple(_entry(superstep, next(counter)) for _ in range(count))


OPS = st.one_of(
    st.tuples(st.just("commit"), st.integers(0, 3)),
    st.tuples(st.just("batch"), st.lists(st.integers(0, 2), min_size=2, max_size=3)),
    st.tuples(st.just("status"), st.integers(1, 2)),
    st.tuples(st.just("pause"), st.just(0)),
    st.tuples(st.just("prune"), st.integers(1, 3)),
    st.tuples(st.just("recorded_prune"), st.integers(1, 3)),
    st.tuples(st.just("retain"), st.integers(1, 3)),
    st.tuples(st.just("batch_retain"), st.integers(1, 3)),
)


def _batch(checkpoints: list[Any]) -> list[Any]:
    """A batch's checkpoints, a request with a deadline only in its last (see :func:`_entry`)."""
    if any(
        e.kind == "request" and "deadline" in e.data for c in checkpoints[:-1] for e in c.events
    ):
        return [dataclasses.replace(c, events=()) for c in checkpoints[:-1]] + checkpoints[-1:]
    return checkpoints


async def _apply(store: Any, ops: list[tuple[str, Any]]) -> None:
    await new_run(store)
    superstep = 0
    counter = itertools.count()
    actor = Actor.service("reviewer", door="cli")

    def next_checkpoint(events: int) -> Any:
        nonlocal superstep
        superstep += 1
        record = checkpoint("run-1", f"c{superstep}", superstep, created_at=T0 + superstep)
        return dataclasses.replace(record, events=_entries(superstep, events, counter))

    for op, arg in ops:
        if op == "commit":
            await store.commit(next_checkpoint(arg))
        elif op == "retain":
            await store.commit(next_checkpoint(1), keep_last=arg)
        elif op == "batch_retain":
            await store.commit_many(_batch([next_checkpoint(1), next_checkpoint(2)]), keep_last=arg)
        elif op == "batch":
            await store.commit_many(_batch([next_checkpoint(n) for n in arg]))
        elif op == "status":
            entries = _entries(superstep, arg, counter)
            await store.set_status("run-1", "running", None, events=entries)
        elif op == "pause":
            await store.pause("run-1")
            await store.unpause("run-1")
        elif op == "prune":
            await store.prune("run-1", arg)
        elif op == "recorded_prune":
            await store.prune("run-1", arg, actor=actor)


async def _log_of(store: Any) -> dict[str, Any]:
    events = await store.read_events("run-1")
    size = len(events)
    reads = {
        (after, limit): comparable(await store.read_events("run-1", after=after, limit=limit))
        for after in range(size + 2)
        for limit in (None, *range(1, size + 2))
    }
    messages = await store.outbox().messages("pending", limit=10_000)
    return {
        "events": comparable(events),
        "reads": reads,
        "last": await store.last_event_seq("run-1"),
        "kept": [info.checkpoint_id for info in await store.list_checkpoints("run-1")],
        "messages": sorted((m.run_id, m.seq, m.event_type) for m in messages),
    }


async def _both(tmp_path: Path, name: str, ops: list[tuple[str, Any]]) -> tuple[dict, dict]:
    logs = []
    for store in (SqliteStore(tmp_path / f"{name}.db"), MemoryStore()):
        try:
            await store.outbox().add_endpoint(new_endpoint("http://127.0.0.1:9/h", now=time.time()))
            await _apply(store, ops)
            logs.append(await _log_of(store))
        finally:
            await store.close()
    return logs[0], logs[1]


_files = itertools.count()


@settings(
    max_examples=int(os.environ.get("LOG_ROWS_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(OPS, min_size=1, max_size=10))
async def test_any_interleaving_reads_as_the_memory_stores_log(tmp_path: Path, ops) -> None:
    name = f"p{next(_files)}"
    sqlite, memory = await _both(tmp_path, name, ops)
    assert sqlite == memory
    assert [e[0] for e in sqlite["events"]] == list(range(1, sqlite["last"] + 1))
    rows = rows_of(tmp_path / f"{name}.db", "run-1", "first_seq, last_seq")
    assert [first for first, _ in rows[1:]] == [last + 1 for _, last in rows[:-1]]


# -- Workflows: failure, time travel, forks, prune, every durability mode ------------------

STEPS = 6


def _failing_counter(fail_at: dict[str, int]):
    """Counts to STEPS, one superstep a number; fails at ``fail_at["n"]`` once, then rests."""

    @executor(id="count")
    async def count(n: int, ctx: WorkflowContext[int]) -> None:
        if n == fail_at.get("n"):
            fail_at.pop("n")
            raise RuntimeError("once")
        if n == 3:
            assert await ctx.request("go on?", str) == "yes"
        if n < STEPS:
            ctx.send_message(n + 1)
        else:
            ctx.yield_output(n)

    return WorkflowBuilder(start=count, name="failing").add_edge(count, count).build()


async def _story(store: Any, durability: str) -> dict[str, Any]:
    clock = FakeClock(start=T0)
    fail_at = {"n": 5}
    workflow = _failing_counter(fail_at)
    options = {"store": store, "clock": clock, "durability": durability}
    await store.outbox().add_endpoint(new_endpoint("http://127.0.0.1:9/h", now=time.time()))
    asked = await workflow.run(1, run_id="r", **options)
    [request] = asked.pending_requests
    await store.pause("r")
    await store.unpause("r")
    with pytest.raises(ExecutorFailedError):
        await workflow.respond("r", {request.request_id: "yes"}, **options)
    assert (await store.get_run("r")).status == "failed"
    kept = await store.list_checkpoints("r")
    by_step = {info.superstep: info.checkpoint_id for info in kept}
    # Time travel: from the checkpoint before the failure; the number fails no more.
    done = await workflow.resume("r", by_step[max(by_step)], **options)
    assert done.status is RunStatus.COMPLETED, done.status
    await store.prune("r", 2, actor=Actor.service("reviewer", door="cli"))
    head = (await store.get_run("r")).checkpoint_id
    await workflow.fork("r", head, new_run_id="f", store=store)
    await store.prune("r", 1)
    logs = {}
    for run_id in ("r", "f"):
        events = await store.read_events(run_id)
        size = len(events)
        logs[run_id] = {
            "events": comparable(events),
            "tails": [
                comparable(await store.read_events(run_id, after=k, limit=m))
                for k in range(size + 1)
                for m in (1, 2, 3)
            ],
            "last": await store.last_event_seq(run_id),
        }
        assert [e.seq for e in events] == list(range(1, size + 1))
    messages = await store.outbox().messages("pending", limit=10_000)
    logs["messages"] = sorted((m.run_id, m.seq, m.event_type) for m in messages)
    return logs


async def _stories(tmp_path: Path, durability: str) -> tuple[dict, dict]:
    found = []
    for store in (SqliteStore(tmp_path / f"{durability}.db"), MemoryStore()):
        try:
            found.append(await _story(store, durability))
        finally:
            await store.close()
    return found[0], found[1]


def _without_times(logs: dict[str, Any]) -> dict[str, Any]:
    """The logs, less the data that differs between stores in a run (times, tracebacks)."""
    return json.loads(json.dumps(logs, default=str))


async def test_failure_time_travel_fork_and_prune_read_as_memorys_in_every_mode(
    tmp_path: Path,
) -> None:
    for durability in ("sync", "background", "batched"):
        sqlite, memory = await _stories(tmp_path, durability)
        assert sqlite["messages"] == memory["messages"], durability
        for run_id in ("r", "f"):
            assert sqlite[run_id]["last"] == memory[run_id]["last"], durability
            assert [e[:4] for e in sqlite[run_id]["events"]] == [
                e[:4] for e in memory[run_id]["events"]
            ], durability
            assert [[e[:4] for e in t] for t in sqlite[run_id]["tails"]] == [
                [e[:4] for e in t] for t in memory[run_id]["tails"]
            ], durability


# -- A follower reading while retention moves rows -----------------------------------------


@executor(id="tick")
async def _tick(n: int, ctx: WorkflowContext[int]) -> None:
    if n < 60:
        ctx.send_message(n + 1)
    else:
        ctx.yield_output(n)


async def test_a_follower_reads_every_event_once_while_retention_moves_rows(
    tmp_path: Path,
) -> None:
    import asyncio  # noqa: PLC0415

    path = tmp_path / "follow.db"
    writer, reader = SqliteStore(path, keep_last=1), SqliteStore(path)
    workflow = WorkflowBuilder(start=_tick, name="ticks").add_edge(_tick, _tick).build()
    seen: list[int] = []
    try:
        running = asyncio.create_task(workflow.run(1, run_id="t", store=writer))
        limits = itertools.cycle((1, 2, 3, 5, None))
        while True:
            finished = running.done()
            try:
                tail = await reader.read_events("t", after=len(seen), limit=next(limits))
            except RunNotFoundError:  # not written yet
                tail = []
            seen.extend(e.seq for e in tail)
            if finished and not tail:
                break
            await asyncio.sleep(0)
        assert (await running).outputs == [60]
        assert seen == list(range(1, await reader.last_event_seq("t") + 1))
        assert len(await writer.list_checkpoints("t")) == 1
    finally:
        await writer.close()
        await reader.close()


# -- A file written before schema step 20 goes on, and prunes ------------------------------


async def test_an_old_files_runs_go_on_and_prune_with_their_logs_whole(tmp_path: Path) -> None:
    from logged_app import ASKER, RUNS, SLEEPER  # noqa: PLC0415
    from test_logged_upgrade import LOGS, copy_of_the_old_file, go_on  # noqa: PLC0415

    path = copy_of_the_old_file(tmp_path)
    store = SqliteStore(path)
    try:
        await go_on(store)
        before = {run_id: await store.read_events(run_id) for run_id in RUNS}
        for run_id in RUNS:
            await store.prune(run_id, 1)
        for run_id in RUNS:
            events = await store.read_events(run_id)
            assert events == before[run_id], run_id
            assert [e.to_json() for e in events[: len(LOGS[run_id])]] == LOGS[run_id]
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            for after in range(len(events) + 1):
                for limit in (1, 2):
                    tail = await store.read_events(run_id, after=after, limit=limit)
                    assert tail == events[after : after + limit], (run_id, after, limit)
        messages = await store.outbox().messages("pending", limit=1000)
    finally:
        await store.close()
    assert sorted((m.run_id, m.event_type) for m in messages) == sorted(
        [(SLEEPER, "run.completed"), (ASKER, "request.answered"), (ASKER, "run.completed")]
    )
    homes = [home for _, home in rows_of(path, SLEEPER, "first_seq, home")]
    assert homes[-1] == "treadle_checkpoints"  # its head kept its events
    assert homes[:-1] == ["treadle_events"] * (len(homes) - 1)  # the others' moved


async def test_deleting_a_run_removes_its_rows_in_both_tables(tmp_path: Path) -> None:
    path = tmp_path / "delete.db"
    store = SqliteStore(path)
    try:
        await _apply(
            store, [("commit", 2), ("pause", 0), ("commit", 1), ("prune", 1), ("commit", 3)]
        )
        await new_run(store, "other")
        assert {home for _, home in rows_of(path, "run-1", "first_seq, home")} == {
            "treadle_events",
            "treadle_checkpoints",
        }
        await store.delete_run("run-1")
        assert rows_of(path, "run-1", "first_seq, home") == []
        assert await store.last_event_seq("other") == 0
    finally:
        await store.close()


# -- A process of the release before step 20, still writing once the file is upgraded -----

# What that release's store logs for a pause (its LOG_STATUS): the run's last seq read from
# treadle_events alone. Parameters: the time, who, the run, the run.
_OLD_LOG_STATUS = """
INSERT INTO treadle_events (run_id, first_seq, last_seq, events)
SELECT run_id, log.last + 1, log.last + 1,
    '[[' || superstep || ',"status_changed",null,' || CAST(? AS TEXT)
    || ',{"status":"' || status || '","by":"' || CAST(? AS TEXT) || '"}]]'
FROM treadle_runs, (SELECT COALESCE((SELECT last_seq FROM treadle_events WHERE run_id = ?
    ORDER BY first_seq DESC LIMIT 1), 0) AS last) AS log
WHERE run_id = ?"""


async def test_a_process_of_the_release_before_is_refused_rather_than_repeat_seqs(
    tmp_path: Path,
) -> None:
    """A process of the release before step 20 still open on the file once it is upgraded:
    its next event, numbered after treadle_events' rows alone, would repeat seqs that a
    checkpoint's row holds. The file refuses the write (loudly) and the log stays whole."""
    import sqlite3  # noqa: PLC0415

    path = tmp_path / "mixed.db"
    store = SqliteStore(path)
    try:
        await _apply(store, [("pause", 0), ("commit", 2)])  # seqs 1, 2 rows; 3, 4 a checkpoint's
        before = await store.read_events("run-1")
        with sqlite3.connect(path) as old, pytest.raises(sqlite3.IntegrityError) as refused:
            old.execute(_OLD_LOG_STATUS, (repr(T0), "pause", "run-1", "run-1"))
        assert "older than schema version 20" in str(refused.value)
        after = await store.read_events("run-1")
        await store.pause("run-1")  # today's writers go on, numbered after both tables
        seqs = [e.seq for e in await store.read_events("run-1")]
    finally:
        await store.close()
    assert after == before
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) > len(before)
