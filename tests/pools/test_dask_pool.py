"""Executors on a real Dask cluster: the superstep contract holds where the work moves.

One ``LocalCluster`` of two worker processes (one thread each) serves the
module. Every graph runs twice, in process and on the cluster, and the two
runs must commit the same thing; handlers report their process id, so each
test also shows its work really ran in the workers.
"""

from __future__ import annotations

import os
import signal

import pool_app
import pytest

from treadle.errors import WorkerLostError
from treadle.events import (
    CustomEvent,
    ExecutorCompleted,
    ExecutorFailed,
    ExecutorInvoked,
    ProgressEvent,
)
from treadle.stores import SqliteStore

pytestmark = pytest.mark.integration  # worker processes, one of them SIGKILLed


async def test_a_64_branch_fan_out_on_two_worker_processes_commits_what_in_process_threads_commit(
    cluster,
):
    job = pool_app.Job(rounds=60_000)
    in_process = await pool_app.fan_out(64).build().run(job)
    on_cluster = await pool_app.fan_out(64, pool=cluster).build().run(job)

    assert on_cluster.status.value == in_process.status.value == "completed"
    assert on_cluster.outputs == in_process.outputs
    assert on_cluster.state == in_process.state == {"branches": 64, "done": 64}
    [gathered] = on_cluster.outputs
    assert [branch for branch, _ in gathered] == list(range(64))
    # Where each ran: all 64 here, in threads; there, in the workers and never here.
    assert pool_app.pids_of(in_process.events) == {os.getpid()}
    remote = pool_app.pids_of(on_cluster.events)
    assert os.getpid() not in remote
    assert remote <= pool_app.worker_pids(cluster)
    assert len(remote) == 2  # both workers took part


async def test_a_worker_killed_mid_superstep_is_retried_and_each_superstep_commits_once(
    cluster, tmp_path
):
    store = SqliteStore(tmp_path / "runs.db")
    workflow = pool_app.fan_out(
        4, pool=cluster, handler=pool_app.crunch_once_killed, retry=pool_app.QUICK_RETRY
    ).build()
    killed: list[int] = []
    events = []
    async with workflow.stream(
        pool_app.Job(rounds=1000, scratch=str(tmp_path)), store=store, run_id="victim"
    ) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ProgressEvent) and event.message.startswith("victim pid="):
                pid = int(event.message.rsplit("=", 1)[1])
                assert pid in pool_app.worker_pids(cluster)
                os.kill(pid, signal.SIGKILL)  # mid-superstep: its handler is still running
                killed.append(pid)
        result = stream.result

    assert killed
    lost = [e for e in events if isinstance(e, ExecutorFailed) and e.executor_id == "branch0"]
    assert lost
    assert all(isinstance(e.error, WorkerLostError) and e.retrying for e in lost)
    attempts = [e.attempt for e in events if isinstance(e, ExecutorInvoked)]
    assert max(attempts) >= 2  # retried
    # The run completes, and what the killed attempt did was never committed:
    # one "done" per branch, one digest per branch, one checkpoint per superstep.
    assert result.status.value == "completed"
    assert result.state == {"branches": 4, "done": 4}
    [gathered] = result.outputs
    assert [branch for branch, _ in gathered] == [0, 1, 2, 3]
    history = await workflow.history("victim", store=store)
    steps = [c.superstep for c in history.checkpoints]
    assert steps == sorted(set(steps))
    assert steps[-1] == 3


async def test_progress_of_a_remote_handler_reaches_the_stream_while_it_runs(cluster, tmp_path):
    workflow = pool_app.listener_workflow(cluster)
    heard_while_running = []
    events = []
    async with workflow.stream(str(tmp_path)) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ProgressEvent) and event.message == "halfway":
                # The handler waits for this file: only an event heard while it runs opens it.
                heard_while_running.append(event)
                (tmp_path / "heard").touch()
    progress = [(e.current, e.total, e.message) for e in events if isinstance(e, ProgressEvent)]
    assert progress == [(1, 2, "halfway"), (2, 2, "finished")]  # each once, in order
    [custom] = [e for e in events if isinstance(e, CustomEvent)]
    assert custom.data == pool_app.Heard(source="listener", note="custom events travel too")
    kinds = [type(e) for e in events if e.executor_id == "listener"]
    assert kinds == [ExecutorInvoked, ProgressEvent, CustomEvent, ProgressEvent, ExecutorCompleted]
    assert heard_while_running


async def test_progress_of_a_remote_handler_is_in_the_batch_in_canonical_order(cluster, tmp_path):
    (tmp_path / "heard").touch()  # nobody streams: the handler need not wait
    result = await pool_app.listener_workflow(cluster).run(str(tmp_path))
    mine = [type(e) for e in result.events if e.executor_id == "listener"]
    assert mine == [ExecutorInvoked, ProgressEvent, CustomEvent, ProgressEvent, ExecutorCompleted]


async def test_the_same_run_commits_the_same_state_and_delivery_order_locally_and_on_the_cluster(
    cluster,
):
    local = await pool_app.dealt().build().run("x")
    remote = await pool_app.dealt(pool=cluster).build().run("x")

    assert remote.outputs == local.outputs
    assert remote.state == local.state
    # Delivery order: what record received, in the order it received it.
    sources = ("a", "b", "c", "many", "many", "many")  # rank order, then inbox position
    received = [o for o in remote.outputs if o.startswith("record<-")]
    assert received == [f"record<-{source}.{seq}" for source in sources for seq in (0, 1)]
    assert remote.state["seen.many"] == ("x-many0", "x-many1", "x-many2")

    def canonical(result):
        return [
            (type(e).__name__, e.superstep, e.executor_id, getattr(e, "data", None))
            for e in result.events
            if not isinstance(e, ProgressEvent)
        ]

    assert canonical(remote) == canonical(local)
    assert os.getpid() not in pool_app.pids_of(remote.events)
    assert pool_app.pids_of(local.events) == {os.getpid()}
