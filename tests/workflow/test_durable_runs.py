"""Durable runs through the public API, on a real SQLite file."""

import asyncio
import json
import pickle
import sqlite3
from collections import Counter
from dataclasses import dataclass

import pytest

from treadle import Executor, RunStatus, WorkflowBuilder, WorkflowContext, executor, handler
from treadle._checkpoints._blob import seal
from treadle.errors import (
    CheckpointCorruptError,
    ExecutorFailedError,
    GraphChangedError,
    SerializationError,
)
from treadle.events import CheckpointSaved
from treadle.stores import SqliteStore


@dataclass(frozen=True)
class Count:
    n: int


def counting_workflow(
    store, calls: Counter, last: int = 10, extra_edge: bool = False, awaits: bool = False
):
    """A loop of `last` supersteps that counts invocations per superstep.

    ``awaits``: each invocation lets the event loop run once, as one awaiting
    anything would.
    """

    @executor
    async def count(msg: Count, ctx: WorkflowContext[Count]) -> None:
        calls[ctx.superstep] += 1
        if awaits:
            await asyncio.sleep(0)
        ctx.state.update("sum", lambda v: v + msg.n)
        if msg.n < last:
            ctx.send_message(Count(msg.n + 1))
        else:
            ctx.yield_output(ctx.state["sum"])

    @executor
    async def spare(msg: Count, ctx: WorkflowContext) -> None:
        pass

    builder = (
        WorkflowBuilder(start=count, name="counting", store=store)
        .add_edge(count, count, condition=lambda m: True)
        .add_state("sum", default=0)
    )
    if extra_edge:
        builder.add_edge(count, spare)
    return builder.build()


@pytest.fixture
async def store(tmp_path):
    s = SqliteStore(tmp_path / "runs.sqlite")
    yield s
    await s.close()


async def test_a_run_checkpoints_every_barrier_and_history_links_them(store):
    calls: Counter = Counter()
    wf = counting_workflow(store, calls)
    result = await wf.run(Count(1), run_id="r1")
    assert result.outputs == [55]
    history = await wf.history("r1")
    supersteps = [c.superstep for c in history.checkpoints]
    assert supersteps == list(range(11))  # the input (0), then supersteps 1..10
    parents = [c.parent_checkpoint_id for c in history.checkpoints]
    ids = [c.checkpoint_id for c in history.checkpoints]
    assert parents == [None, *ids[:-1]]
    assert history.checkpoints[-1].status == "completed"
    assert history.run.status == "completed"
    assert result.last_checkpoint_id == ids[-1]
    saved = [e for e in result.events if isinstance(e, CheckpointSaved)]
    assert [e.superstep for e in saved] == list(range(1, 11))
    assert result.events[-1].status is RunStatus.COMPLETED


async def test_resume_from_checkpoint_k_re_executes_only_later_supersteps(store):
    calls: Counter = Counter()
    wf = counting_workflow(store, calls)
    first = await wf.run(Count(1), run_id="r1")
    history = await wf.history("r1")
    k = history.checkpoints[4]  # the barrier of superstep 4
    assert k.superstep == 4
    calls.clear()
    again = await wf.resume("r1", k.checkpoint_id)
    assert sorted(calls) == list(range(5, 11))
    assert all(n == 1 for n in calls.values())
    assert (again.outputs, again.state) == (first.outputs, first.state)
    # The branch is recorded: superstep 5 now has two checkpoints, both
    # computed from k; the old line of history is kept.
    after = await wf.history("r1")
    assert len(after.checkpoints) == 11 + 6
    fives = [c for c in after.checkpoints if c.superstep == 5]
    assert [c.parent_checkpoint_id for c in fives] == [k.checkpoint_id] * 2


async def test_resuming_a_completed_run_runs_nothing(store):
    calls: Counter = Counter()
    wf = counting_workflow(store, calls)
    first = await wf.run(Count(1), run_id="r1")
    calls.clear()
    again = await wf.resume("r1")
    assert calls == Counter()
    assert (again.status, again.outputs) == (RunStatus.COMPLETED, first.outputs)


async def test_a_failed_superstep_is_re_run_by_resume(store):
    attempts = Counter()

    @executor
    async def flaky(msg: int, ctx: WorkflowContext[int]) -> None:
        attempts[ctx.superstep] += 1
        if ctx.superstep == 3 and attempts[3] == 1:
            raise RuntimeError("transient")
        if msg < 5:
            ctx.send_message(msg + 1)
        else:
            ctx.yield_output(msg)

    wf = WorkflowBuilder(start=flaky, store=store).add_edge(flaky, flaky).build()
    with pytest.raises(ExecutorFailedError):
        await wf.run(1, run_id="r1")
    row = await store.get_run("r1")
    assert (row.status, row.superstep) == ("failed", 2)
    assert "transient" in (row.error or "")
    result = await wf.resume("r1")
    assert result.outputs == [5]
    assert attempts == Counter({1: 1, 2: 1, 3: 2, 4: 1, 5: 1})


