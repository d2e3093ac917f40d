"""The barrier, called directly: ``plan_superstep`` and ``commit_superstep`` against a model.

No loop, no handler runs: a random graph is built, each planned
invocation is given a random outcome (sends, state writes, outputs, or a
suspension), and the committed point the pure barrier returns is checked
against a small model of DESIGN section 2, superstep after superstep:

- ordering: each target's next inbox holds its messages in (source rank,
  inbox position, send sequence) order, stamped with this superstep;
- atomicity: the point given is never changed, and a conflicting
  superstep raises without any new point;
- reducers and updates: concurrent sets of a reduced key all land, in rank
  order; concurrent ``update``s are never lost; two executors setting a
  plain key is a ``StateConflictError``;
- fan-in: delivered once every source has sent, as one list in source
  rank order, buffered across supersteps until then;
- suspension: a suspended invocation commits its wait and nothing else.
"""

from __future__ import annotations

import copy
import operator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._engine._barrier import BarrierState, as_saved
from treadle._engine._commit import commit_superstep
from treadle._engine._delivery import Envelope
from treadle._engine._env import Opening, build_env, no_progress
from treadle._engine._errors import StateConflictError
from treadle._engine._invocation import InvocationOutcome, plan_superstep
from treadle._engine._options import RunOptions
from treadle._engine._result import RunStatus
from treadle._engine._state import SET, UPDATE, initial_state
from treadle._engine._waits import Suspension, Wait, WaitBook


def _handler(executor_id: str) -> Any:
    async def handle(message: object, ctx: WorkflowContext[object]) -> None:
        raise AssertionError("the pure barrier never runs a handler")  # pragma: no cover

    return executor(id=executor_id)(handle)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]], tuple[list[int], int] | None]:
    """(executors, direct edges, fan-in (sources, target) or None); all reachable from e0."""
    n = draw(st.integers(2, 5))
    edges = {(i, i + 1) for i in range(n - 1)}  # a chain keeps every executor reachable
    edges |= set(draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)))))
    fan_in = None
    if n >= 3 and draw(st.booleans()):
        sources = sorted(draw(st.sets(st.integers(0, n - 1), min_size=2, max_size=n - 1)))
        target = draw(st.sampled_from([i for i in range(n) if i not in sources]))
        fan_in = (sources, target)
        edges -= {(s, target) for s in sources}  # a source reaches it through the fan-in only
    return n, sorted(edges), fan_in


def build(n: int, edges: list[tuple[int, int]], fan_in: tuple[list[int], int] | None) -> Any:
    nodes = [_handler(f"e{i}") for i in range(n)]
    builder = WorkflowBuilder(nodes[0], name="model")
    for node in nodes[1:]:
        builder.add_executor(node)
    for source, target in edges:
        builder.add_edge(nodes[source], nodes[target])
    if fan_in is not None:
        builder.add_fan_in([nodes[s] for s in fan_in[0]], nodes[fan_in[1]])
    builder.add_state("total", default=0, reducer=operator.add)
    builder.add_state("count", default=0)
    return builder.build()


@dataclass
class Model:
    """DESIGN section 2, kept by hand: what the next committed point must hold."""

    n: int
    direct: dict[int, list[int]]  # source rank -> targets of its direct edges
    fan_in: tuple[list[int], int] | None
    buffer: dict[int, list[Any]] = field(default_factory=dict)  # fan-in source -> payloads
    state: dict[str, Any] = field(default_factory=lambda: {"total": 0, "count": 0})
    outputs: list[Any] = field(default_factory=list)
    iterations: dict[str, int] = field(default_factory=dict)


def _snapshot(point: BarrierState) -> Any:
    return copy.deepcopy(
        (
            point.superstep,
            {k: list(v) for k, v in point.pending.items()},
            point.fan_in_buffers,
            dict(point.state),
            dict(point.iterations),
            point.outputs,
            list(point.waits.suspended),
        )
    )


def _random_outcome(data: st.DataObject, env: Any, invocation: Any, counter: list[int]) -> Any:
    """A handler's outcome, drawn: a suspension, or sends, writes and outputs."""
    source = invocation.executor.id
    if data.draw(st.integers(0, 5), label="suspends") == 0:
        wait = Wait("request", f"req-{source}-{counter[0]}")
        counter[0] += 1
        return InvocationOutcome(
            (), (), (), (), None, Suspension(source, invocation.envelope, [], wait)
        )
    sent = []
    sends = data.draw(st.integers(0, 2), label="sends") if env.router.has_edges_from(source) else 0
    for _ in range(sends):
        counter[0] += 1
        payload = counter[0]
        sent.extend(
            (target, fan, payload, None) for target, fan in env.router.route(source, payload, None)
        )
    writes: list[Any] = []
    if data.draw(st.booleans(), label="adds"):
        writes.append((SET, "total", data.draw(st.integers(1, 9))))
    if data.draw(st.booleans(), label="counts"):
        writes.append((UPDATE, "count", lambda v: v + 1))
    if data.draw(st.integers(0, 3), label="owns") == 0:
        writes.append((SET, "owner", source))
    outputs = [f"{source}:{i}" for i in range(data.draw(st.integers(0, 2), label="outputs"))]
    return InvocationOutcome(tuple(sent), writes, outputs, (), None, None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), data=st.data())
