"""The inbox of requests reads a run's checkpoint and its inbox apart: a commit between them.

The commit that applies an answer removes the request from the run's
checkpoint and the answer from its inbox at once. Read checkpoint first and
inbox second, a request answered and applied in between looked open: the
page's inbox count stayed up after its answer (a flaky browser test found
it). The listing now sees that the run moved on, and reads again; the
metrics gauge of open requests leaves such a run to its next reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle._operations._gauges import GaugeReader
from treadle._operations._requests import pending_requests
from treadle._workflow._versions import Hosted
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    import pytest


@executor(id="review")
async def review(title: str, ctx: WorkflowContext[str]) -> None:
    verdict = await ctx.request({"title": title}, str)
    ctx.yield_output(f"{title}: {verdict}")


async def _asking(tmp_path) -> tuple[SqliteStore, Any, str, str]:
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = WorkflowBuilder(start=review, name="review").build()
    asked = await workflow.run("Stool", store=store)
    assert asked.status is RunStatus.AWAITING_INPUT
    [request] = asked.pending_requests
    return store, workflow, asked.run_id, request.request_id


def _answered_between_the_reads(
    store: SqliteStore, workflow: Any, request_id: str, *, read: str = "inbox"
) -> list[Any]:
    """Make the store's first inbox read (``read``) apply an answer first: the worst moment."""
    reads_of_the_inbox = getattr(store, read)
    applied: list[Any] = []
    answering: list[str] = []

    async def inbox_after_the_answer_went_in(*args: Any) -> Any:
        if not answering:  # the checkpoint was read, still asking: now the answer comes and goes
            answering.append(read)  # (respond reads the inbox too)
            (asked,) = await store.list_runs(status="awaiting_input")
            applied.append(await workflow.respond(asked.run_id, {request_id: "yes"}, store=store))
        return await reads_of_the_inbox(*args)

    setattr(store, read, inbox_after_the_answer_went_in)
    return applied


async def test_a_request_answered_and_applied_between_the_two_reads_is_not_listed(tmp_path):
    store, workflow, _, request_id = await _asking(tmp_path)
    applied = _answered_between_the_reads(store, workflow, request_id)
    try:
        listed = await pending_requests(store, workflows=Hosted([workflow]))
    finally:
        await store.close()
    assert [done.status for done in applied] == [RunStatus.COMPLETED]
    assert listed == []


async def test_the_open_requests_gauge_counts_no_request_answered_between_its_reads(tmp_path):
    store, workflow, _, request_id = await _asking(tmp_path)
    reader = GaugeReader(store, Hosted([workflow]))
    assert (await reader.read(0.0)).open_requests == {"review": 1}
    # The gauge reads the answers waiting for every asking run at once.
    applied = _answered_between_the_reads(store, workflow, request_id, read="answers_waiting")
    try:
        gauges = await reader.read(0.0)
    finally:
        await store.close()
    assert [done.status for done in applied] == [RunStatus.COMPLETED]
    assert gauges.open_requests == {}


@executor(id="nap")
async def nap(hours: int, ctx: WorkflowContext) -> None:
    await ctx.sleep(hours * 3600)


def _counting_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the runs whose checkpoint the listing reads, in order, from now on."""
    from treadle._operations import _requests  # noqa: PLC0415

    decoded: list[str] = []
    read = _requests._open_requests

    async def counted(store: Any, loaded: Any, run: str) -> Any:
        decoded.append(run)
        return await read(store, loaded, run)

    monkeypatch.setattr(_requests, "_open_requests", counted)
    return decoded


async def test_a_listing_with_a_limit_reads_runs_awaiting_input_before_those_on_timers(
    tmp_path, monkeypatch
):
    # Newest first across both statuses, a store whose newest runs slept on timers decoded
    # each of their checkpoints before the one request a limit of 1 asked for (8,001
    # decodes, 2.7 s, on a store of 8,000 of each; the page's inbox count asks every 4 s).
    store, workflow, run_id, request_id = await _asking(tmp_path)
    napping = WorkflowBuilder(start=nap, name="napping").build()
    for _ in range(30):  # newer than the run that asks
        assert (await napping.run(1, store=store)).status is RunStatus.WAITING
    decoded = _counting_decodes(monkeypatch)
    try:
        found = await pending_requests(store, limit=1, workflows=Hosted([workflow, napping]))
    finally:
        await store.close()
    assert [(r["run_id"], r["request_id"]) for r in found] == [(run_id, request_id)]
    assert decoded == [run_id]


async def test_a_listing_reads_no_run_that_only_sleeps(tmp_path, monkeypatch):
    # A run with a request rests as awaiting_input whatever else it waits for, so one that
    # rests as waiting asks nothing: the listing decoded every such run's checkpoint to find
    # nothing (4.9 s on a store of 16,000, for the page's inbox count every 4 s).
    store, workflow, run_id, request_id = await _asking(tmp_path)
    napping = WorkflowBuilder(start=nap, name="napping").build()
    for _ in range(5):
        assert (await napping.run(1, store=store)).status is RunStatus.WAITING
    decoded = _counting_decodes(monkeypatch)
    try:
        found = await pending_requests(store, workflows=Hosted([workflow, napping]))
    finally:
        await store.close()
    assert [(r["run_id"], r["request_id"]) for r in found] == [(run_id, request_id)]
    assert decoded == [run_id]


@executor(id="split")
async def split(title: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(title)


@executor(id="doze")
async def doze(title: str, ctx: WorkflowContext) -> None:
    await ctx.sleep(3600)


async def test_a_run_that_asks_and_sleeps_at_once_rests_as_awaiting_input_and_is_listed(tmp_path):
    # What the listing counts on: only a run that rests as awaiting_input may ask.
    store = SqliteStore(tmp_path / "runs.sqlite")
    workflow = (
        WorkflowBuilder(start=split, name="both")
        .add_edge(split, review)
        .add_edge(split, doze)
        .build()
    )
    try:
        asked = await workflow.run("Stool", store=store)
        found = await pending_requests(store, workflows=Hosted([workflow]))
    finally:
        await store.close()
    assert asked.status is RunStatus.AWAITING_INPUT
    assert [(r["run_id"], r["executor_id"]) for r in found] == [(asked.run_id, "review")]
