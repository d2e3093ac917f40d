"""A stored run's event log, read and followed from outside the process that runs it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from event_log_app import HELD, SUPERSTEPS, build, open_store

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle import RunOptions, WorkflowBuilder, WorkflowContext, executor
from treadle._workflow._following import follow
from treadle.errors import ExecutorFailedError, RunNotFoundError
from treadle.stores import SqliteStore

HERE = Path(__file__).parent


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
async def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "runs.sqlite")
        return
    schema = fresh_schema()
    yield f"{postgres_dsn()}?schema={schema}"
    await drop_schemas([schema])


async def wait_for_run(store, run_id, child):
    while True:
        try:
            return await store.get_run(run_id)
        except (RunNotFoundError, LookupError):
            assert child.poll() is None, f"the run's process exited: {child.returncode}"
            await asyncio.sleep(0.02)


@pytest.mark.timeout(90)
async def test_a_run_in_another_process_is_followed_live_to_its_end_with_every_event_once(
    store_url, tmp_path
):
    gate, log = tmp_path / "gate", tmp_path / "child.log"
    with log.open("w") as output:
        child = subprocess.Popen(  # noqa: ASYNC220 - a real other process, awaited below
            [sys.executable, str(HERE / "event_log_app.py"), store_url, "followed", str(gate)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    store = open_store(store_url)
    try:
        await wait_for_run(store, "followed", child)
        seen = []
        async for event in follow(store, "followed", poll=0.02):
            seen.append(event)
            if event.kind == "superstep_completed" and event.superstep == HELD - 1:
                # The run is held at the next superstep until this follower lets it go.
                assert child.poll() is None
                gate.touch()
        assert gate.exists()
        assert await asyncio.to_thread(child.wait, 30) == 0, log.read_text()
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
        assert seen == await store.read_events("followed")
        custom = [e.data["data"]["n"] for e in seen if e.kind == "custom"]
        assert custom == list(range(1, SUPERSTEPS + 1))
        assert [e.data for e in seen if e.kind == "output"] == [{"value": SUPERSTEPS}]
        assert seen[-1].kind == "status_changed"
        assert seen[-1].data["status"] == "completed"
        # Following an ended run reads its log and stops; from a seq, the rest only.
        assert [e.seq for e in [e async for e in follow(store, "followed", after=5)]] == [
            e.seq for e in seen[5:]
        ]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        await store.close()


async def test_a_failed_handler_leaves_its_full_traceback_in_the_log(tmp_path):
    def check_invoice(total: int) -> None:
        if total > 100:
            msg = f"total {total} is over the limit"
            raise ValueError(msg)

    @executor(id="audit")
    async def audit(total: int, ctx: WorkflowContext[int]) -> None:
        check_invoice(total)

    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ExecutorFailedError):
            await WorkflowBuilder(audit).build().run(250, store=store, run_id="audit-1")
        events = await store.read_events("audit-1")
        failed = next(e for e in events if e.kind == "executor_failed")
        error = failed.data["error"]
        assert (failed.executor_id, error["type"]) == ("audit", "ValueError")
        assert error["message"] == "total 250 is over the limit"
        assert "in check_invoice" in error["traceback"]
        assert error["traceback"].rstrip().endswith("ValueError: total 250 is over the limit")
        assert events[-1].kind == "status_changed"
        assert events[-1].data["status"] == "failed"
        assert "over the limit" in events[-1].data["error"]
    finally:
        await store.close()


async def test_following_with_stop_at_rest_ends_where_the_run_waits_for_an_answer(tmp_path):
    @executor(id="ask")
    async def ask(topic: str, ctx: WorkflowContext[str]) -> None:
        answer = await ctx.request(topic, str)
        ctx.yield_output(answer)

    workflow = WorkflowBuilder(ask).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        rested = await workflow.run("budget", store=store, run_id="asking")
        events = [e async for e in follow(store, "asking", stop_at_rest=True)]
        assert [e.kind for e in events if e.kind in ("request", "status_changed")][-2:] == [
            "request",
            "status_changed",
        ]
        assert events[-1].data["status"] == "awaiting_input"
        request = next(e for e in events if e.kind == "request")
        assert request.data["payload"] == "budget"
        (pending,) = rested.pending_requests
        await workflow.respond("asking", {pending.request_id: "yes"}, store=store)
        rest = [e async for e in follow(store, "asking", after=events[-1].seq)]
        # The answer's record first (who answered), then the run taken up again.
        assert [e.kind for e in rest[:2]] == ["request_answered", "run_started"]
        assert rest[0].data["actor"]["kind"] == "python"
        assert rest[-1].data["status"] == "completed"
        assert {"value": "yes"} in [e.data for e in rest if e.kind == "output"]
    finally:
        await store.close()


async def test_a_run_without_an_event_log_keeps_only_what_the_store_records(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        options = RunOptions(event_log=False)
        await build().run(SUPERSTEPS - 1, store=store, run_id="quiet", options=options)
        # The run's own events are not logged; the record of who acted on it still is.
        assert [e.kind for e in await store.read_events("quiet")] == ["run_created"]
    finally:
        await store.close()


async def test_a_value_the_log_cannot_write_as_json_is_logged_by_its_repr(tmp_path):
    class Opaque:
        def __repr__(self) -> str:
            return "Opaque()"

    deep: list = []
    for _ in range(400):  # deeper than JSON conversion goes
        deep = [deep]

    @executor(id="report")
    async def report(_: str, ctx: WorkflowContext[str]) -> None:
        ctx.add_event(deep)
        ctx.add_event({"thing": Opaque()})
        ctx.yield_output("done")

    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await WorkflowBuilder(report).build().run("go", store=store, run_id="odd")
        assert result.outputs == ["done"]  # what it reported never stops a run
        custom = [e.data["data"] for e in await store.read_events("odd") if e.kind == "custom"]
        assert custom[0]["unrepresentable"].startswith("[[[")
        assert custom[1] == {"thing": "Opaque()"}
    finally:
        await store.close()


async def test_an_ephemeral_event_reaches_listeners_but_not_the_log(tmp_path):
    from dataclasses import dataclass  # noqa: PLC0415 - this test's own event class

    from treadle.events import WorkflowEvent  # noqa: PLC0415

    @dataclass(slots=True, kw_only=True)
    class Token(WorkflowEvent):
        ephemeral = True  # a class attribute, not a field
        text: str = ""

    @executor(id="speak")
    async def speak(_: str, ctx: WorkflowContext[str]) -> None:
        for word in ("hello", "there"):
            ctx.emit(Token(run_id=ctx.run_id, superstep=0, executor_id="speak", text=word))
        ctx.yield_output("hello there")

    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        workflow = WorkflowBuilder(speak).build()
        async with workflow.stream("go", store=store, run_id="talk") as events:
            seen = [e.text async for e in events if isinstance(e, Token)]
        assert seen == ["hello", "there"]
        kinds = [e.kind for e in await store.read_events("talk")]
        assert "token" not in kinds
        assert "output" in kinds
    finally:
        await store.close()
