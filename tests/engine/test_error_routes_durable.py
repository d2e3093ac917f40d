"""Error routes on a store: the routed superstep is checkpointed like any other.

Its checkpoint holds the ``ExecutorFailure`` as a pending message (encoded
by the workflow's serializer, with the message the failed invocation was
handling), so a new ``Workflow`` object, or a new process after a SIGKILL,
goes on from it and completes as an uninterrupted run does. A stored run
whose error routes changed is a changed graph.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gates import wait_for_file
from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle import ExecutorFailure, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import GraphChangedError
from treadle.stores import PostgresStore, SqliteStore

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import error_route_app  # noqa: E402 - the script doubles as the reference workflow


@dataclass(frozen=True)
class Order:
    id: str
    amount: int


class OutOfStock(Exception):
    pass


@executor
async def take(order: Order, ctx: WorkflowContext[Order]) -> None:
    ctx.send_message(order)


@executor
async def reserve(order: Order, ctx: WorkflowContext) -> None:
    ctx.state.set("reserved", order.id)
    raise OutOfStock(f"no stock for {order.amount}")


@executor
async def invoice(order: Order, ctx: WorkflowContext) -> None:
    ctx.state.set("invoiced", order.amount)


@executor
async def apologise(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
    ctx.yield_output((failure.executor_id, failure.message, failure.input))


def orders(store):
    return (
        WorkflowBuilder(start=take, name="orders", store=store)
        .add_fan_out(take, [reserve, invoice])
        .add_error_edge(reserve, apologise)
        .build()
    )


async def routed_checkpoint(workflow, store, run_id: str, superstep: int):
    (info,) = [c for c in (await workflow.history(run_id)).checkpoints if c.superstep == superstep]
    record = await store.load_checkpoint(run_id, info.checkpoint_id)
    return info.checkpoint_id, workflow.codec.decode(record, run_id=run_id)


async def check_a_new_workflow_goes_on_from_the_routed_checkpoint(open_store) -> None:
    store = open_store()
    try:
        first = await orders(store).run(Order("o-7", 3), run_id="r1")
        assert first.status is RunStatus.COMPLETED
        assert first.outputs == [("reserve", "no stock for 3", Order("o-7", 3))]
        assert first.state == {"invoiced": 3}
    finally:
        await store.close()
    store = open_store()  # a new connection and a new Workflow object
    try:
        workflow = orders(store)
        checkpoint_id, restored = await routed_checkpoint(workflow, store, "r1", 2)
        ((envelope,),) = restored.pending.values()
        assert list(restored.pending) == ["apologise"]
        failure = envelope.payload
        assert isinstance(failure, ExecutorFailure)
        assert (failure.executor_id, failure.message, failure.attempts) == (
            "reserve",
            "no stock for 3",
            1,
        )
        assert failure.input == Order("o-7", 3)  # the dataclass, decoded
        assert failure.error_type == f"{OutOfStock.__module__}.OutOfStock"
        assert 'raise OutOfStock(f"no stock for {order.amount}")' in failure.traceback
        assert restored.state == {"invoiced": 3}  # the sibling's write, committed with it
        again = await workflow.resume("r1", checkpoint_id=checkpoint_id)
        assert (again.status, again.outputs, again.state) == (
            first.status,
            first.outputs,
            first.state,
        )
    finally:
        await store.close()


async def test_on_sqlite_the_routed_checkpoint_holds_the_failure_and_a_new_workflow_resumes_it(
    tmp_path: Path,
):
    path = tmp_path / "runs.sqlite"
    await check_a_new_workflow_goes_on_from_the_routed_checkpoint(lambda: SqliteStore(path))


@pytest.mark.integration
async def test_on_postgres_the_routed_checkpoint_holds_the_failure_and_a_new_workflow_resumes_it():
    dsn, schema = postgres_dsn(), fresh_schema()
    try:
        await check_a_new_workflow_goes_on_from_the_routed_checkpoint(
            lambda: PostgresStore(dsn, schema=schema)
        )
    finally:
        await drop_schemas([schema])


async def test_a_stored_run_whose_error_route_moved_is_a_changed_graph(tmp_path: Path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        await error_route_app.build(store).run("o-1", run_id="r1")
        moved = error_route_app.build(store, routed_from="pack")
        with pytest.raises(GraphChangedError) as caught:
            await moved.resume("r1")
    finally:
        await store.close()
    message = str(caught.value)
    assert "error route 'charge' -> 'refund' was removed" in message
    assert "error route 'pack' -> 'refund' was added" in message


def spawn(*args: str | Path) -> subprocess.Popen[str]:
    script = HERE / "error_route_app.py"
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.integration
async def test_killed_after_the_routed_superstep_a_new_process_resumes_with_the_failure_pending(
    tmp_path: Path,
):
    expected = error_route_app.outcome(await error_route_app.build().run("o-1"))
    store_path, marker = tmp_path / "runs.sqlite", tmp_path / "refund-started"
    with spawn("run", store_path, "r1", marker) as child:
        wait_for_file(marker, child, seconds=60, what="the refund started")
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
    assert child.returncode == -signal.SIGKILL
    assert marker.read_text() == "3"  # the refund runs in the superstep after the failure

    store = SqliteStore(store_path)
    try:
        assert (await store.get_run("r1")).superstep == 2  # the routed superstep, committed
        workflow = error_route_app.build(store)
        restored = workflow.codec.decode(await store.load_checkpoint("r1"), run_id="r1")
    finally:
        await store.close()
    assert restored.superstep == 2
    assert restored.state == {"packed": "o-1"}
    assert [e.payload for e in restored.pending["ship"]] == ["o-1"]
    (pending,) = restored.pending["refund"]
    failure = pending.payload
    assert (failure.executor_id, failure.input, failure.attempts) == ("charge", "o-1", 2)
    assert failure.error_type.endswith(".CardDeclined")
    assert failure.message == "card declined for o-1"

    with spawn("resume", store_path, "r1") as resumed:
        out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    assert out.strip().splitlines()[-1] == expected
