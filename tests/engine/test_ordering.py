"""Delivery and ordering guarantees of docs/semantics.md, through the public API."""

import asyncio
import random
from dataclasses import dataclass

import pytest

from treadle import Case, Default, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RoutingError


@dataclass(frozen=True)
class Item:
    source: str
    n: int


def _sender(name: str, count: int, jitter: bool = True):
    @executor(id=name)
    async def send(msg: str, ctx: WorkflowContext[Item]) -> None:
        for n in range(count):
            if jitter:
                await asyncio.sleep(random.random() / 1000)
            ctx.send_message(Item(name, n))

    return send


def _recorder(name: str):
    @executor(id=name)
    async def record(msg: Item | list, ctx: WorkflowContext) -> None:
        ctx.yield_output((ctx.superstep, msg))

    return record


async def test_a_message_sent_in_superstep_n_arrives_in_n_plus_1():
    seen = []

    @executor
    async def first(msg: int, ctx: WorkflowContext[int]) -> None:
        seen.append(("first", ctx.superstep))
        ctx.send_message(msg + 1)

    @executor
    async def second(msg: int, ctx: WorkflowContext) -> None:
        seen.append(("second", ctx.superstep))

    await WorkflowBuilder(start=first).add_edge(first, second).build().run(0)
    assert seen == [("first", 1), ("second", 2)]


async def test_one_source_to_one_target_is_fifo():
    source = _sender("source", 50)
    sink = _recorder("sink")
    wf = WorkflowBuilder(start=source).add_edge(source, sink).build()
    result = await wf.run("go")
    assert [m.n for _, m in result.outputs] == list(range(50))


async def test_many_sources_arrive_ordered_by_rank_then_send_order():
    # Three senders run concurrently with random delays; the sink's inbox is
    # still ordered (source rank, send sequence): a, a, b, b, c, c.
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    senders = [_sender(name, 2) for name in ("a", "b", "c")]
    sink = _recorder("sink")
    builder = WorkflowBuilder(start=kick).add_fan_out(kick, list(reversed(senders)))
    for s in senders:
        builder.add_edge(s, sink)
    # Ranks follow first mention: kick, c, b, a, sink — so c's messages come first.
    wf = builder.build()
    for _ in range(5):
        result = await wf.run("go")
        assert [(m.source, m.n) for _, m in result.outputs] == [
            ("c", 0),
            ("c", 1),
            ("b", 0),
            ("b", 1),
            ("a", 0),
            ("a", 1),
        ]


async def test_fan_out_delivers_the_same_message_to_every_target_in_one_superstep():
    @executor
    async def kick(msg: str, ctx: WorkflowContext[Item]) -> None:
        ctx.send_message(Item("kick", 7))

    targets = [_recorder(f"t{i}") for i in range(4)]
    wf = WorkflowBuilder(start=kick).add_fan_out(kick, targets).build()
    result = await wf.run("go")
    assert result.outputs == [(2, Item("kick", 7))] * 4


