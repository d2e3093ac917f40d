"""Checkpoints stored as what changed: every loaded checkpoint is the state a full snapshot gives.

The property test drives the real checkpointer and codec against every store
through random sequences of supersteps (values set, lists grown, values
mutated and set again, keys deleted, outputs, snapshots), forks, prunes and
resumes from random checkpoints, and keeps, beside it, a deep copy of every
barrier it saved: the state a full-snapshot implementation would store.
Every kept checkpoint must load as exactly that, and the store must hold
no piece that no kept checkpoint needs.
"""

from __future__ import annotations

import copy
import operator
import shutil
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from store_backends import on_backends
from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._checkpoints._checkpointer import Checkpointer
from treadle._checkpoints._codec import CheckpointCodec
from treadle._engine._barrier import BarrierState
from treadle._engine._result import RunStatus
from treadle._engine._waits import WaitBook
from treadle._exceptions import CheckpointNotFoundError
from treadle._stores._memory import MemoryStore
from treadle._stores._store import CheckpointInfo, CheckpointRecord, Piece, RunRecord
from treadle._values._serialization import JsonSerializer
from treadle.errors import CheckpointCorruptError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

T0 = 1_700_000_000.0
KEYS = ("n", "log", "notes")
FINGERPRINT = "f" * 16


def barrier(run_id, superstep, state, outputs, written):
    return BarrierState(
        run_id=run_id,
        superstep=superstep,
        status=RunStatus.RUNNING,
        pending={},
        fan_in_buffers=(),
        state=state,
        iterations={},
        outputs=tuple(outputs),
        waits=WaitBook(),
        written=None if written is None else frozenset(written),
    )


async def stored_pieces(store) -> set[str]:
    """Every piece id the store holds, whatever the backend."""
    if isinstance(store, MemoryStore):
        return set(store._pieces._pieces)
    return {row[0] for row in await store._select("SELECT piece_id FROM treadle_pieces", ())}


async def needed_pieces(store, run_ids) -> set[str]:
    """The pieces the kept checkpoints of these runs need: what they name and all that extends."""
    needed: set[str] = set()
    for run_id in run_ids:
        for info in await store.list_checkpoints(run_id):
            record = await store.load_checkpoint(run_id, info.checkpoint_id)
            needed |= {piece.piece_id for piece in record.pieces}
            assert set(record.refs) <= needed
    return needed


@dataclass
class Head:
    """One run going on through one checkpointer, as a loop would drive it."""

    run_id: str
    checkpointer: Checkpointer
    state: dict[str, Any]
    outputs: list[Any]
    snapshots: dict[str, Any]
    superstep: int


