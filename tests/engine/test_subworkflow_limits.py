"""Call limits reach sub-workflows: one limit, one gate, one count for a parent and its children.

A sub-workflow's executors may name a limit that the parent workflow's
builder declares, that the ``Runtime`` hosting the parent declares, or that
the sub-workflow's own builder declares. Its calls wait at the parent run's
gate, so the parent's own calls and every child's are counted together:
the handlers' recorded start and end times never show more calls under
way than the limit's concurrency, in one process and on a stored SQLite
run (where the store counts the slots).
"""

from __future__ import annotations

import asyncio

import pytest

from treadle import CallLimit, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import WorkflowValidationError
from treadle.stores import SqliteStore

CHILDREN = 6  # sub-workflow runs started by the parent's fan-out
CALLS = 3  # limited calls each child makes


class Calls:
    """Each limited call's start and end, by limit, on the loop's clock.

    The first calls of ``api`` are held (up to a second) until as many are
    under way as its concurrency lets in: what the limit lets run together is
    then seen together, however slowly a loaded machine hands out the slots.
    """

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float]]] = {}
        self._inside: dict[str, int] = {}
        self._met: set[str] = set()

    async def call(self, *limits: str) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for limit in limits:
            self._inside[limit] = self._inside.get(limit, 0) + 1
        try:
            await asyncio.sleep(0.005)
            while "api" in limits and "api" not in self._met and loop.time() < started + 1.0:
                if self._inside["api"] >= API.concurrency:
                    self._met.add("api")
                else:
                    await asyncio.sleep(0.002)
        finally:
            for limit in limits:
                self._inside[limit] -= 1
        for limit in limits:
            self.spans.setdefault(limit, []).append((started, loop.time()))

    def most_at_once(self, limit: str) -> int:
        """The most calls of ``limit`` under way at one moment (an end before a start)."""
        moments = sorted(
            (t, step) for start, end in self.spans[limit] for t, step in ((start, 1), (end, -1))
        )
        now = most = 0
        for _, step in moments:
            now += step
            most = max(most, now)
        return most


def family(calls: Calls, *, parent_limits=(), child_limits=(), inner=("api",)):
    """A parent whose start fans out to CHILDREN sub-workflow runs and as many calls of its own.

    Each child makes CALLS calls under the limits ``inner`` names, each
    call's number an output of the parent; the parent's own calls are under ``api``.
    """

    @executor(id="begin")
    async def begin(n: int, ctx: WorkflowContext) -> None:
        for i in range(CALLS):
            ctx.send_message(n * 10 + i)

    @executor(id="call", limits=list(inner), concurrency=CALLS)
    async def call(n: int, ctx: WorkflowContext) -> None:
        await calls.call(*inner)
        ctx.yield_output(n)

    child = WorkflowBuilder(begin, name="child", limits=list(child_limits)).add_edge(begin, call)

    @executor(id="start")
    async def start(n: int, ctx: WorkflowContext) -> None:
        for i in range(CHILDREN):
            ctx.send_message(i)

    @executor(id="own", limits=["api"], concurrency=CHILDREN)
    async def own(n: int, ctx: WorkflowContext) -> None:
        await calls.call("api")

    builder = WorkflowBuilder(start, name="parent", limits=list(parent_limits))
    built = child.build()
    children = [f"child{i}" for i in range(CHILDREN)]
    for child_id in children:  # each child an executor of its own: they run at once
        builder.add_workflow(built, id=child_id)
    # Message i goes to child i and to the parent's own call.
    builder.add_fan_out(start, [*children, own], lambda i, ids: [children[i], "own"])
    return builder.build()


EVERY_CALL = sorted(i * 10 + c for i in range(CHILDREN) for c in range(CALLS))
API = CallLimit("api", concurrency=2)


async def test_a_limit_the_parent_declares_counts_its_childrens_calls_with_its_own():
    calls = Calls()
    workflow = family(calls, parent_limits=[API], child_limits=["api"])
    result = await workflow.run(1)
    assert sorted(result.outputs) == EVERY_CALL
    assert len(calls.spans["api"]) == CHILDREN * CALLS + CHILDREN
    assert calls.most_at_once("api") == API.concurrency


async def test_on_a_stored_run_the_store_counts_the_childrens_calls_with_the_parents(tmp_path):
    calls = Calls()
    workflow = family(calls, parent_limits=[API], child_limits=["api"])
    store = SqliteStore(tmp_path / "runs.db")
    try:
        result = await workflow.run(1, store=store)
        assert sorted(result.outputs) == EVERY_CALL
        assert await store.line_waits([result.run_id]) == []  # every line left empty
    finally:
        await store.close()
    assert len(calls.spans["api"]) == CHILDREN * CALLS + CHILDREN
    assert calls.most_at_once("api") == API.concurrency


async def test_a_limit_the_runtime_declares_reaches_the_children_of_its_runs(tmp_path):
    calls = Calls()
    workflow = family(calls, parent_limits=["api"], child_limits=["api"])
    store = SqliteStore(tmp_path / "runs.db")
    async with Runtime(store, [workflow], limits=[API]) as runtime:
        results = await asyncio.gather(*(runtime.start("parent", n) for n in range(2)))
    assert [sorted(r.outputs) for r in results] == [EVERY_CALL, EVERY_CALL]
    assert len(calls.spans["api"]) == 2 * (CHILDREN * CALLS + CHILDREN)
    assert calls.most_at_once("api") == API.concurrency


async def test_the_runtimes_terms_win_over_the_parents_and_the_childs_own(tmp_path):
    calls = Calls()
    roomy = CallLimit("api", concurrency=50)
    workflow = family(calls, parent_limits=[roomy], child_limits=[roomy])
    async with Runtime(SqliteStore(tmp_path / "runs.db"), [workflow], limits=[API]) as runtime:
        result = await runtime.start("parent", 1)
    assert sorted(result.outputs) == EVERY_CALL
    assert calls.most_at_once("api") == API.concurrency


@pytest.mark.parametrize("stored", [False, True], ids=["in-process", "sqlite"])
async def test_a_limit_the_child_declares_is_shared_by_every_child_of_the_run(tmp_path, stored):
    calls = Calls()
    one = CallLimit("inner", concurrency=1)
    workflow = family(calls, parent_limits=[API], child_limits=["api", one], inner=("inner",))
    store = SqliteStore(tmp_path / "runs.db") if stored else None
    try:
        result = await workflow.run(1, store=store)
    finally:
        if store is not None:
            await store.close()
    assert sorted(result.outputs) == EVERY_CALL
    assert len(calls.spans["inner"]) == CHILDREN * CALLS
    assert calls.most_at_once("inner") == 1
    assert calls.most_at_once("api") == API.concurrency  # the parent's own


async def test_a_limit_a_child_leaves_to_its_host_that_nobody_declares_is_refused_first():
    calls = Calls()
    workflow = family(calls, parent_limits=[API], child_limits=["api", "inner"], inner=("inner",))
    with pytest.raises(WorkflowValidationError) as raised:
        Runtime(SqliteStore(":memory:"), [workflow])
    assert "sub-workflow 'child0'" in str(raised.value)
    assert "executor 'call' names limit 'inner'" in str(raised.value)
    with pytest.raises(WorkflowValidationError, match="names limit 'inner'"):
        await workflow.run(1)
    assert calls.spans == {}  # nothing ran
