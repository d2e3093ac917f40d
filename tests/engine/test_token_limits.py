"""Token budgets and a provider's 429: a limit counts what calls use, and slows down when asked.

A limit with ``tokens=`` reserves each call's ``estimate`` when it starts
and counts what the call reports using (``ctx.report_tokens``) once it is
known; no window of the budget ever holds calls that used more than it
allows. A handler that raises ``ProviderBusyError`` (a 429 with its
``Retry-After``) slows every limit its executor names down, in every
process on the run's store; a ``LimitSlowed`` event says so, and the call
is tried again once its turn comes, outside the retry policy.
"""

import asyncio
import time

import pytest

from treadle import CallLimit, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import CallLimitError, ProviderBusyError, WorkflowRunError
from treadle.events import LimitSlowed
from treadle.stores import MemoryStore, SqliteStore

BUDGET = 1_000
WINDOW = 0.4
LAG = 0.15  # the most a grant's lag to its call's start is allowed to vary (see below)


def budgeted_workflow(spent: list[tuple[float, int]], used: int, estimate: int = 300):
    """One call under a token budget; it records when it started and what it used."""

    @executor(id="ask", limits=["llm"])
    async def ask(n: int, ctx: WorkflowContext) -> None:
        spent.append((time.monotonic(), used))
        await asyncio.sleep(0.01)
        ctx.report_tokens(used)
        ctx.yield_output(n)

    limit = CallLimit("llm", tokens=f"{BUDGET}/{WINDOW}s", estimate=estimate)
    return WorkflowBuilder(ask, limits=[limit], name="budgeted").build()


def most_in_a_window(spent: list[tuple[float, int]], window: float) -> int:
    """The most tokens used by the calls started inside any window of ``window`` seconds.

    A call starts a step of the loop (on SQLite, a thread's hand-off) after
    its grant, and those lags differ from call to call: a window is read
    ``LAG`` shorter than the budget's. On a loaded machine (four pytest
    workers on two cores) a window's first calls started 6 ms later than the
    next window's after their grants, and six starts fell within 0.4 s; with
    two more processes busy beside them (a load of 10), more than 50 ms.
    A window of three calls still never shares 0.25 s with the next one's,
    and a fourth call let into a window starts with the other three.
    """
    starts = sorted(spent)
    most = 0
    for i, (at, _) in enumerate(starts):
        inside = sum(u for t, u in starts[i:] if t < at + window - LAG)
        most = max(most, inside)
    return most


@pytest.mark.parametrize("store_kind", ["none", "memory", "sqlite"])
async def test_calls_never_use_more_tokens_in_a_window_than_the_budget(store_kind, tmp_path):
    spent: list[tuple[float, int]] = []
    workflow = budgeted_workflow(spent, used=250, estimate=300)
    store = {
        "none": lambda: None,
        "memory": MemoryStore,
        "sqlite": lambda: SqliteStore(tmp_path / "runs.db"),
    }[store_kind]()
    started = time.monotonic()
    try:
        results = await asyncio.gather(*(workflow.run(n, store=store) for n in range(12)))
    finally:
        if store is not None:
            await store.close()
    assert [r.outputs for r in results] == [[n] for n in range(12)]
    assert most_in_a_window(spent, WINDOW) <= BUDGET
    # Reserving 300 and settling at 250, four calls fit a window (1,000), not more:
    # twelve calls take at least two windows after the first.
    assert time.monotonic() - started >= 2 * WINDOW


async def test_what_a_call_reports_it_used_counts_instead_of_its_estimate():
    # Each call reserves 600 (so two never fit 1,000 at once) but reports 100: once a
    # call has reported, the next fits beside it in the same window. Five fit one
    # window (4 x 100 used + 600 reserved); counted at their estimates, one would.
    spent: list[tuple[float, int]] = []
    workflow = budgeted_workflow(spent, used=100, estimate=600)
    await asyncio.gather(*(workflow.run(n) for n in range(6)))
    starts = sorted(at for at, _ in spent)
    assert starts[4] - starts[0] < WINDOW
    assert starts[5] - starts[0] >= WINDOW - 0.005  # the sixth: 5 x 100 + 600 > 1,000
    assert most_in_a_window(spent, WINDOW) <= BUDGET