async def test_fork_with_a_state_patch_leaves_the_parent_untouched(store):
    calls: Counter = Counter()
    wf = counting_workflow(store, calls)
    parent = await wf.run(Count(1), run_id="parent")
    parent_history = await wf.history("parent")
    k = parent_history.checkpoints[5]
    child_id = await wf.fork(
        "parent", k.checkpoint_id, state_patch={"sum": 1000}, new_run_id="child"
    )
    child = await wf.resume(child_id)
    # The patch replaced the sum of 1..5 (15) with 1000; 6..10 add 40 more.
    assert parent.outputs == [55]
    assert child.outputs == [1000 + 40]
    # The parent's checkpoints, row and result are as they were.
    after = await wf.history("parent")
    assert after.checkpoints == parent_history.checkpoints
    assert after.run == parent_history.run
    assert (await wf.resume("parent")).outputs == parent.outputs
    # Lineage both ways.
    child_history = await wf.history("child")
    assert (child_history.run.parent_run_id, child_history.run.parent_checkpoint_id) == (
        "parent",
        k.checkpoint_id,
    )
    assert child_history.checkpoints[0].parent_checkpoint_id == k.checkpoint_id
    assert [r.run_id for r in (await wf.history("parent")).forks] == ["child"]


@pytest.mark.parametrize("bad_id", ["a/b", "x" * 201, "two words", "caf\u00e9", "a?b=1"])
async def test_a_fork_is_named_as_every_door_names_a_run_or_refused(store, bad_id):
    """A fork's ``new_run_id`` follows the rule a started run's does (``RUN_ID_RULE``).

    Before, a fork took any text (``a/b``, 201 characters): a run the HTTP
    API cannot put in a URL's path, made by the one door that did not check.
    """
    wf = counting_workflow(store, Counter())
    await wf.run(Count(1), run_id="parent")
    with pytest.raises(ValueError, match="must be 1 to 200 letters"):
        await wf.run(Count(1), run_id=bad_id)  # as a start refuses it
    k = (await wf.history("parent")).checkpoints[3]
    with pytest.raises(ValueError, match="must be 1 to 200 letters") as refused:
        await wf.fork("parent", k.checkpoint_id, new_run_id=bad_id)
    assert repr(bad_id[:60]) in str(refused.value)
    assert [r.run_id for r in await store.list_runs()] == ["parent"]  # nothing stored


async def test_a_state_patch_that_is_no_mapping_is_refused_as_such(store):
    """A list given as a fork's patch was refused as "a state key is a str, not int":
    its items read as keys. It is refused for what it is, and nothing is stored."""
    wf = counting_workflow(store, Counter())
    await wf.run(Count(1), run_id="parent")
    k = (await wf.history("parent")).checkpoints[1]
    with pytest.raises(
        TypeError, match="state_patch must be a mapping of state key to value, got list"
    ):
        await wf.fork("parent", k.checkpoint_id, [1, 2], new_run_id="patched")
    assert [r.run_id for r in await store.list_runs()] == ["parent"]


def corrupt(path, checkpoint_id, transform) -> None:
    with sqlite3.connect(path) as db:
        (blob,) = db.execute(
            "SELECT blob FROM treadle_checkpoints WHERE checkpoint_id = ?", (checkpoint_id,)
        ).fetchone()
        db.execute(
            "UPDATE treadle_checkpoints SET blob = ? WHERE checkpoint_id = ?",
            (transform(bytes(blob)), checkpoint_id),
        )


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:40] + bytes([b[40] ^ 0x01]) + b[41:], id="one-flipped-byte"),
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
    ],
)
async def test_a_corrupt_newest_checkpoint_is_named_and_the_previous_still_resumes(
    tmp_path, damage
):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    calls: Counter = Counter()
    wf = counting_workflow(store, calls, last=6)
    expected = await counting_workflow(None, Counter(), last=6).run(Count(1))
    with pytest.raises(Exception, match="max_supersteps=4"):
        await wf.run(Count(1), run_id="r1", max_supersteps=4)
    history = await wf.history("r1")
    newest, previous = history.checkpoints[-1], history.checkpoints[-2]
    await store.close()
    corrupt(path, newest.checkpoint_id, damage)
    store = SqliteStore(path)
    wf = counting_workflow(store, calls, last=6)
    with pytest.raises(CheckpointCorruptError) as caught:
        await wf.resume("r1")
    assert (caught.value.run_id, caught.value.checkpoint_id) == ("r1", newest.checkpoint_id)
    assert "r1" in str(caught.value)
    assert newest.checkpoint_id in str(caught.value)
    result = await wf.resume("r1", previous.checkpoint_id)
    assert (result.outputs, result.state) == (expected.outputs, expected.state)
    await store.close()


