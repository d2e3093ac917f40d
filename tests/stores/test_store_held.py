"""``Store.held_claimable`` and ``load_claimed`` on every backend: a timer service's reads.

A service reads the leases it would wait out to take a run at once from an
owner it knows is dead (``tests/cli/test_cli_sqlite_worker.py`` shows that
through the command), and the runs it claimed a batch at a time.
"""

from __future__ import annotations

from stores.test_store_suite import T0, commit_many, new_run


async def test_held_claimable_lists_the_current_leases_on_runs_a_claim_would_take(store):
    await new_run(store, "mid-run", first="c1")  # running
    await new_run(store, "due", first="c2", status="waiting", wake_at=T0)
    await new_run(store, "resting", first="c3", status="waiting", wake_at=T0 + 100)
    await new_run(store, "orphan", first="c4")  # running, nobody's lease
    await new_run(store, "done", first="c5", status="completed")
    held = {
        run_id: await store.acquire(run_id, f"host:{n}:tag", 30)
        for n, run_id in enumerate(["mid-run", "due", "resting", "done"])
    }
    found = await store.held_claimable(T0 + 1, limit=10)
    assert sorted((h.run_id, h.owner, h.epoch) for h in found) == [
        ("due", held["due"].owner, held["due"].epoch),
        ("mid-run", held["mid-run"].owner, held["mid-run"].epoch),
    ]
    assert len(await store.held_claimable(T0 + 1, limit=1)) == 1
    # Taken from its holder and let go, a run is the claim's, not held any more.
    taken = await store.acquire("mid-run", "service", 30, replacing=held["mid-run"].owner)
    assert await store.release(taken)
    assert [h.run_id for h in await store.held_claimable(T0 + 1, limit=10)] == ["due"]
    claimed = await store.claim("service", 30, T0 + 1, limit=10)
    assert sorted(c.lease.run_id for c in claimed) == ["mid-run", "orphan"]


async def test_load_claimed_reads_what_load_resumable_would_for_each_run_in_order(store):
    for n in range(3):
        await new_run(store, f"run-{n}", first=f"c{n}", status="waiting", wake_at=T0)
    await commit_many(store, "run-1", ["d1", "d2"])  # its latest is d2, not its first
    wanted = ["run-2", "ghost", "run-0", "run-1"]
    loaded = await store.load_claimed(wanted)
    assert [row.run_id for row, _, _ in loaded] == ["run-2", "run-0", "run-1"]  # ghost left out
    for found in loaded:
        assert found == await store.load_resumable(found[0].run_id)
    assert loaded[2][2] is not None
    assert loaded[2][2].info.checkpoint_id == "d2"
    assert await store.load_claimed([]) == []
