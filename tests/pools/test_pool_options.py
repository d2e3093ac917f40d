"""Choosing a pool (per executor or per workflow, refused where it cannot work); reaching it."""

from __future__ import annotations

import pickle
import socket
import time

import pool_app
import pytest

from treadle import Executor, ExecutorFailure, WorkflowBuilder, WorkflowContext, executor, handler
from treadle.dask import DaskPool
from treadle.errors import ExecutorFailedError, PoolError


def plain(n: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(n)


async def awaited(n: int, ctx: WorkflowContext) -> None:
    ctx.yield_output(n)


class Counter(Executor):
    @handler
    def count(self, n: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(n)


def test_a_pool_takes_plain_def_function_handlers_only():
    pool = DaskPool()
    assert executor(pool=pool)(plain).pool is pool
    with pytest.raises(TypeError, match="plain def"):
        executor(pool=pool)(awaited)
    with pytest.raises(TypeError, match="sync_handlers='loop'"):
        executor(pool=pool, sync_handlers="loop")(plain)
    with pytest.raises(TypeError, match="not an executor pool"):
        executor(pool=object())(plain)
    with pytest.raises(TypeError, match="executor pool"):
        WorkflowBuilder(start=executor(plain), pool="tcp://somewhere:8786")


def test_a_workflow_pool_takes_its_plain_def_function_executors_and_leaves_the_rest():
    pool, own = DaskPool(), DaskPool()
    first = executor(id="first")(plain)
    pinned = executor(id="pinned", sync_handlers="loop")(plain)
    chosen = executor(id="chosen", pool=own)(plain)
    last = executor(id="last")(awaited)
    workflow = (
        WorkflowBuilder(start=first, pool=pool)
        .add_fan_out(first, [pinned, chosen, Counter])
        .add_edge(pinned, last)
        .add_edge(chosen, last)
        .build()
    )
    assert workflow.prototype("first").pool is pool
    assert workflow.prototype("pinned").pool is None
    assert workflow.prototype("chosen").pool is own
    assert workflow.prototype("last").pool is None
    assert not hasattr(workflow.prototype("Counter"), "pool")
    # The executor given to the builder is unchanged: another workflow runs it here.
    assert first.pool is None
    assert WorkflowBuilder(start=first).build().prototype("first").pool is None


def test_dask_pool_arguments_are_checked_where_they_enter():
    with pytest.raises(TypeError, match="scheduler address"):
        DaskPool(8786)
    with pytest.raises(ValueError, match="n_workers"):
        DaskPool("tcp://scheduler:8786", n_workers=2)
    with pytest.raises(ValueError, match="at least 1"):
        DaskPool(threads_per_worker=0)
    with pytest.raises(TypeError, match="whole number"):
        DaskPool(n_workers=1.5)


def test_a_dask_pool_connect_timeout_is_a_positive_finite_number_of_seconds():
    travelled = pickle.loads(pickle.dumps(DaskPool(connect_timeout=2.5)))  # noqa: S301 - ours
    assert travelled.__getstate__()["connect_timeout"] == 2.5  # it travels with the settings
    for wrong in ("10", None, True):
        with pytest.raises(TypeError, match=r"connect_timeout must be a number of seconds, got"):
            DaskPool("tcp://scheduler:8786", connect_timeout=wrong)
    for wrong in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"connect_timeout must be a finite number of secon"):
            DaskPool("tcp://scheduler:8786", connect_timeout=wrong)


def free_port() -> int:
    """A local port nothing listens on (it was free a moment ago, and is closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.integration
def test_an_unreachable_scheduler_is_a_pool_error_naming_it_within_the_connect_timeout():
    address = f"tcp://127.0.0.1:{free_port()}"
    with DaskPool(address, connect_timeout=1) as pool:
        began = time.monotonic()
        with pytest.raises(PoolError, match="could not reach the Dask scheduler at") as caught:
            pool.connect()
        took = time.monotonic() - began
    assert address in str(caught.value)
    assert caught.value.executor_id is None  # asked by no invocation
    assert isinstance(caught.value.__cause__, OSError)  # refused, then timed out: Dask's words
    assert took < 10, f"{took:.1f} s: Dask's own 30 s connect timeout, not the pool's 1 s"
    assert repr(pool) == f"<DaskPool on {address}, not started>"


def test_an_address_dask_cannot_read_is_a_pool_error_naming_it():
    with pytest.raises(PoolError, match=r"'nowhere' is not a scheduler address Dask can use: "):
        DaskPool("nowhere").connect()  # no port: Dask's ValueError, at once


def test_a_dask_pool_starts_nothing_until_used_and_travels_as_its_settings():
    pool = DaskPool(n_workers=3)
    assert repr(pool) == "<DaskPool on a local cluster, not started>"
    copy = pickle.loads(pickle.dumps(pool))  # noqa: S301 - our own bytes
    assert repr(copy) == repr(pool)
    pool.close()  # nothing to close: harmless


@pytest.mark.integration
async def test_an_unreachable_scheduler_fails_the_invocation_as_a_pool_error():
    address = f"tcp://127.0.0.1:{free_port()}"
    nowhere = executor(id="nowhere", pool=DaskPool(address, connect_timeout=1))(plain)
    workflow = WorkflowBuilder(start=nowhere).add_edge(nowhere, executor(awaited)).build()
    began = time.monotonic()
    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run(1)
    took = time.monotonic() - began
    failure = caught.value.__cause__
    assert isinstance(failure, PoolError)
    assert failure.executor_id == "nowhere"
    assert str(failure).startswith("the pool of executor 'nowhere' could not run it: could not")
    assert f"could not reach the Dask scheduler at {address!r} within 1 s" in str(failure)
    assert isinstance(failure.__cause__, OSError)  # Dask's own error, one link down
    assert took < 10, f"{took:.1f} s: Dask's own 30 s connect timeout, not the pool's 1 s"


@executor
async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
    ctx.yield_output(failure)


@pytest.mark.integration
async def test_invocations_waiting_on_a_failed_connect_fail_with_it_not_a_timeout_each_in_turn():
    address = f"tcp://127.0.0.1:{free_port()}"
    builder = pool_app.fan_out(6, pool=DaskPool(address, connect_timeout=1))
    for branch in range(6):  # each failure has somewhere to go: the run waits for all six
        builder.add_error_edge(f"branch{branch}", report)
    began = time.monotonic()
    result = await builder.build().run(pool_app.Job(rounds=1))
    took = time.monotonic() - began
    assert sorted(failure.executor_id for failure in result.outputs) == [
        f"branch{branch}" for branch in range(6)
    ]
    for failure in result.outputs:
        assert failure.error_type == "treadle.errors.PoolError"
        assert f"could not reach the Dask scheduler at {address!r}" in failure.message
    # The first connect fails after 1 s, and the five that waited on it with it; before,
    # each tried again in turn when the one before it failed: 6 s.
    assert took < 4, f"{took:.1f} s: the six invocations tried to connect one after the other"
