"""Error routes: a failure that spent its retries becomes a message, and the superstep commits.

The shop below fans an order out to ``charge`` and ``pack``. ``charge``
always fails (three attempts); its error route takes the failure to
``refund``, while ``pack``'s work in the same superstep commits and its
message reaches ``ship``. Durable runs of error routes (a real SQLite file,
a killed process) are in ``tests/engine/test_error_routes_durable.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest

from treadle import (
    ExecutionMode,
    ExecutorFailure,
    ExponentialBackoff,
    RetryPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle._checkpoints._graph_description import describe_changes
from treadle.errors import (
    ExecutorFailedError,
    IterationLimitExceeded,
    RoutingError,
    WorkflowValidationError,
)
from treadle.events import ExecutorFailed, ExecutorInvoked, ExecutorSuspended
from treadle.testing import FakeClock

RETRY = RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(initial=1, jitter=0))


class CardDeclined(Exception):
    pass


RAISING_LINE = 'raise CardDeclined(f"card declined for {order}")'


def shop(attempts: list[int] | None = None, *, clock: FakeClock | None = None):
    """kick -> fan-out -> charge (always fails; routed to refund), pack -> ship."""
    tried = attempts if attempts is not None else []
    last_attempt_failed = asyncio.Event()

    @executor
    async def kick(order: str, ctx: WorkflowContext[str]) -> None:
        last_attempt_failed.clear()
        ctx.send_message(order)

    @executor(retry=RETRY)
    async def charge(order: str, ctx: WorkflowContext[str]) -> None:
        tried.append(ctx.superstep)
        ctx.state.set("charged", order)  # none of this commits: the invocation failed
        ctx.yield_output("charged")
        ctx.send_message(f"paid {order}")
        if len(tried) % RETRY.max_attempts == 0:
            last_attempt_failed.set()
        raise CardDeclined(f"card declined for {order}")

    @executor
    async def pack(order: str, ctx: WorkflowContext[str]) -> None:
        # Still running when charge fails for good (unless runs are one at a time,
        # charge first): a routed failure cancels no sibling.
        await last_attempt_failed.wait()
        ctx.state.set("packed", order)
        ctx.yield_output("packed")
        ctx.send_message(order)

    @executor
    async def ship(order: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"shipped {order}")

    @executor
    async def refund(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.state.set("refunded", failure.input)
        ctx.yield_output(failure)

    return (
        WorkflowBuilder(start=kick, name="shop", clock=clock or FakeClock())
        .add_fan_out(kick, [charge, pack])
        .add_edge(charge, ship)
        .add_edge(pack, ship)
        .add_error_edge(charge, refund)
        .build()
    )


def check_the_shop(result, attempts: list[int]) -> None:
    assert result.status is RunStatus.COMPLETED
    assert attempts == [2, 2, 2], "three attempts, in superstep 2"
    # pack's write, output and send committed; charge's did not.
    assert result.state == {"packed": "o-1", "refunded": "o-1"}
    assert result.outputs[:2] == ["packed", "shipped o-1"]
    failure = result.outputs[2]
    assert isinstance(failure, ExecutorFailure)
    assert failure.executor_id == "charge"
    assert failure.error_type == f"{CardDeclined.__module__}.CardDeclined"
    assert failure.message == "card declined for o-1"
    assert RAISING_LINE in failure.traceback
    assert failure.traceback.rstrip().endswith("CardDeclined: card declined for o-1")
    assert failure.input == "o-1"
    assert failure.attempts == 3
    assert len(result.outputs) == 3
    assert result.superstep == 3


async def test_an_executor_that_fails_all_its_retries_reaches_its_route_and_its_siblings_commit():
    attempts: list[int] = []
    clock = FakeClock()
    workflow = shop(attempts, clock=clock)
    result = await clock.run(workflow.run("o-1"))
    check_the_shop(result, attempts)
    failed = [e for e in result.events if isinstance(e, ExecutorFailed)]
    assert [(e.executor_id, e.attempt, e.retrying, e.routed_to) for e in failed] == [
        ("charge", 1, True, None),
        ("charge", 2, True, None),
        ("charge", 3, False, "refund"),
    ]
    assert all(isinstance(e.error, CardDeclined) for e in failed)
    invoked = {e.executor_id: e.superstep for e in result.events if isinstance(e, ExecutorInvoked)}
    assert invoked["refund"] == 3  # a normal invocation, the superstep after the failure


@pytest.mark.parametrize("how", ["deterministic", "lockstep", "off_thread"])
async def test_every_execution_mode_routes_the_failure_the_same_way(how: str):
    attempts: list[int] = []
    clock = FakeClock()
    workflow = shop(attempts, clock=clock)
    if how == "deterministic":
        result = await clock.run(workflow.run("o-1", deterministic=True))
        events = result.events
    else:
        mode = ExecutionMode.LOCKSTEP if how == "lockstep" else ExecutionMode.OFF_THREAD

        async def streamed():
            async with workflow.stream("o-1", mode=mode) as stream:
                seen = [event async for event in stream]
            return stream.result, seen

        result, events = await clock.run(streamed())
    check_the_shop(result, attempts)
    routed = [e.routed_to for e in events if isinstance(e, ExecutorFailed) and not e.retrying]
    assert routed == ["refund"]
    assert events[-1].status is RunStatus.COMPLETED


async def test_without_a_route_the_run_fails_as_before_even_when_a_sibling_has_one():
    @executor
    async def kick(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.state.set("kicked", True)
        ctx.send_message(n)

    @executor
    async def routed(n: int, ctx: WorkflowContext) -> None:
        raise CardDeclined("routed")

    @executor
    async def unrouted(n: int, ctx: WorkflowContext) -> None:
        ctx.state.set("unrouted", True)
        raise CardDeclined("not routed")

    @executor
    async def handler(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output(failure.executor_id)

    workflow = (
        WorkflowBuilder(start=kick)
        .add_fan_out(kick, [routed, unrouted])
        .add_error_edge(routed, handler)
        .build()
    )
    with pytest.raises(ExecutorFailedError, match="not routed") as caught:
        await workflow.run(1)
    assert caught.value.executor_id == "unrouted"
    result = caught.value.result
    assert result.status is RunStatus.FAILED
    assert result.superstep == 1  # nothing of superstep 2 committed, the routed failure neither
    assert result.state == {"kicked": True}
    assert result.outputs == []


async def test_a_handler_of_failures_that_fails_without_a_route_of_its_own_fails_the_run():
    @executor
    async def first(n: int, ctx: WorkflowContext) -> None:
        raise CardDeclined("first")

    @executor
    async def clumsy(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        raise CardDeclined(f"could not handle {failure.message}")

    workflow = WorkflowBuilder(start=first).add_error_edge(first, clumsy).build()
    with pytest.raises(ExecutorFailedError, match="could not handle first") as caught:
        await workflow.run(1)
    assert caught.value.executor_id == "clumsy"
    assert caught.value.result.superstep == 1  # the routed superstep committed


async def test_a_timeout_is_a_failure_and_takes_the_route():
    clock = FakeClock()
    never = asyncio.Event()

    @executor(timeout=5)
    async def slow(n: int, ctx: WorkflowContext) -> None:
        await never.wait()

    @executor
    async def fallback(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output((failure.error_type, failure.message, failure.input))

    workflow = WorkflowBuilder(start=slow, clock=clock).add_error_edge(slow, fallback).build()
    result = await clock.run(workflow.run(7))
    assert result.outputs == [
        ("treadle.errors.HandlerTimeoutError", "executor 'slow' ran past its timeout of 5s", 7)
    ]


async def test_a_plain_def_handler_failing_in_its_worker_thread_takes_the_route():
    @executor
    def blocking(n: int, ctx: WorkflowContext) -> None:
        assert threading.current_thread() is not threading.main_thread()
        raise CardDeclined(f"thread {n}")

    @executor
    async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output(failure.message)

    workflow = WorkflowBuilder(start=blocking).add_error_edge(blocking, report).build()
    assert (await workflow.run(3)).outputs == ["thread 3"]


async def test_a_send_no_edge_can_carry_fails_the_sender_which_takes_its_route():
    @executor
    async def sender(n: int, ctx: WorkflowContext) -> None:
        ctx.send_message(b"bytes nobody takes")

    @executor
    async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output(failure.error_type)

    workflow = WorkflowBuilder(start=sender).add_error_edge(sender, report).build()
    assert (await workflow.run(1)).outputs == ["treadle.errors.RoutingError"]


async def test_the_error_route_carries_no_message_the_source_sends():
    @executor
    async def sender(n: int, ctx: WorkflowContext) -> None:
        ctx.send_message(ExecutorFailure("x", "t", "m", "tb", n), target="report")

    @executor
    async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output(failure.error_type)

    workflow = WorkflowBuilder(start=sender).add_error_edge(sender, report).build()
    # The explicit send is a RoutingError in sender: that failure is what the route carries.
    assert (await workflow.run(1)).outputs == ["treadle.errors.RoutingError"]
    with pytest.raises(RoutingError, match="no edge connects them"):
        workflow.router.route("sender", ExecutorFailure("x", "t", "m", "tb", 1), "report")


async def test_a_durable_wait_is_not_a_failure():
    clock = FakeClock()

    @executor
    async def napper(n: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(dt.timedelta(minutes=5))
        ctx.yield_output(f"woke {n}")

    @executor
    async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output("routed")

    workflow = WorkflowBuilder(start=napper, clock=clock).add_error_edge(napper, report).build()
    result = await clock.run(workflow.run(1))
    assert result.outputs == ["woke 1"]
    assert any(isinstance(e, ExecutorSuspended) for e in result.events)
    assert not any(isinstance(e, ExecutorFailed) for e in result.events)


async def test_one_failed_message_of_an_inbox_leaves_the_executors_other_messages_to_commit():
    @executor
    async def deal(n: int, ctx: WorkflowContext[int]) -> None:
        for value in (1, 2, 3):
            ctx.send_message(value)

    @executor
    async def add(value: int, ctx: WorkflowContext) -> None:
        ctx.state.update("total", lambda total: total + value)
        if value == 2:  # the one that fails
            raise CardDeclined("two")
        ctx.yield_output(ctx.state["total"])  # reads its earlier invocations' writes

    @executor
    async def report(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"failed on {failure.input}")

    workflow = (
        WorkflowBuilder(start=deal)
        .add_edge(deal, add)
        .add_error_edge(add, report)
        .add_state("total", default=0)
        .build()
    )
    result = await workflow.run(0)
    assert result.outputs == [1, 4, "failed on 2"]  # the failed write never reached 3's read
    assert result.state == {"total": 4}


async def test_a_route_in_a_cycle_still_stops_at_the_limits():
    @executor
    async def flaky(n: int, ctx: WorkflowContext) -> None:
        raise CardDeclined(f"attempt {n}")

    @executor
    async def again(failure: ExecutorFailure, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(failure.input + 1)

    workflow = (
        WorkflowBuilder(start=flaky).add_error_edge(flaky, again).add_edge(again, flaky).build()
    )
    with pytest.raises(IterationLimitExceeded) as caught:
        await workflow.run(0, max_supersteps=9)
    assert caught.value.executor_ids == ("flaky", "again")
    assert caught.value.result.superstep == 9
    with pytest.raises(IterationLimitExceeded, match="max_node_iterations=3") as caught:
        await workflow.run(0, max_node_iterations=3)
    assert caught.value.executor_ids == ("flaky",)


async def test_build_reports_every_error_route_problem_at_once():
    @executor
    async def source(n: int, ctx: WorkflowContext) -> None:
        pass

    @executor
    async def other(n: int, ctx: WorkflowContext) -> None:
        pass

    @executor
    async def takes_failures(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        pass

    @executor
    async def takes_anything(message: object, ctx: WorkflowContext) -> None:
        pass

    with pytest.raises(WorkflowValidationError) as caught:
        (
            WorkflowBuilder(start=source)
            .add_error_edge(source, takes_failures)  # the only way to reach it: reachable
            .add_error_edge(source, takes_anything)
            .add_error_edge(takes_failures, other)
            .add_error_edge("nobody", takes_failures)
            .build()
        )
    assert caught.value.problems == (
        "add_error_edge('nobody' -> 'takes_failures'): unknown executor id 'nobody'",
        (
            "add_error_edge('source' -> 'takes_anything'): 'source' already has an error route, "
            "to 'takes_failures'; an executor's failures go to one handler"
        ),
        (
            "add_error_edge('takes_failures' -> 'other'): 'other' has no handler for "
            "ExecutorFailure, which the error route of 'takes_failures' delivers"
        ),
    )


def test_a_handler_reached_only_through_an_error_route_is_reachable():
    @executor
    async def source(n: int, ctx: WorkflowContext) -> None:
        pass

    @executor
    async def handler(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        pass

    workflow = WorkflowBuilder(start="source").add_executor(source).add_executor(handler)
    with pytest.raises(WorkflowValidationError, match="'handler' is unreachable"):
        workflow.build()
    assert workflow.add_error_edge("source", "handler").build().executor_ids == (
        "source",
        "handler",
    )


def test_pictures_draw_an_error_route_as_a_red_dashed_arrow_labelled_on_error():
    workflow = shop()
    mermaid = workflow.to_mermaid()
    assert '    n1 -.->|"on error"| n4\n' in mermaid  # charge -> refund
    (number,) = [i for i, line in enumerate(link_lines(mermaid)) if "on error" in line]
    assert f"    linkStyle {number} stroke:#c62828,stroke-dasharray: 6 3\n" in mermaid
    dot = workflow.to_dot()
    assert '    n1 -> n4 [style=dashed, color="#c62828", fontcolor="#c62828", ' in dot
    assert 'label="  on error  "];' in dot


def link_lines(mermaid: str) -> list[str]:
    arrows = ("-->", "-.->", "==>")
    return [line for line in mermaid.splitlines() if any(a in line for a in arrows)]


def test_the_graph_description_and_fingerprint_include_error_routes():
    @executor
    async def source(n: int, ctx: WorkflowContext) -> None:
        pass

    @executor
    async def handler(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        pass

    @executor
    async def other(failure: ExecutorFailure, ctx: WorkflowContext) -> None:
        pass

    def build(first, then):
        builder = WorkflowBuilder(start=source).add_executor(handler).add_executor(other)
        return builder.add_error_edge(source, first).add_error_edge(first, then).build()

    to_handler, to_other = build(handler, other), build(other, handler)
    assert to_handler.description["edges"] == [
        "error route 'source' -> 'handler'",
        "error route 'handler' -> 'other'",
    ]
    assert to_handler.fingerprint != to_other.fingerprint
    assert describe_changes(to_handler.description, to_other.description) == [
        "error route 'source' -> 'handler' was removed",
        "error route 'handler' -> 'other' was removed",
        "error route 'source' -> 'other' was added",
        "error route 'other' -> 'handler' was added",
    ]
