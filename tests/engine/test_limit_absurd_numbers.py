"""A limit's numbers that no store can keep are refused by name, not by the store's driver.

A store keeps a limit's concurrency, its rate's calls and each call's
priority as 64-bit integers. A `CallLimit(concurrency=2**63)` was accepted,
and every stored run under it then failed at its first call with
``OverflowError: Python int too large to convert to SQLite INTEGER``,
naming no limit; so did a priority computed past that range.
"""

from __future__ import annotations

import pytest

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import CallLimitError, ExecutorFailedError
from treadle.stores import SqliteStore

HUGE = 2**63


@pytest.mark.parametrize(
    ("terms", "named"),
    [
        ({"concurrency": HUGE}, "concurrency"),
        ({"rate": f"{HUGE}/s"}, "rate"),
        ({"tokens": f"{HUGE}/min", "estimate": 1}, "token rate"),
    ],
)
def test_a_limits_number_no_store_keeps_is_refused_naming_it(terms, named):
    with pytest.raises(ValueError, match=rf"limit 'api': .*{named}.*at most") as raised:
        CallLimit("api", **terms)
    assert "api" in str(raised.value)


async def test_a_priority_no_store_keeps_fails_the_call_naming_the_limit(tmp_path):
    @executor(id="call", limits=["api"])
    async def call(n: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(n)

    limit = CallLimit("api", concurrency=1, priority=lambda call: HUGE)
    workflow = WorkflowBuilder(call, limits=[limit]).build()
    store = SqliteStore(tmp_path / "runs.db")
    try:
        with pytest.raises(ExecutorFailedError) as raised:
            await workflow.run(1, store=store, run_id="r1")
    finally:
        await store.close()
    cause = raised.value.__cause__
    assert isinstance(cause, CallLimitError)
    assert cause.limit == "api"
    assert "priority" in str(cause)
