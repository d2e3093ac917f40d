"""Text a store cannot keep as it is: lone surrogates, and errors whose ``str()`` raises.

A name Python decoded with ``"surrogateescape"`` (a Linux file name that is
not UTF-8) holds a lone surrogate, which UTF-8, and so every store, has no
place for. Such a text in a step's error, an outcome's summary or a search
field once failed the commit or the failure's record, and left the run
``running`` with no owner, failing the same way on every resume. Now a run
fails or completes on the record, and names that can never be stored are
refused before anything runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from postgres import postgres_dsn
from treadle import ExecutorFailure, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import ExecutorFailedError, WorkflowValidationError
from treadle.stores import PostgresStore, SqliteStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from treadle._stores._store import Store

# How Python names a file called b"report-\xff.txt" on Linux (os.listdir, sys.argv).
FILE_NAME = b"report-\xff.txt".decode("utf-8", "surrogateescape")


def sqlite_store(tmp_path: Path, new_schema: Callable[[], str]) -> Store:
    return SqliteStore(tmp_path / "runs.sqlite")


def postgres_store(tmp_path: Path, new_schema: Callable[[], str]) -> Store:
    return PostgresStore(postgres_dsn(), schema=new_schema())


STORES = [
    pytest.param(sqlite_store, id="sqlite"),
    pytest.param(postgres_store, id="postgres", marks=pytest.mark.integration),
]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this error")


def failing_with(error: Exception) -> WorkflowBuilder:
    @executor(id="read")
    async def read(path: str, ctx: WorkflowContext[str]) -> None:
        raise error

    return WorkflowBuilder(start=read, name="reader")


@pytest.mark.parametrize("make_store", STORES)
async def test_a_step_failing_on_a_file_name_that_is_not_utf8_fails_its_run_on_the_record(
    tmp_path, new_schema, make_store
):
    workflow = failing_with(ValueError(f"no customer in {FILE_NAME}")).build()
    store = make_store(tmp_path, new_schema)
    try:
        with pytest.raises(ExecutorFailedError) as failed:
            await workflow.run(FILE_NAME, store=store, run_id="r1")
        row = await store.get_run("r1")
        events = await store.read_events("r1")
    finally:
        await store.close()
    assert isinstance(failed.value.__cause__, ValueError)
    assert row.status == "failed"
    assert row.owner is None
    assert row.error.endswith("ValueError: no customer in report-\\udcff.txt")
    (reported,) = [e for e in events if e.kind == "executor_failed"]
    assert reported.data["error"]["message"] == "no customer in report-\\udcff.txt"
    assert events[-1].kind == "status_changed"
    assert events[-1].data["status"] == "failed"


async def test_an_error_whose_str_raises_fails_its_run_on_the_record(tmp_path):
    workflow = failing_with(Unprintable()).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ExecutorFailedError, match="Unprintable: <str"):
            await workflow.run("in.txt", store=store, run_id="r1")
        row = await store.get_run("r1")
        events = await store.read_events("r1")
    finally:
        await store.close()
    assert row.status == "failed"
    assert row.error.endswith("Unprintable: <str() of the error raised RuntimeError>")
    assert [e.data["status"] for e in events if e.kind == "status_changed"][-1] == "failed"


async def test_names_no_store_can_keep_are_refused_before_anything_runs(tmp_path):
    @executor(id=FILE_NAME)
    async def named_for_a_file(path: str, ctx: WorkflowContext[str]) -> None:
        ctx.yield_output(path)

    with pytest.raises(WorkflowValidationError, match=r"executor id 'report-\\udcff.txt'"):
        WorkflowBuilder(start=named_for_a_file).build()

    @executor(id="echo")
    async def echo(path: str, ctx: WorkflowContext[str]) -> None:
        ctx.yield_output(path)

    with pytest.raises(WorkflowValidationError, match=r"the workflow's name 'report-\\udcff"):
        WorkflowBuilder(start=echo, name=FILE_NAME).build()
    workflow = WorkflowBuilder(start=echo).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ValueError, match=r"run_id 'report-\\udcff.txt' must be 1 to 200"):
            await workflow.run("x", store=store, run_id=FILE_NAME)
        assert await store.list_runs() == []
        with pytest.raises(ValueError, match=r"deduplication_id 'report-\\udcff.txt' holds"):
            await workflow.run("x", store=store, deduplication_id=FILE_NAME)
        assert await store.list_runs() == []
        # The file name as a value is stored as any other (JSON escapes it).
        result = await workflow.run(FILE_NAME, store=store)
        assert result.outputs == [FILE_NAME]
        assert (await workflow.resume(result.run_id, store=store)).outputs == [FILE_NAME]
        (first, *_) = (await workflow.history(result.run_id, store=store)).checkpoints
        with pytest.raises(ValueError, match=r"run_id 'report-\\udcff.txt' must be 1 to 200"):
            await workflow.fork(
                result.run_id, first.checkpoint_id, new_run_id=FILE_NAME, store=store
            )
        assert [run.run_id for run in await store.list_runs()] == [result.run_id]
    finally:
        await store.close()


async def test_an_outcome_summary_no_store_can_keep_fails_the_step_and_the_run_says_so(tmp_path):
    @executor(id="judge")
    async def judge(path: str, ctx: WorkflowContext[str]) -> None:
        ctx.set_outcome("rejected", f"{path} is unreadable")

    workflow = WorkflowBuilder(start=judge).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ExecutorFailedError) as failed:
            await workflow.run(FILE_NAME, store=store, run_id="r1")
        row = await store.get_run("r1")
    finally:
        await store.close()
    assert isinstance(failed.value.__cause__, ValueError)
    assert "summary 'report-\\udcff.txt is unreadable' holds a lone surrogate" in str(
        failed.value.__cause__
    )
    assert row.status == "failed"


async def test_a_search_field_text_no_store_can_keep_is_unset_and_the_run_completes(
    tmp_path, caplog
):
    @executor(id="file")
    async def file(path: str, ctx: WorkflowContext[str]) -> None:
        ctx.state.set("customer", path)
        ctx.yield_output(path)

    workflow = (
        WorkflowBuilder(start=file)
        .add_state("customer", default="")
        .add_search_field("customer", str, state=lambda state: state["customer"])
        .build()
    )
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await workflow.run(FILE_NAME, store=store, run_id="r1")
        row = await store.get_run("r1")
    finally:
        await store.close()
    assert result.state["customer"] == FILE_NAME
    assert row.status == "completed"
    assert "search field 'customer' is a text with a lone surrogate at position 7" in caplog.text


async def test_a_routed_error_whose_str_raises_reaches_its_route_and_the_run_completes(tmp_path):
    @executor(id="read")
    async def read(path: str, ctx: WorkflowContext[str]) -> None:
        raise Unprintable

    @executor(id="report")
    async def report(failure: ExecutorFailure, ctx: WorkflowContext[str]) -> None:
        ctx.yield_output(failure.message)

    workflow = WorkflowBuilder(start=read).add_error_edge(read, report).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await workflow.run(FILE_NAME, store=store)
    finally:
        await store.close()
    assert result.outputs == ["<str() of the error raised RuntimeError>"]
