"""Each overlap policy with a run slower than its schedule's interval, on a fake clock.

The schedule ticks every 2 seconds; each run rests on a durable timer of 5
seconds before it ends, so it is still going at the next two ticks. The
clock moves to each second and a ``Runtime`` serves the store there: what
each tick did is read from the record of ticks and the runs' rows.
"""

from __future__ import annotations

import pytest

from treadle import Runtime, Schedule, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock

START = 1_800_000_001.5  # half a second before a tick of every 2 s


def slow_workflow():
    @executor(id="slow")
    async def slow(text: str, ctx: WorkflowContext) -> None:
        await ctx.sleep(5)
        ctx.yield_output(text)

    return WorkflowBuilder(start=slow, name="slow").build()


async def serve_until(overlap: str, until: float, store) -> dict[int, tuple[str, str | None]]:
    """Serve each second to ``until`` after the first tick; each tick's (action, run status)."""
    clock = FakeClock(START)
    workflow = slow_workflow()
    runtime = Runtime(store, [workflow], clock=clock)
    schedule = Schedule(workflow, every=2, overlap=overlap, input="{nominal_utc}")
    await runtime.schedules.create(schedule)
    first = START + 0.5
    for second in range(int(until) + 1):
        await clock.advance_to(first + second)
        await runtime.wake_due()
    ticks = await runtime.schedules.ticks("slow", limit=100)
    return {int(t.nominal_at - first): (t.action, t.run_status) for t in ticks}


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_skip_records_the_ticks_of_a_running_run_as_skipped(backend, tmp_path) -> None:
    store = MemoryStore() if backend == "memory" else SqliteStore(tmp_path / "runs.db")
    ticks = await serve_until("skip", 12, store)
    # 0 runs until 5; 2 and 4 come while it goes; 6 starts (until 11); 8 and 10 skip; 12 starts.
    assert {k: a for k, (a, _) in ticks.items()} == {
        0: "started", 2: "skipped", 4: "skipped", 6: "started",
        8: "skipped", 10: "skipped", 12: "started",
    }  # fmt: skip
    assert ticks[0][1] == ticks[6][1] == "completed"
    await store.close()


async def test_allow_starts_every_tick_and_the_runs_overlap() -> None:
    ticks = await serve_until("allow", 8, MemoryStore())
    assert sorted(ticks) == [0, 2, 4, 6, 8]
    assert all(action == "started" for action, _ in ticks.values())
    # At 8, the runs of 4, 6 and 8 are all still going: three at once.
    assert [k for k, (_, status) in sorted(ticks.items()) if status == "completed"] == [0, 2]


async def test_buffer_one_starts_one_held_tick_when_the_run_ends_and_skips_the_rest() -> None:
    ticks = await serve_until("buffer_one", 14, MemoryStore())
    # 0 runs until 5; 2 is held, 4 skipped; 2 starts at 6 (until 11), while 6 is held and
    # 8, 10 skipped; 6 starts at 12 and holds 12; 14 is skipped.
    assert {k: a for k, (a, _) in ticks.items()} == {
        0: "started", 2: "started", 4: "skipped", 6: "started",
        8: "skipped", 10: "skipped", 14: "skipped",
    }  # fmt: skip
    info = await _info("buffer_one", 14)
    assert [int(b.timestamp() - START - 0.5) for b in info.buffered] == [12]


async def test_buffer_all_starts_every_held_tick_one_after_another() -> None:
    ticks = await serve_until("buffer_all", 16, MemoryStore())
    # Every tick starts, none skipped, each only after the one before ended.
    assert {k for k, (a, _) in ticks.items() if a == "started"} == {0, 2, 4}
    assert all(action == "started" for action, _ in ticks.values())
    info = await _info("buffer_all", 16)
    assert [int(b.timestamp() - START - 0.5) for b in info.buffered] == [6, 8, 10, 12, 14, 16]


async def test_cancel_other_cancels_the_running_run_and_starts() -> None:
    ticks = await serve_until("cancel_other", 8, MemoryStore())
    assert {k: s for k, (_, s) in ticks.items()} == {
        0: "cancelled", 2: "cancelled", 4: "cancelled", 6: "cancelled", 8: "waiting",
    }  # fmt: skip


async def _info(overlap: str, until: float):
    """The schedule after serving ``until``, on a store of its own."""
    store = MemoryStore()
    clock = FakeClock(START)
    workflow = slow_workflow()
    runtime = Runtime(store, [workflow], clock=clock)
    await runtime.schedules.create(Schedule(workflow, every=2, overlap=overlap, input="x"))
    for second in range(int(until) + 1):
        await clock.advance_to(START + 0.5 + second)
        await runtime.wake_due()
    return await runtime.schedules.get("slow")


async def test_a_triggered_run_is_the_latest_the_next_ticks_overlap_applies_to() -> None:
    clock = FakeClock(START)
    workflow = slow_workflow()
    runtime = Runtime(MemoryStore(), [workflow], clock=clock)
    await runtime.schedules.create(
        Schedule(workflow, every=2, overlap="cancel_other", input="{nominal_utc}")
    )
    triggered = await runtime.schedules.trigger("slow")  # a run now, its timer of 5 s going
    await runtime.wake_due()
    assert (await runtime.store.get_run(triggered)).status == "waiting"
    await clock.advance_to(START + 0.5)  # the first tick: the triggered run is still going
    await runtime.wake_due()
    assert (await runtime.store.get_run(triggered)).status == "cancelled"
    ticks = await runtime.schedules.ticks("slow", limit=10)
    assert [(t.source, t.action) for t in ticks] == [
        ("schedule", "started"),
        ("trigger", "started"),
    ]
    await runtime.store.close()