def test_the_pure_barrier_keeps_the_superstep_contract(graph, data):
    n, edges, fan_in = graph
    workflow = build(n, edges, fan_in)
    pool, release = workflow.claim("model-run")
    try:
        settings_ = workflow.settings(RunOptions(), sleep_through_timers=False)
        env = build_env(Opening(workflow, "model-run", settings_, pool), no_progress)
        direct: dict[int, list[int]] = {}
        for source, target in edges:
            direct.setdefault(source, []).append(target)
        model = Model(n, direct, fan_in)
        point = BarrierState(
            "model-run",
            0,
            RunStatus.RUNNING,
            {"e0": [Envelope((0, -1, 0, 0), "__input__", 0)]},
            tuple({} for _ in env.fan_in_edges),
            initial_state(env.state_specs, None),
            {},
            (),
            WaitBook(),
        )
        counter = [0]
        for _ in range(4):
            if not point.pending:
                return
            number = point.superstep + 1
            plan = plan_superstep(env, point, number)
            # Planned in stamp order: by executor rank, then inbox position.
            keys = [(env.ranks[i.executor.id], i.position) for i in plan.invocations]
            assert keys == sorted(keys)
            assert [i.envelope for i in plan.invocations] == [
                e for target in plan.order for e in point.pending[target]
            ]
            for invocation in plan.invocations:
                invocation.outcome = _random_outcome(data, env, invocation, counter)
            before = _snapshot(point)
            expected = _expect(model, plan)
            if expected is None:  # two executors set "owner": nothing commits
                try:
                    commit_superstep(env, point, plan)
                except StateConflictError:
                    assert _snapshot(point) == before
                    return
                raise AssertionError("a conflicting superstep committed")
            committed, _, _, _ = commit_superstep(env, point, plan)
            assert _snapshot(point) == before  # the point given is never changed
            _check(model, expected, committed, number)
            point = committed
    finally:
        release()


def _expect(model: Model, plan: Any) -> dict[str, Any] | None:
    """Apply one superstep to the model; ``None`` when its writes conflict."""
    owners = {
        i.executor.id
        for i in plan.invocations
        if i.outcome.suspension is None
        for op in i.outcome.writes
        if op[1] == "owner"
    }
    if len(owners) > 1:
        return None
    inboxes: dict[str, list[tuple[str, Any]]] = {}
    filled = None
    fan_sources, fan_target = model.fan_in if model.fan_in is not None else ([], -1)
    suspended = []
    for invocation in plan.invocations:  # in (rank, position) order
        source = invocation.executor.id
        rank = int(source[1:])
        model.iterations[source] = model.iterations.get(source, 0) + 1
        outcome = invocation.outcome
        if outcome.suspension is not None:
            suspended.append(outcome.suspension)
            continue
        payloads = list(dict.fromkeys(p for _, _, p, _ in outcome.sent))
        for payload in payloads:  # in send order
            for target in model.direct.get(rank, []):
                inboxes.setdefault(f"e{target}", []).append((source, payload))
            if rank in fan_sources:
                model.buffer.setdefault(rank, []).append(payload)
        for _kind, key, value in outcome.writes:
            if key == "total":
                model.state["total"] += value
            elif key == "count":
                model.state["count"] += 1
            else:
                model.state["owner"] = value
        model.outputs.extend(outcome.outputs)
    if fan_sources and all(model.buffer.get(s) for s in fan_sources):
        filled = [p for s in sorted(fan_sources) for p in model.buffer[s]]
        model.buffer.clear()
    return {"inboxes": inboxes, "fan_in": (f"e{fan_target}", filled), "suspended": suspended}


def _check(model: Model, expected: dict[str, Any], point: BarrierState, number: int) -> None:
    fan_target, filled = expected["fan_in"]
    direct = {
        t: [(e.source, e.payload) for e in box if not isinstance(e.payload, list)]
        for t, box in point.pending.items()
    }
    assert {t: b for t, b in direct.items() if b} == expected["inboxes"]
    for box in point.pending.values():
        assert [e.stamp for e in box] == sorted(e.stamp for e in box)  # delivery order
        assert all(e.stamp[0] == number for e in box)  # sent in N, delivered in N+1
    lists = [
        e.payload for box in point.pending.values() for e in box if isinstance(e.payload, list)
    ]
    assert lists == ([filled] if filled is not None else [])
    if filled is not None:
        assert any(isinstance(e.payload, list) for e in point.pending[fan_target])
    if model.fan_in is not None:
        [buffer] = point.fan_in_buffers
        buffered = {int(s[1:]): [e.payload for e in box] for s, box in buffer.items()}
        assert buffered == {s: p for s, p in model.buffer.items() if p}
    assert dict(point.state) == model.state
    assert list(point.outputs) == model.outputs
    assert dict(point.iterations) == model.iterations
    assert (  # a wait book keeps its suspensions as a tuple
        list(point.waits.suspended[-len(expected["suspended"]) or len(point.waits.suspended) :])
        == (expected["suspended"])
    )
    assert point.superstep == number


def test_a_point_as_saved_is_the_point_with_what_its_checkpoint_sets():
    """as_saved, made slot by slot, equals _replace of the same four fields."""
    point = BarrierState(
        "r",
        3,
        RunStatus.RUNNING,
        {"a": [Envelope((3, 0, 0, 0), "b", 7)]},
        ({"b": ()},),
        {"k": [1]},
        {"a": 2},
        (5,),
        WaitBook(),
        deadline_at=9.5,
        outcome=("done", None),
    )
    waits, spawned, written = WaitBook(), (), frozenset({"k"})
    saved = as_saved(point, RunStatus.COMPLETED, waits, spawned, written)
    assert saved == point._replace(
        status=RunStatus.COMPLETED, waits=waits, spawned=spawned, written=written
    )
    assert saved != point