class Detonator:
    """Unpickling this runs code: it would create the marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("payload_kind", ["pickle", "import-by-name-tag"])
async def test_a_hostile_checkpoint_is_refused_and_nothing_runs(tmp_path, payload_kind):
    path = tmp_path / "runs.sqlite"
    marker = tmp_path / "pwned"
    store = SqliteStore(path)
    calls: Counter = Counter()
    wf = counting_workflow(store, calls, last=3)
    await wf.run(Count(1), run_id="r1")
    newest = (await wf.history("r1")).checkpoints[-1]
    if payload_kind == "pickle":
        payload = pickle.dumps(Detonator(str(marker)))
    else:
        payload = json.dumps(
            {"__t": "dc", "n": "os.system", "v": {"command": f"touch {marker}"}}
        ).encode()
    await store.close()
    corrupt(path, newest.checkpoint_id, lambda _: seal(payload))
    store = SqliteStore(path)
    wf = counting_workflow(store, calls, last=3)
    calls.clear()
    with pytest.raises((SerializationError, CheckpointCorruptError)):
        await wf.resume("r1")
    assert not marker.exists()
    assert calls == Counter()
    await store.close()


async def test_resuming_with_a_changed_graph_is_refused_before_anything_runs(store):
    calls: Counter = Counter()
    wf = counting_workflow(store, calls, last=5)
    with pytest.raises(Exception, match="max_supersteps=2"):
        await wf.run(Count(1), run_id="r1", max_supersteps=2)
    changed = counting_workflow(store, calls, last=5, extra_edge=True)
    calls.clear()
    with pytest.raises(GraphChangedError) as caught:
        await changed.resume("r1")
    assert calls == Counter()
    text = str(caught.value)
    assert "executor 'spare' was added" in text
    assert "edge 'count' -> 'spare' was added" in text


async def test_retention_keeps_the_last_n_and_the_file_stops_growing(tmp_path):
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)

    @executor
    async def tick(msg: int, ctx: WorkflowContext[int]) -> None:
        ctx.state.set("blob", "x" * 2000)
        if msg < 1000:
            ctx.send_message(msg + 1)

    wf = WorkflowBuilder(start=tick, store=store).add_edge(tick, tick).build()

    def size() -> int:
        return sum(p.stat().st_size for p in tmp_path.glob("runs.sqlite*"))

    await wf.run(0, run_id="half", keep_last=10, max_supersteps=2000, record_events=False)
    half = size()
    await wf.run(0, run_id="full", keep_last=10, max_supersteps=2000, record_events=False)
    assert len((await wf.history("full")).checkpoints) == 10
    assert len((await wf.history("half")).checkpoints) == 10
    assert size() <= half * 1.3
    assert await wf.prune("full", 3) == 7
    await store.close()


class Tally(Executor):
    """Keeps a running list in a field; snapshots make it survive resume."""

    def __init__(self) -> None:
        super().__init__("tally")
        self.seen: list[int] = []

    def snapshot(self) -> list[int]:
        return list(self.seen)

    def restore(self, snapshot: list[int]) -> None:
        self.seen = list(snapshot)

    @handler
    async def on(self, msg: int, ctx: WorkflowContext[int]) -> None:
        self.seen.append(msg)
        if msg == 3 and ctx.state.get("crash", True):
            raise RuntimeError("crash after 3")
        if msg < 6:
            ctx.send_message(msg + 1)
        else:
            ctx.yield_output(self.seen)


async def test_executor_snapshots_carry_fields_across_resume(store):
    wf = WorkflowBuilder(start=Tally, store=store).add_edge("tally", "tally").build()
    with pytest.raises(ExecutorFailedError):
        await wf.run(1, run_id="r1")
    fixed = WorkflowBuilder(start=Tally, store=store).add_edge("tally", "tally").build()
    child = await fixed.fork(
        "r1", (await fixed.history("r1")).checkpoints[-1].checkpoint_id, {"crash": False}
    )
    result = await fixed.resume(child)
    # A fresh instance was restored with [1, 2] and went on from there.
    assert result.outputs == [[1, 2, 3, 4, 5, 6]]


def test_resume_sync_from_plain_code(tmp_path):
    import asyncio  # noqa: PLC0415

    store = SqliteStore(tmp_path / "runs.sqlite")
    calls: Counter = Counter()
    wf = counting_workflow(store, calls, last=4)
    with pytest.raises(Exception, match="max_supersteps=2"):
        wf.run_sync(Count(1), run_id="r1", max_supersteps=2)
    assert wf.resume_sync("r1").outputs == [10]
    asyncio.run(store.close())


@pytest.mark.parametrize("durability", ["background", "batched"])
async def test_each_durability_mode_gives_the_same_outcome_and_every_checkpoint(store, durability):
    calls: Counter = Counter()
    sync_result = await counting_workflow(store, calls).run(Count(1), run_id="sync")
    other = await counting_workflow(store, calls).run(
        Count(1), run_id=durability, durability=durability
    )
    assert (other.outputs, other.state) == (sync_result.outputs, sync_result.state)
    history = await counting_workflow(store, calls).history(durability)
    assert [c.superstep for c in history.checkpoints] == list(range(11))
    ids = [c.checkpoint_id for c in history.checkpoints]
    assert [c.parent_checkpoint_id for c in history.checkpoints] == [None, *ids[:-1]]
    assert history.run.status == "completed"
    assert other.last_checkpoint_id == ids[-1]


class HeldStore:
    """A real SqliteStore whose writes of checkpoints wait until the test lets them through."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.gate = asyncio.Event()
        self.called = asyncio.Event()
        self.batches: list[list[int]] = []  # the supersteps of each commit_many call

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    async def commit_many(self, checkpoints, *, keep_last=None, **owned):
        self.batches.append([c.info.superstep for c in checkpoints])
        self.called.set()
        await self.gate.wait()
        await self.store.commit_many(checkpoints, keep_last=keep_last, **owned)


