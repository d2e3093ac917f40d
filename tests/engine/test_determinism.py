"""Determinism: generated graphs with random timing give identical results.

Hypothesis builds graphs (DAGs, fan-out, fan-in, switches, bounded cycles)
whose executors sleep random small amounts. Each graph runs 20 times, across
run(), OFF_THREAD, LOCKSTEP and deterministic=True; outputs, committed state,
final status and the order in which every executor received its messages
must be identical every time.
"""

import asyncio
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treadle import Case, Default, ExecutionMode, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import TreadleError


@dataclass(frozen=True)
class Token:
    value: int
    hops: int


@dataclass(frozen=True)
class GraphSpec:
    size: int
    parents: tuple[tuple[int, ...], ...]  # for node i >= 1: earlier nodes feeding it
    fan_in: tuple[bool, ...]  # for node i >= 1: join its parents with a fan-in
    switch: tuple[int, int, int] | None  # (source, even target, default target)
    back_edge: tuple[int, int] | None  # (from, to) with to <= from: a bounded cycle


@st.composite
def graph_specs(draw):
    size = draw(st.integers(3, 6))
    parents, fan_in = [], []
    for i in range(1, size):
        ps = draw(st.lists(st.integers(0, i - 1), min_size=1, max_size=min(3, i), unique=True))
        parents.append(tuple(sorted(ps)))
        fan_in.append(len(ps) > 1 and draw(st.booleans()))
    switch = None
    if draw(st.booleans()):
        source = draw(st.integers(0, size - 3))
        even, default = draw(
            st.lists(st.integers(source + 1, size - 1), min_size=2, max_size=2, unique=True)
        )
        switch = (source, even, default)
    back_edge = None
    if draw(st.booleans()):
        frm = draw(st.integers(1, size - 1))
        back_edge = (frm, draw(st.integers(0, frm)))
    return GraphSpec(size, tuple(parents), tuple(fan_in), switch, back_edge)


def build(spec: GraphSpec, log: dict):
    def make(i: int):
        @executor(id=f"n{i}")
        async def node(msg: Token | list, ctx: WorkflowContext) -> None:
            await asyncio.sleep(random.random() / 2000)
            if isinstance(msg, list):
                msg = Token(sum(t.value for t in msg), max(t.hops for t in msg))
            log.setdefault(ctx.run_id, {}).setdefault(ctx.executor_id, []).append(msg)
            out = Token((msg.value * 31 + i) % 1009, msg.hops + 1)
            ctx.state.update("invocations", lambda v: v + 1)
            ctx.state.set(f"last:{ctx.executor_id}", out.value)
            ctx.yield_output((ctx.executor_id, out))
            if has_out[i]:
                ctx.send_message(out)

        return node

    has_out = [False] * spec.size
    nodes = [make(i) for i in range(spec.size)]
    builder = WorkflowBuilder(start=nodes[0]).add_state("invocations", default=0)
    for i in range(1, spec.size):
        parents = spec.parents[i - 1]
        if spec.switch is not None and i in spec.switch[1:] and spec.switch[0] in parents:
            parents = tuple(p for p in parents if p != spec.switch[0])
        if not parents:
            continue
        for p in parents:
            has_out[p] = True
        if spec.fan_in[i - 1] and len(parents) > 1:
            builder.add_fan_in([nodes[p] for p in parents], nodes[i])
        else:
            for p in parents:
                builder.add_edge(nodes[p], nodes[i])
    if spec.switch is not None:
        source, even, default = spec.switch
        has_out[source] = True
        builder.add_switch(
            nodes[source],
            [Case(lambda t: t.value % 2 == 0, nodes[even]), Default(nodes[default])],
        )
    if spec.back_edge is not None:
        frm, to = spec.back_edge
        has_out[frm] = True
        builder.add_edge(nodes[frm], nodes[to], condition=lambda t: t.hops < 8)
    for i in range(spec.size):  # make every node reachable from the start
        builder.add_executor(nodes[i])
    return builder.build()


async def outcome(wf, mode: str, log: dict):
    try:
        if mode == "run":
            result = await wf.run(Token(1, 0), max_supersteps=60)
        elif mode == "deterministic":
            result = await wf.run(Token(1, 0), max_supersteps=60, deterministic=True)
        else:
            m = ExecutionMode.OFF_THREAD if mode == "off_thread" else ExecutionMode.LOCKSTEP
            async with wf.stream(Token(1, 0), mode=m, max_supersteps=60) as events:
                async for _ in events:
                    pass
            result = events.result
        final = (result.status, result.outputs, dict(result.state), result.stalled)
        run_id = result.run_id
    except TreadleError as error:
        run_id = error.result.run_id if getattr(error, "result", None) else None
        final = (type(error).__name__, str(error).replace(str(run_id), "<run>"))
    return final, log.pop(run_id, {})


MODES = ["off_thread", "lockstep", "deterministic", "run"]


def deterministic_graphs_property(max_examples: int):
    """The property at a budget of examples (hypothesis fixes the budget as it decorates)."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(graph_specs())
    def check(spec):
        async def scenario():
            log: dict = {}
            try:
                wf = build(spec, log)
            except TreadleError:
                return  # a switch left a node unreachable: not a runnable graph (see below)
            expected = None
            for repetition in range(20):
                got = await outcome(wf, MODES[repetition % len(MODES)], log)
                if expected is None:
                    expected = got
                assert got == expected, (spec, MODES[repetition % len(MODES)])

        asyncio.run(scenario())

    return check


# Each graph runs 20 times: 10 graphs in the default suite, 25 under `make soak`.
test_generated_graphs_are_deterministic_across_repetitions_and_modes = (
    deterministic_graphs_property(10)
)
test_generated_graphs_are_deterministic_at_full_budget = pytest.mark.soak(
    deterministic_graphs_property(25)
)


def test_most_generated_graphs_are_runnable():
    # Guards the property above against silently testing nothing: it skips the
    # specs that do not build, so most of what the strategy draws must build
    # and run. A sample of its own (fixed seed), so this holds when run alone.
    outcomes: list[str] = []

    @settings(max_examples=40, deadline=None, database=None, derandomize=True)
    @given(graph_specs())
    def build_and_run(spec):
        log: dict = {}
        try:
            wf = build(spec, log)
        except TreadleError:
            outcomes.append("unbuildable")
            return
        _, received = asyncio.run(outcome(wf, "run", log))
        outcomes.append("ran" if received else "ran nothing")

    build_and_run()
    assert len(outcomes) >= 40
    assert outcomes.count("ran") >= len(outcomes) // 2, outcomes
