"""A handler that raised on a Dask worker takes its executor's error route like a local one.

The failure comes back as text (the class it raised there, its message, the
worker's traceback), never unpickled, and the branches that finished on
other workers commit with the superstep.
"""

from __future__ import annotations

import pool_app
import pytest

from treadle import ExecutorFailure, RunStatus, WorkflowContext, executor

pytestmark = pytest.mark.integration  # Dask worker processes


@executor
async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
    ctx.yield_output(failure)


async def test_a_remote_exception_takes_the_error_route_and_the_other_branches_commit(cluster):
    workflow = (
        pool_app.fan_out(4, pool=cluster, handler=pool_app.explode)
        .add_error_edge("branch1", report)
        .build()
    )
    result = await workflow.run(pool_app.Job(rounds=1000))
    (failure,) = result.outputs
    assert failure.executor_id == "branch1"
    assert failure.error_type == "builtins.ValueError"  # the class it raised on the worker
    assert failure.message == "bad slice 1"
    assert "in explode" in failure.traceback
    assert failure.input == pool_app.Slice(1, 1000)
    # The other three branches committed; the fan-in waits for branch1 for ever.
    assert result.state == {"branches": 4, "done": 3}
    assert result.status is RunStatus.STALLED
    assert [s.waiting_for for s in result.stalled] == [("branch1",)]