@dataclass
class Scenario:
    store: Any
    codec: CheckpointCodec = field(default_factory=lambda: CheckpointCodec(JsonSerializer()))
    heads: dict[str, Head] = field(default_factory=dict)
    expected: dict[str, tuple[dict[str, Any], list[Any], dict[str, Any]]] = field(
        default_factory=dict
    )
    forks: int = 0

    def remember(self, checkpoint_id, state, outputs, snapshots):
        self.expected[checkpoint_id] = copy.deepcopy((dict(state), list(outputs), snapshots))

    async def start(self, run_id):
        state = {"n": 0, "log": ["first"]}
        checkpointer = Checkpointer(self.store, self.codec, FINGERPRINT)
        first = barrier(run_id, 0, state, [], None)
        checkpoint_id = await checkpointer.create("wf", b"graph", first, {})
        self.remember(checkpoint_id, state, [], {})
        self.heads[run_id] = Head(run_id, checkpointer, state, [], {}, 0)

    async def step(self, run_id, changes, outputs, snapshot):
        head = self.heads.get(run_id)
        if head is None:
            return
        state, written = dict(head.state), set()
        for kind, key, value in changes:
            current = state.get(key)
            written.add(key)
            if kind == "set":
                state[key] = value
            elif kind == "append" and isinstance(current, list):
                state[key] = current + [f"{key}-{head.superstep}-{i}" for i in range(value)]
            elif kind == "mutate" and isinstance(current, list):
                current.append(f"mutated-{head.superstep}")  # then set as the same object
            elif kind == "delete":
                state.pop(key, None)
            elif kind == "same" and key in state:
                pass  # set again to the very same object
            else:
                written.discard(key)
        head.outputs = head.outputs + [f"out-{head.superstep}-{i}" for i in range(outputs)]
        if snapshot is not None:
            head.snapshots = {"exec": {"seen": snapshot}}
        head.superstep += 1
        saved = barrier(run_id, head.superstep, state, head.outputs, written)
        try:
            checkpoint_id = await head.checkpointer.save(saved, head.snapshots)
        except CheckpointNotFoundError as error:
            refused = error.checkpoint_id
        else:
            refused = None
        if refused is not None:
            # It went on from a checkpoint that a prune deleted meanwhile.
            assert refused not in await self.kept(run_id)
            del self.heads[run_id]
            return
        head.state = state
        self.remember(checkpoint_id, state, head.outputs, head.snapshots)

    async def kept(self, run_id):
        return [info.checkpoint_id for info in await self.store.list_checkpoints(run_id)]

    async def load(self, run_id, checkpoint_id):
        record = await self.store.load_checkpoint(run_id, checkpoint_id)
        return self.codec.decode(record, run_id=run_id)

    async def branch(self, run_id, pick, patch, *, fork):
        kept = await self.kept(run_id)
        restored = await self.load(run_id, kept[pick % len(kept)])
        checkpointer = Checkpointer(self.store, self.codec, FINGERPRINT, base=restored)
        if not fork:  # time travel: the run goes on from the older checkpoint
            state = restored.state
            self.heads[run_id] = Head(
                run_id,
                checkpointer,
                state,
                list(restored.outputs),
                restored.snapshots,
                restored.superstep,
            )
            return
        self.forks += 1
        new_id = f"{run_id}.fork{self.forks}"
        state = {**restored.state, "n": patch}
        first = BarrierState(
            run_id=new_id,
            superstep=restored.superstep,
            status=RunStatus.RUNNING,
            pending={},
            fan_in_buffers=(),
            state=state,
            iterations={},
            outputs=tuple(restored.outputs),
            waits=WaitBook(),
            written=frozenset({"n"}),
        )
        checkpoint_id = await checkpointer.create(
            "wf", b"graph", first, restored.snapshots, parent_run_id=run_id
        )
        self.remember(checkpoint_id, state, restored.outputs, restored.snapshots)
        self.heads[new_id] = Head(
            new_id, checkpointer, state, list(restored.outputs), restored.snapshots, 0
        )
        self.heads[new_id].superstep = restored.superstep

    async def check(self):
        """Every kept checkpoint loads as what was saved; no piece is stored that none needs."""
        runs = [run.run_id for run in await self.store.list_runs()]
        for run_id in runs:
            for checkpoint_id in await self.kept(run_id):
                restored = await self.load(run_id, checkpoint_id)
                got = (restored.state, restored.outputs, restored.snapshots)
                assert got == self.expected[checkpoint_id], (run_id, checkpoint_id)
        assert await stored_pieces(self.store) == await needed_pieces(self.store, runs)


values = st.one_of(st.integers(-3, 3), st.lists(st.sampled_from(["x", "y"]), max_size=3))
changes = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(KEYS), values),
        st.tuples(
            st.sampled_from(["append", "append", "mutate"]),
            st.sampled_from(KEYS),
            st.integers(0, 3),
        ),
        st.tuples(st.sampled_from(["delete", "same"]), st.sampled_from(KEYS), st.none()),
    ),
    max_size=3,
)
runs = st.sampled_from(["r1", "r2"])
operations = st.one_of(
    *[st.tuples(st.just("step"), runs, changes, st.integers(0, 2), st.none() | st.integers(0, 2))]
    * 4,
    st.tuples(st.just("fork"), runs, st.integers(0, 50), st.integers(10, 20)),
    st.tuples(st.just("resume"), runs, st.integers(0, 50)),
    st.tuples(st.just("prune"), runs, st.integers(1, 3)),
)