async def test_fan_out_selector_picks_targets_delivered_in_declared_order():
    @executor
    async def kick(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg)

    @executor
    async def even(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(("even", msg))

    @executor
    async def small(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(("small", msg))

    def selector(msg: int, targets):
        picked = []
        if msg < 10:
            picked.append("small")
        if msg % 2 == 0:
            picked.append("even")
        return picked

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [even, small], selector).build()
    assert (await wf.run(4)).outputs == [("even", 4), ("small", 4)]
    assert (await wf.run(5)).outputs == [("small", 5)]
    assert (await wf.run(12)).outputs == [("even", 12)]

    bad = WorkflowBuilder(start=kick).add_fan_out(kick, [even], lambda m, t: ["ghost"]).build()
    with pytest.raises(Exception, match="chose \\['ghost'\\]"):
        await bad.run(1)


async def test_fan_in_delivers_one_list_ordered_by_source_rank_once_all_have_sent():
    @executor
    async def kick(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    # "slow" needs two supersteps to answer; the fan-in waits for it.
    @executor
    async def slow(msg: str, ctx: WorkflowContext[str | Item]) -> None:
        if msg == "go":
            ctx.send_message("again", target="slow")
        else:
            ctx.send_message(Item("slow", 1), target="join")

    fast = _sender("fast", 2, jitter=False)
    join = _recorder("join")
    wf = (
        WorkflowBuilder(start=kick)
        .add_fan_out(kick, [slow, fast])
        .add_edge(slow, slow)
        .add_fan_in([fast, slow], join)
        .build()
    )
    result = await wf.run("go")
    superstep, batch = result.outputs[0]
    assert superstep == 4
    # Ordered by source rank (slow was mentioned before fast), then send order.
    assert batch == [Item("slow", 1), Item("fast", 0), Item("fast", 1)]


async def test_switch_takes_the_first_matching_case_then_the_default():
    @executor
    async def kick(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg)

    @executor
    async def negative(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output("negative")

    @executor
    async def small(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output("small")

    @executor
    async def other(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output("other")

    wf = (
        WorkflowBuilder(start=kick)
        .add_switch(
            kick,
            [Case(lambda m: m < 0, negative), Case(lambda m: m < 10, small), Default(other)],
        )
        .build()
    )
    assert (await wf.run(-5)).outputs == ["negative"]
    assert (await wf.run(5)).outputs == ["small"]
    assert (await wf.run(50)).outputs == ["other"]


async def test_edges_are_filtered_by_the_type_the_target_accepts():
    @executor
    async def kick(msg: int, ctx: WorkflowContext[int | str]) -> None:
        ctx.send_message(msg)
        ctx.send_message(str(msg))

    @executor
    async def ints(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(("int", msg))

    @executor
    async def strs(msg: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(("str", msg))

    wf = WorkflowBuilder(start=kick).add_edge(kick, ints).add_edge(kick, strs).build()
    assert (await wf.run(3)).outputs == [("int", 3), ("str", "3")]


async def test_a_message_no_edge_can_carry_is_a_routing_error_in_the_sender():
    @executor
    async def kick(msg: int, ctx: WorkflowContext) -> None:
        ctx.send_message(b"bytes")

    @executor
    async def ints(msg: int, ctx: WorkflowContext) -> None:
        pass

    wf = WorkflowBuilder(start=kick).add_edge(kick, ints).build()
    with pytest.raises(Exception) as caught:
        await wf.run(1)
    assert isinstance(caught.value.__cause__, RoutingError)
    assert "'kick' sent a bytes" in str(caught.value.__cause__)


async def test_explicit_target_must_be_a_neighbour():
    @executor
    async def kick(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(msg, target="b")

    @executor
    async def a(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output("a")

    @executor
    async def b(msg: int, ctx: WorkflowContext) -> None:
        ctx.yield_output("b")

    wf = WorkflowBuilder(start=kick).add_fan_out(kick, [a, b]).build()
    assert (await wf.run(1)).outputs == ["b"]
    lonely = WorkflowBuilder(start=kick).add_edge(kick, a).build()
    with pytest.raises(Exception) as caught:
        await lonely.run(1)
    assert "no edge connects them" in str(caught.value.__cause__)


async def test_handoff_delivers_the_payload_with_who_and_why():
    @executor
    async def triage(msg: str, ctx: WorkflowContext) -> None:
        ctx.handoff("billing", msg, reason="mentions an invoice")

    @executor
    async def billing(msg: str, ctx: WorkflowContext) -> None:
        hc = ctx.handoff_context
        ctx.yield_output((msg, hc.source if hc else None, hc.reason if hc else None))

    wf = WorkflowBuilder(start=triage).add_handoff(triage, [billing]).build()
    result = await wf.run("my invoice")
    assert result.outputs == [("my invoice", "triage", "mentions an invoice")]


async def test_an_undeclared_handoff_is_refused():
    @executor
    async def triage(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.handoff("support", msg)

    @executor
    async def support(msg: str, ctx: WorkflowContext) -> None:
        pass

    wf = WorkflowBuilder(start=triage).add_edge(triage, support).build()
    with pytest.raises(Exception) as caught:
        await wf.run("x")
    assert "may not hand off to 'support'" in str(caught.value.__cause__)
