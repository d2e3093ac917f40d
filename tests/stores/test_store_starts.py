"""Start policies as every store decides them: deduplication, caps per key and workflow, debounce.

The races between processes are in ``tests/workflow/test_start_races.py``;
here one caller at a time shows what each decision is, on every backend.
"""

from __future__ import annotations

import json

import pytest

from treadle._exceptions import RunExistsError, StartRefusedError
from treadle._stores._starts import StartRequest
from treadle._values._actors import Actor

T0 = 1_700_000_000.0


def start(run_id, *, workflow="wf", payload=b'"in"', **policy):
    return StartRequest(run_id, workflow, 1, payload, **policy)


async def test_a_second_start_with_a_deduplication_id_finds_the_first_run(store):
    alice, bob = (Actor("python", name, "python") for name in ("alice", "bob"))
    first = await store.admit(
        start("r1", dedup_id="order-7", started_by=alice.encode()), actor=alice
    )
    again = await store.admit(start("r2", dedup_id="order-7", started_by=bob.encode()), actor=bob)
    other = await store.admit(start("r3", workflow="other", dedup_id="order-7"))
    assert (first.outcome, first.run_id) == ("started", "r1")
    assert (again.outcome, again.run_id) == ("deduplicated", "r1")
    assert (other.outcome, other.run_id) == ("started", "r3")  # ids are per workflow
    row = await store.get_run("r1")
    assert (row.status, json.loads(row.started_by)["name"]) == ("pending", "alice")
    with pytest.raises(Exception, match="r2"):
        await store.get_run("r2")
    assert [entry.action for entry in await store.read_audit()] == ["run_created"]


async def test_a_singleton_queues_or_refuses_a_second_start_of_its_key(store):
    one = {"per_key": 1, "at": T0}
    holder = await store.admit(start("a", key="k", **one), owner="me", duration=30)
    queued = await store.admit(start("b", key="k", **one))
    elsewhere = await store.admit(start("c", key="other", **one))
    assert (holder.outcome, holder.lease.owner, holder.lease.epoch) == ("started", "me", 1)
    assert (queued.outcome, queued.status) == ("queued", "queued")
    assert elsewhere.outcome == "started"
    with pytest.raises(StartRefusedError, match="'a'") as refused:
        await store.admit(start("d", key="k", refuse=True, **one))
    assert (refused.value.key, refused.value.holding, refused.value.cap) == ("k", ("a",), "key")
    with pytest.raises(Exception, match="d"):
        await store.get_run("d")  # nothing was written
    assert await store.admit_queued(["wf"], T0 + 1, limit=10) == 0  # a still holds k
    await store.cancel("a")
    assert await store.admit_queued(["wf"], T0 + 1, limit=10) == 1
    assert (await store.get_run("b")).status == "pending"
    assert await store.admit_queued(["wf"], T0 + 1, limit=10) == 0


async def test_queued_starts_are_admitted_first_come_first_as_slots_free(store):
    cap = {"concurrency": 2, "at": T0}
    outcomes = [(await store.admit(start(f"r{i}", key=f"k{i}", **cap))).outcome for i in range(5)]
    assert outcomes == ["started", "started", "queued", "queued", "queued"]
    await store.cancel("r0")
    # A new start finds the freed slot taken by the first in line: it queues behind.
    late = await store.admit(start("late", **cap))
    assert late.outcome == "queued"
    assert (await store.get_run("r2")).status == "pending"
    await store.cancel("r1")
    await store.cancel("r2")
    assert await store.admit_queued(["wf"], T0 + 1, limit=10) == 2
    statuses = {r: (await store.get_run(r)).status for r in ["r3", "r4", "late"]}
    assert statuses == {"r3": "pending", "r4": "pending", "late": "queued"}


async def test_debounce_keeps_the_last_input_and_waits_for_a_quiet_window(store):
    window = {"debounce": 5.0}
    ids = set()
    for offset, payload in enumerate([b'"one"', b'"two"', b'"three"']):
        made = await store.admit(
            start(f"r{offset}", key="k", payload=payload, at=T0 + offset, **window)
        )
        assert (made.outcome, made.status) == ("debounced", "queued")
        ids.add(made.run_id)
    assert ids == {"r0"}
    other = await store.admit(start("x", key="other", at=T0, **window))
    assert other.run_id == "x"
    assert await store.admit_queued(["wf"], T0 + 6, limit=10) == 1  # x's window passed, not r0's
    assert (await store.get_run("r0")).status == "queued"
    assert await store.admit_queued(["wf"], T0 + 7, limit=10) == 1
    assert (await store.get_run("r0")).status == "pending"
    assert [item.payload for item in await store.inbox("r0")] == [b'"three"']


async def test_a_service_starts_an_admitted_run_its_starter_left(store):
    left = await store.admit(start("r1", per_key=1), owner="dead", duration=0.0)
    assert left.outcome == "started"
    claimed = await store.claim_starts(["wf"], "service", 30, T0, limit=10)
    assert [(c.lease.run_id, c.lease.owner, c.lease.epoch, c.workflow) for c in claimed] == [
        ("r1", "service", 2, "wf")
    ]
    assert await store.claim_starts(["wf"], "other", 30, T0, limit=10) == []  # held now
    assert await store.claim_starts(["elsewhere"], "other", 30, T0, limit=10) == []
    # A timer service's claim leaves admitted runs to claim_starts.
    assert await store.claim("timers", 30, T0, limit=10) == []


async def test_a_start_with_a_taken_run_id_is_refused(store):
    await store.admit(start("r1", dedup_id="a"))
    with pytest.raises(RunExistsError):
        await store.admit(start("r1", dedup_id="b"))