def loaded_checkpoints_property(max_examples: int):
    """The property at a budget of examples (hypothesis fixes the budget as it decorates)."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        steps=st.lists(operations, min_size=5, max_size=30), keep_last=st.none() | st.integers(2, 4)
    )
    # A list appended to in place, set again, then copied: the stored items, not the mutated one.
    @example(
        steps=[
            ("resume", "r1", 0),
            ("step", "r1", [("mutate", "log", 0), ("append", "log", 0)], 0, None),
        ],
        keep_last=None,
    )
    async def check(make_store, steps, keep_last):
        # Each example closes its own store: left to the fixture, a PostgreSQL run of
        # the property would hold every example's connections until the test ends.
        scenario = Scenario(make_store(keep_last=keep_last))
        try:
            await scenario.start("r1")
            await scenario.start("r2")
            for name, run_id, *args in steps:
                if name == "step":
                    await scenario.step(run_id, *args)
                elif name in ("fork", "resume"):
                    await scenario.branch(
                        run_id, args[0], args[1] if args[1:] else 0, fork=name == "fork"
                    )
                else:
                    await scenario.store.prune(run_id, args[0])
                    await scenario.check()
            await scenario.check()
        finally:
            await scenario.store.close()

    return check


# 60 examples on memory and SQLite. PostgreSQL pays a round trip per call and a schema
# per example (17 s for 60 on a quiet machine): 15 in the default suite, 60 under soak.
test_every_loaded_checkpoint_equals_the_full_snapshot = on_backends("memory", "sqlite")(
    loaded_checkpoints_property(60)
)
test_every_loaded_checkpoint_equals_the_full_snapshot_on_postgres = on_backends("postgres")(
    loaded_checkpoints_property(15)
)
test_every_loaded_checkpoint_equals_the_full_snapshot_on_postgres_at_full_budget = pytest.mark.soak(
    on_backends("postgres")(loaded_checkpoints_property(60))
)


# --- what a store does with pieces ---------------------------------------------------


def piece(piece_id, extends=None):
    return Piece(piece_id, extends, f"content of {piece_id}".encode())


def record(run_id, checkpoint_id, superstep, refs, pieces=(), parent=None, requires=()):
    info = CheckpointInfo(checkpoint_id, run_id, superstep, "running", parent, T0 + superstep)
    return CheckpointRecord(info, b"frame", tuple(refs), tuple(pieces), tuple(requires))


async def create(store, run_id, first, parent=None):
    run = RunRecord(run_id, "wf", "running", 0, None, parent, None, T0, T0)
    await store.create_run(run, b"graph", first)


async def test_a_checkpoint_loads_with_the_pieces_it_names_and_all_they_extend(store):
    await create(store, "r", record("r", "c0", 0, ["a"], [piece("a")]))
    await store.commit(record("r", "c1", 1, ["b", "k"], [piece("b", "a"), piece("k")]))
    await store.commit(record("r", "c2", 2, ["c", "k"], [piece("c", "b")]))
    loaded = await store.load_checkpoint("r", "c2")
    assert loaded.refs == ("c", "k")
    assert sorted(loaded.pieces, key=lambda p: p.piece_id) == [
        piece("a"),
        piece("b", "a"),
        piece("c", "b"),
        piece("k"),
    ]
    _, _, first = await store.load_resumable("r", "c0")
    assert first.pieces == (piece("a"),)


async def test_retention_deletes_only_the_pieces_no_kept_checkpoint_needs(store):
    # "v" is replaced at c2 (its old piece is garbage once c0 and c1 go); the list
    # a <- b <- c keeps growing, so its older pieces stay; "k" never changes.
    await create(
        store, "r", record("r", "c0", 0, ["v0", "a", "k"], [piece(p) for p in ("v0", "a", "k")])
    )
    await store.commit(record("r", "c1", 1, ["v0", "b", "k"], [piece("b", "a")]))
    await store.commit(record("r", "c2", 2, ["v2", "c", "k"], [piece("v2"), piece("c", "b")]))
    assert await stored_pieces(store) == {"v0", "a", "k", "b", "v2", "c"}
    assert await store.prune("r", 1) == 2
    assert await stored_pieces(store) == {"a", "k", "b", "v2", "c"}
    # A list set anew (d does not extend c): the old chain goes with the last checkpoint naming it.
    await store.commit(record("r", "c3", 3, ["v2", "d", "k"], [piece("d")]), keep_last=1)
    assert await stored_pieces(store) == {"k", "v2", "d"}


async def test_a_fork_keeps_its_parents_pieces_when_the_parent_is_pruned(store):
    await create(store, "p", record("p", "c0", 0, ["a", "v"], [piece("a"), piece("v")]))
    await store.commit(record("p", "c1", 1, ["b", "w"], [piece("b", "a"), piece("w")]))
    # The fork branches from c0 and grows the list from there: it names a and v.
    await create(
        store,
        "f",
        record("f", "f0", 0, ["x", "v"], [piece("x", "a")], parent="p", requires=["a", "v"]),
        parent="p",
    )
    await store.commit(record("p", "c2", 2, ["b", "w"]), keep_last=1)
    assert await store.prune("p", 1) == 0
    assert await stored_pieces(store) == {"a", "v", "b", "w", "x"}
    assert {p.piece_id for p in (await store.load_checkpoint("f")).pieces} == {"a", "v", "x"}
    await store.commit(record("f", "f1", 1, ["y"], [piece("y")]), keep_last=1)
    assert await stored_pieces(store) == {"a", "b", "w", "y"}  # a still extended by b


async def test_a_commit_that_requires_a_pruned_piece_is_refused_and_changes_nothing(store):
    await create(store, "r", record("r", "c0", 0, ["v0"], [piece("v0")]))
    await store.commit(record("r", "c1", 1, ["v1"], [piece("v1")]))
    await store.prune("r", 1)  # v0 goes with c0
    late = record("r", "c2", 2, ["v0", "n"], [piece("n")], parent="c0", requires=["v0"])
    with pytest.raises(CheckpointNotFoundError, match=r"c0.*pruned.*v0") as raised:
        await store.commit(late)
    assert (raised.value.run_id, raised.value.checkpoint_id) == ("r", "c0")
    assert (await store.get_run("r")).checkpoint_id == "c1"
    assert await stored_pieces(store) == {"v1"}


# --- a corrupt piece, through the public API -----------------------------------------


def notebook():
    @executor
    async def write(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.state.set("log", [f"line {n}"])
        if n == 1:
            ctx.state.set("title", "a notebook")
        ctx.yield_output(n)
        if n < 4:
            ctx.send_message(n + 1)

    return (
        WorkflowBuilder(write, name="notebook")
        .add_edge(write, write)
        .add_state("log", default=[], reducer=operator.add)
        .build()
    )


async def test_a_corrupt_piece_is_named_and_checkpoints_not_needing_it_still_resume(tmp_path):
    original = tmp_path / "store.sqlite"
    workflow = notebook()
    store = SqliteStore(original)
    run = await workflow.run(1, store=store)
    checkpoints = [
        c.checkpoint_id for c in (await workflow.history(run.run_id, store=store)).checkpoints
    ]
    needs = {
        checkpoint_id: {
            p.piece_id for p in (await store.load_checkpoint(run.run_id, checkpoint_id)).pieces
        }
        for checkpoint_id in checkpoints
    }
    await store.close()
    with sqlite3.connect(original) as db:
        pieces = [row[0] for row in db.execute("SELECT piece_id FROM treadle_pieces")]
    assert len(pieces) >= 10  # log items, the title, outputs: one or more per superstep
    for piece_id in pieces:
        copy = tmp_path / f"{piece_id}.sqlite"
        shutil.copyfile(original, copy)
        with sqlite3.connect(copy) as db:
            (blob,) = db.execute(
                "SELECT blob FROM treadle_pieces WHERE piece_id = ?", (piece_id,)
            ).fetchone()
            flipped = bytearray(blob)
            flipped[-1] ^= 0x01  # one bit of the content
            db.execute(
                "UPDATE treadle_pieces SET blob = ? WHERE piece_id = ?", (bytes(flipped), piece_id)
            )
        store = SqliteStore(copy)
        try:
            users = [c for c in checkpoints if piece_id in needs[c]]
            assert users, f"piece {piece_id} is stored but no checkpoint needs it"
            for checkpoint_id in checkpoints:
                if checkpoint_id in users:
                    with pytest.raises(CheckpointCorruptError) as raised:
                        await workflow.resume(run.run_id, checkpoint_id, store=store)
                    assert f"piece {piece_id} (" in str(raised.value)
                    assert raised.value.checkpoint_id == checkpoint_id
                else:
                    resumed = await workflow.resume(run.run_id, checkpoint_id, store=store)
                    assert resumed.status.value == "completed"
                    assert resumed.state["log"] == [f"line {n}" for n in range(1, 5)]
        finally:
            await store.close()


async def test_a_growing_list_costs_storage_linear_in_its_items(tmp_path):
    # 400 supersteps each append a distinct 1 KB line: 0.4 MB of data. Rewriting the
    # list at every checkpoint would store 80 MB; what changed stores each line once.
    path = tmp_path / "store.sqlite"
    line = "x" * 1_000

    @executor
    async def grow(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.state.set("log", [f"{n:04d}{line}"])
        ctx.state.set("count", n)
        if n < 400:
            ctx.send_message(n + 1)

    workflow = (
        WorkflowBuilder(grow, name="grow", max_supersteps=500)
        .add_edge(grow, grow)
        .add_state("log", default=[], reducer=operator.add)
        .build()
    )
    store = SqliteStore(path)
    run = await workflow.run(1, store=store)
    await store.close()
    assert len(run.state["log"]) == 400
    with sqlite3.connect(path) as db:
        frames = [
            length
            for (length,) in db.execute(
                "SELECT length(blob) FROM treadle_checkpoints ORDER BY superstep"
            )
        ]
        stored = db.execute("SELECT SUM(length(blob)), COUNT(*) FROM treadle_pieces").fetchone()
    assert max(frames[-50:]) <= max(frames[1:51]) + 16  # longer numbers; nothing of the list
    # Each superstep stores its line and its count once, plus a few hundred bytes of framing.
    assert stored[1] == 2 * 400 + 1
    assert stored[0] < 400 * 1_300
    size = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name.startswith("store"))
    assert size < 2_000_000, size


async def test_a_message_scheduled_across_many_supersteps_is_stored_once_and_delivered(tmp_path):
    # A reminder scheduled at superstep 1 for an hour later waits through 40 more
    # supersteps: once it is seen unchanged it is one piece the frames name, and
    # every checkpoint still carries it (resume from any of them delivers it).
    path = tmp_path / "store.sqlite"
    clock = FakeClock(start=1_000.0)

    @executor(id="work")
    async def work(n: int, ctx: WorkflowContext[int | str]) -> None:
        if n == 1:
            ctx.schedule_message("reminder " + "r" * 2_000, after=3_600, target="remind")
        if n < 40:
            ctx.send_message(n + 1, target="work")

    @executor(id="remind")
    async def remind(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.yield_output(text[:8])

    workflow = (
        WorkflowBuilder(work, name="reminders", clock=clock)
        .add_edge(work, work)
        .add_edge(work, remind)
        .build()
    )
    store = SqliteStore(path)
    try:
        rested = await workflow.run(1, store=store)
        assert rested.status.value == "waiting"
        history = await workflow.history(rested.run_id, store=store)
        await clock.advance(3_600)
        for info in (history.checkpoints[5], history.checkpoints[-1]):
            resumed = await workflow.resume(rested.run_id, info.checkpoint_id, store=store)
            assert resumed.outputs == ["reminder"], info.superstep
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        frames = [
            length for (length,) in db.execute("SELECT length(blob) FROM treadle_checkpoints")
        ]
    # The 2 KB reminder sits in the frame of the barrier that scheduled it, then in one piece.
    assert sum(1 for length in frames if length > 2_000) == 1, frames
