"""Failures on a real Dask cluster are invocation failures: retried, timed, never half-committed.

Handlers run in the workers and learn what attempt they are on only from
files in the test's scratch directory.
"""

from __future__ import annotations

import operator
import threading

import pool_app
import pytest

from treadle import RetryPolicy, WorkflowBuilder, executor
from treadle.errors import (
    ExecutorFailedError,
    HandlerTimeoutError,
    PoolError,
    RemoteHandlerError,
    SerializationError,
)
from treadle.events import ExecutorFailed, ExecutorInvoked
from treadle.serialization import PickleSerializer
from treadle.stores import SqliteStore

pytestmark = pytest.mark.integration  # Dask worker processes


async def test_a_remote_exception_fails_the_superstep_which_commits_none_of_its_remote_work(
    cluster,
):
    workflow = pool_app.fan_out(4, pool=cluster, handler=pool_app.explode).build()
    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run(pool_app.Job(rounds=1000))

    error = caught.value
    assert error.executor_id == "branch1"
    remote = error.__cause__
    assert isinstance(remote, RemoteHandlerError)
    assert remote.remote_type == "builtins.ValueError"
    assert remote.remote_message == "bad slice 1"
    assert "in explode" in remote.remote_traceback
    assert "builtins.Exception" in remote.remote_types
    # Three branches finished on the workers; none of it committed.
    assert error.result.superstep == 1
    assert error.result.state == {"branches": 4, "done": 0}
    assert error.result.outputs == []


async def test_retry_on_matches_a_remote_exception_by_its_class_and_bases(cluster, tmp_path):
    job = pool_app.Job(rounds=1000, scratch=str(tmp_path))
    retried = pool_app.fan_out(
        2,
        pool=cluster,
        handler=pool_app.flaky_once,
        retry=RetryPolicy(max_attempts=2, retry_on=(ConnectionError,)),
    ).build()
    result = await retried.run(job)
    assert result.state == {"branches": 2, "done": 2}
    assert {e.attempt for e in result.events if isinstance(e, ExecutorInvoked)} == {1, 2}

    for marker in tmp_path.iterdir():
        marker.unlink()
    not_retried = pool_app.fan_out(
        2,
        pool=cluster,
        handler=pool_app.flaky_once,
        retry=RetryPolicy(max_attempts=2, retry_on=(KeyError,)),
    ).build()
    with pytest.raises(ExecutorFailedError) as caught:
        await not_retried.run(job)
    assert caught.value.attempt == 1
    assert caught.value.__cause__.remote_type == "pool_app.Flaky"


async def test_a_remote_attempt_past_its_timeout_fails_and_its_late_work_never_commits(
    cluster, tmp_path
):
    once = executor(id="branch0", pool=cluster, timeout=1.0, retry=pool_app.QUICK_RETRY)(
        pool_app.slow_once
    )
    workflow = (
        WorkflowBuilder(start=pool_app.split)
        .add_edge(pool_app.split, once)
        .add_edge(once, pool_app.keep)
        .add_state("branches", default=1)
        .add_state("done", default=0, reducer=operator.add)
        .build()
    )
    result = await workflow.run(pool_app.Job(rounds=10, scratch=str(tmp_path)))

    [timed_out] = [e for e in result.events if isinstance(e, ExecutorFailed)]
    assert isinstance(timed_out.error, HandlerTimeoutError)
    assert result.state["done"] == 1  # the first attempt finished on its worker: dropped
    assert len(result.outputs) == 1

    hung = executor(id="branch0", pool=cluster, timeout=1.0)(pool_app.slow_once)
    for marker in tmp_path.iterdir():
        marker.unlink()
    workflow = (
        WorkflowBuilder(start=pool_app.split)
        .add_edge(pool_app.split, hung)
        .add_state("branches", default=1)
        .build()
    )
    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run(pool_app.Job(rounds=10, scratch=str(tmp_path)))
    assert isinstance(caught.value.__cause__, HandlerTimeoutError)


async def test_a_resumed_run_sends_only_its_uncommitted_work_to_the_pool(cluster, tmp_path):
    store = SqliteStore(tmp_path / "runs.db")
    step = pool_app.Step(str(tmp_path))
    with pytest.raises(ExecutorFailedError):
        await pool_app.chain(cluster).build().run(step, store=store, run_id="outage")

    (tmp_path / "fixed").touch()
    # Resumed by another Workflow object, as another process would build it.
    result = await pool_app.chain(cluster).build().resume("outage", store=store)

    assert result.status.value == "completed"
    assert result.state == {"first": 1, "second": 2}
    assert result.outputs == [1]
    invoked = [e.executor_id for e in result.events if isinstance(e, ExecutorInvoked)]
    assert invoked == ["second"]
    assert len((tmp_path / "first.log").read_text().splitlines()) == 1  # committed: not resent
    assert len((tmp_path / "second.log").read_text().splitlines()) == 2


async def test_values_cross_only_through_the_workflow_serializer_unless_pickle_is_chosen(
    cluster,
):
    with pytest.raises(ExecutorFailedError) as caught:
        await pool_app.opaque(cluster).build().run("hush")
    refused = caught.value.__cause__
    assert isinstance(refused, SerializationError)
    assert "pool_app.Opaque" in str(refused)

    opted_in = pool_app.opaque(cluster, serializer=PickleSerializer()).build()
    result = await opted_in.run("hush")
    assert result.outputs == [pool_app.Opaque("hush")]


async def test_a_remote_handler_reads_the_last_barrier_and_its_own_writes(cluster):
    reader = executor(id="reader", pool=cluster)(pool_app.state_reader)
    workflow = (
        WorkflowBuilder(start=reader)
        .add_state("declared", default="dflt")
        .add_state("absent")
        .build()
    )
    result = await workflow.run("read", state={"given": 41})
    assert result.outputs == [(41, "dflt", False), (42, "gone")]
    assert result.state == {"given": 42}

    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run("update", state={"given": 41})
    refused = caught.value.__cause__
    assert refused.remote_type == "builtins.TypeError"
    assert "reducer" in refused.remote_message


async def test_what_needs_the_run_itself_is_refused_on_a_pool_naming_it(cluster):
    asker = executor(id="asker", pool=cluster)(pool_app.ask_for_spawn)
    workflow = WorkflowBuilder(start=asker).add_edge(asker, pool_app.keep).build()
    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run("x")
    assert "ctx.spawn is not available" in caught.value.__cause__.remote_message


async def test_a_handler_that_cannot_be_sent_fails_its_invocation_as_a_pool_error(cluster):
    lock = threading.Lock()  # a closure over it cannot be pickled

    def locked(text: str, ctx) -> None:
        with lock:
            ctx.send_message(text)

    sender = executor(id="locked", pool=cluster)(locked)
    workflow = WorkflowBuilder(start=sender).add_edge(sender, pool_app.keep).build()
    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run("x")
    refused = caught.value.__cause__
    assert isinstance(refused, PoolError)
    assert "lock" in str(refused)