@pytest.mark.parametrize(
    ("awaits", "held_batch", "batches_after"),
    [
        # Superstep 1's write starts while the run awaits, and hangs; 2..16 queue
        # behind it; 17 computes, then waits. What queued then goes in one call.
        (True, [1], [list(range(2, 18))]),
        # A run that never lets the loop run starts no write: 1..16 queue, 17 would
        # pass the limit, so all 17 go in one call, which hangs; then 17 at a time.
        (False, list(range(1, 18)), [list(range(18, 35)), list(range(35, 41))]),
    ],
    ids=["awaiting", "computing"],
)
async def test_batched_durability_runs_ahead_of_16_unwritten_checkpoints_and_no_further(
    store, awaits, held_batch, batches_after
):
    calls: Counter = Counter()
    held = HeldStore(store)
    wf = counting_workflow(held, calls, last=40, awaits=awaits)
    run = asyncio.create_task(wf.run(Count(1), run_id="held", durability="batched"))
    async with asyncio.timeout(10):
        await held.called.wait()  # the run row is created on the store's thread first
    for _ in range(300):  # then every chance to run further than it may
        await asyncio.sleep(0)
    assert max(calls) == 17
    assert held.batches == [held_batch]
    assert (await store.get_run("held")).superstep == 0  # nothing durable past the input
    held.gate.set()
    result = await run
    assert result.outputs == [sum(range(1, 41))]
    assert held.batches[1 : 1 + len(batches_after)] == batches_after
    assert [s for batch in held.batches for s in batch] == list(range(1, 41))
    history = await wf.history("held")
    assert [c.superstep for c in history.checkpoints] == list(range(41))


@pytest.mark.parametrize("awaits", [True, False], ids=["awaiting", "computing"])
async def test_background_durability_lets_one_checkpoint_wait_and_no_more(store, awaits):
    """A run awaiting gets each barrier's write started while it awaits; one computing
    writes two barriers a commit (one waited while the next computed): never two waiting."""
    calls: Counter = Counter()
    held = HeldStore(store)
    held.gate.set()
    wf = counting_workflow(held, calls, last=9, awaits=awaits)
    result = await wf.run(Count(1), run_id="bg", durability="background")
    assert result.outputs == [sum(range(1, 10))]
    if awaits:
        assert held.batches == [[s] for s in range(1, 10)]
    else:  # superstep 9 ends the run: it is written at once
        assert held.batches == [[1, 2], [3, 4], [5, 6], [7, 8], [9]]


async def test_a_sync_run_awaits_each_commit_in_its_own_task(store, monkeypatch):
    """No task is made per commit: the run's task writes its barrier itself, then goes on."""
    committed_by: list[object] = []
    commit_many = type(store).commit_many

    async def recorded(self, *args, **kw):
        committed_by.append(asyncio.current_task())
        return await commit_many(self, *args, **kw)

    monkeypatch.setattr(type(store), "commit_many", recorded)
    wf = counting_workflow(store, Counter(), last=4)
    run = asyncio.ensure_future(wf.run(Count(1), run_id="own-task"))
    result = await run
    assert result.outputs == [10]
    assert committed_by  # every superstep's commit, the last included
    assert set(committed_by) == {run}
