"""Choosing a pool: per executor or per workflow, refused where it cannot work."""

from __future__ import annotations

import pickle

import dask
import pytest

from treadle import Executor, WorkflowBuilder, WorkflowContext, executor, handler
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


def test_a_dask_pool_starts_nothing_until_used_and_travels_as_its_settings():
    pool = DaskPool(n_workers=3)
    assert repr(pool) == "<DaskPool on a local cluster, not started>"
    copy = pickle.loads(pickle.dumps(pool))  # noqa: S301 - our own bytes
    assert repr(copy) == repr(pool)
    pool.close()  # nothing to close: harmless


@pytest.mark.integration
async def test_an_unreachable_scheduler_fails_the_invocation_as_a_pool_error():
    nowhere = executor(id="nowhere", pool=DaskPool("tcp://127.0.0.1:9"))(plain)
    workflow = WorkflowBuilder(start=nowhere).add_edge(nowhere, executor(awaited)).build()
    quick = dask.config.set({"distributed.comm.timeouts.connect": "1s"})
    with quick, pytest.raises(ExecutorFailedError) as caught:
        await workflow.run(1)
    assert isinstance(caught.value.__cause__, PoolError)
    assert "tcp://127.0.0.1:9" in str(caught.value.__cause__)
