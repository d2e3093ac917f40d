"""A store object sends a workflow's graph description once, and again only if it did not land.

Descriptions are never deleted (``_stores/_sql_graphs.py``), so once a write
that stored or found one has committed, the store object's later writes
name it by digest without sending it. A write that rolled back stored
nothing: the next write sends the description again, and every run's
description reads back whole.
"""

from __future__ import annotations

import pytest

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RunExistsError
from treadle.stores import PostgresStore, SqliteStore
from treadle.testing import FakeClock


def _sleeper(name: str):
    @executor(id="nap")
    async def nap(n: int, ctx: WorkflowContext[int]) -> None:
        await ctx.sleep(3_600)
        ctx.yield_output(n)

    return WorkflowBuilder(start=nap, name=name).build()


async def _park(workflow, store, run_id: str | None = None) -> str:
    parked = await workflow.run(1, store=store, clock=FakeClock(), run_id=run_id)
    assert parked.status is RunStatus.WAITING
    return parked.run_id


async def _count_graph_inserts(store: SqliteStore) -> list[str]:
    """The graph INSERTs ``store`` sends from now on (after a first write opens its file)."""
    await _park(_sleeper("opener"), store)
    sent: list[str] = []

    def traced(statement: str) -> None:
        if statement.lstrip().startswith("INSERT INTO treadle_graphs"):
            sent.append(statement)

    store._connection.set_trace_callback(traced)
    return sent


async def test_a_sqlite_store_sends_a_workflows_graph_once_for_all_its_runs(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    sent = await _count_graph_inserts(store)
    workflow = _sleeper("idle")
    try:
        run_ids = [await _park(workflow, store) for _ in range(4)]
        graphs = {await store.get_graph(run_id) for run_id in run_ids}
    finally:
        await store.close()
    assert len(sent) == 1
    [graph] = graphs
    assert b'"name":"idle"' in graph


async def _graph_sent_again_after_a_rollback(store, other, sent: list[str] | None = None) -> None:
    """``store``'s first write naming a graph rolls back; its next write must store it."""
    taken = await _park(_sleeper("other"), other)  # another store object takes the id
    workflow = _sleeper("idle")
    with pytest.raises(RunExistsError):
        await _park(workflow, store, run_id=taken)
    refused = None if sent is None else len(sent)
    run_id = await _park(workflow, store)
    if sent is not None:
        assert refused, "the refused write sent the description"
        assert len(sent) == refused + 1  # and the next write sent it again
    graph = await store.get_graph(run_id)
    assert b'"name":"idle"' in graph
    assert graph != await store.get_graph(taken)


async def test_a_sqlite_store_sends_a_graph_again_when_its_first_write_rolled_back(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    other = SqliteStore(tmp_path / "runs.sqlite")
    sent = await _count_graph_inserts(store)
    try:
        await _graph_sent_again_after_a_rollback(store, other, sent)
    finally:
        await store.close()
        await other.close()


@pytest.mark.integration
async def test_a_postgres_store_sends_a_graph_again_when_its_first_write_rolled_back(dsn, schema):
    store = PostgresStore(dsn, schema=schema)
    other = PostgresStore(dsn, schema=schema)
    try:
        await _graph_sent_again_after_a_rollback(store, other)
        # Once landed, it is named: more runs read the same description back.
        run_ids = [await _park(_sleeper("idle"), store) for _ in range(3)]
        assert len({await store.get_graph(run_id) for run_id in run_ids}) == 1
    finally:
        await store.close()
        await other.close()