def test_a_budget_without_an_estimate_or_one_never_admitted_is_refused_by_name():
    with pytest.raises(ValueError, match=r"limit 'llm': tokens= needs estimate="):
        CallLimit("llm", tokens="10k/min")
    with pytest.raises(ValueError, match=r"limit 'llm': no call could ever start.*5000 tokens"):
        CallLimit("llm", tokens="1k/min", estimate=5000)
    with pytest.raises(ValueError, match=r"limit 'llm': token rate 'lots' is not tokens per"):
        CallLimit("llm", tokens="lots", estimate=1)


async def test_a_call_whose_estimate_exceeds_the_budget_fails_at_once_naming_the_limit():
    @executor(id="ask", limits=["llm"])
    async def ask(prompt: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(prompt)

    limit = CallLimit("llm", tokens="1k/min", estimate=lambda call: 4 * len(call.message))
    workflow = WorkflowBuilder(ask, limits=[limit]).build()
    assert (await workflow.run("short")).outputs == ["short"]
    with pytest.raises(WorkflowRunError) as raised:
        await asyncio.wait_for(workflow.run("x" * 1_000), timeout=10)
    cause = raised.value.__cause__
    assert isinstance(cause, CallLimitError)
    assert cause.limit == "llm"
    assert "estimate of 4000 tokens is above the 1000 tokens it allows per 60 s" in str(cause)


@pytest.mark.parametrize("store_kind", ["none", "sqlite"])
async def test_a_providers_429_slows_the_limit_down_and_the_call_goes_again(store_kind, tmp_path):
    calls: list[tuple[int, float]] = []
    turned_away: set[int] = set()

    @executor(id="ask", limits=["llm"])
    async def ask(n: int, ctx: WorkflowContext) -> None:
        calls.append((n, time.monotonic()))
        if n == 0 and n not in turned_away:
            turned_away.add(n)
            raise ProviderBusyError(retry_after=0.5)
        ctx.yield_output(n)

    limit = CallLimit("llm", concurrency=4)
    workflow = WorkflowBuilder(ask, limits=[limit], name="busy").build()  # no retry policy
    store = SqliteStore(tmp_path / "runs.db") if store_kind == "sqlite" else None
    try:
        first = await workflow.run(0, store=store)
        slowed_at = next(at for n, at in calls if n == 0)
        others = await asyncio.gather(*(workflow.run(n, store=store) for n in range(1, 4)))
    finally:
        if store is not None:
            await store.close()
    assert first.outputs == [0]
    assert [r.outputs for r in others] == [[1], [2], [3]]
    slowed = [e for e in first.events if isinstance(e, LimitSlowed)]
    assert [(e.limit, e.seconds, e.executor_id) for e in slowed] == [("llm", 0.5, "ask")]
    # Nothing under the limit started while it was slowed down: the 429'd call went
    # again, and the other runs' calls started, only after Retry-After.
    assert all(at >= slowed_at + 0.5 - 0.01 for n, at in calls[1:])
    if store is not None:
        reopened = SqliteStore(tmp_path / "runs.db")
        try:
            kinds = [e.kind for e in await reopened.read_events(first.run_id)]
        finally:
            await reopened.close()
        assert "limit_slowed" in kinds


async def test_a_provider_that_keeps_turning_a_call_away_fails_it_in_the_end():
    tries = 0

    @executor(id="ask", limits=["llm"])
    async def ask(n: int, ctx: WorkflowContext) -> None:
        nonlocal tries
        tries += 1
        raise ProviderBusyError(retry_after=0.0)

    workflow = WorkflowBuilder(ask, limits=[CallLimit("llm", concurrency=1)]).build()
    with pytest.raises(WorkflowRunError) as raised:
        await asyncio.wait_for(workflow.run(1), timeout=10)
    assert isinstance(raised.value.__cause__, ProviderBusyError)
    assert tries == 10  # BUSY_TRIES in a row, then it is a failure as any other


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), -1.0])
def test_a_retry_after_that_is_no_time_to_wait_is_refused_by_name(seconds):
    # A limit slowed for ever (or for a negative time) would stop every caller of it.
    with pytest.raises(ValueError, match="retry_after must be a finite number of seconds"):
        ProviderBusyError(retry_after=seconds)
