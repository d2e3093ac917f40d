"""The open-requests gauge reads the store a few times a scrape, however many runs ask.

Open requests live in each waiting run's latest checkpoint; an answer a
client delivered waits in the run's inbox until its owner applies it, and
counts as given. A scrape read each asking run's inbox and row again, one
by one: thousands of runs resting on approvals made thousands of reads at
every scrape. Here the reads a scrape makes are counted, on every backend.
"""

from __future__ import annotations

from collections import Counter

import metrics_app
import pytest

from treadle._operations._gauges import GaugeReader
from treadle._workflow._versions import Hosted
from treadle.workers import Client

ASKING = 40
ANSWERED = 15


class Counting:
    """The store, counting the calls a reader makes of it by name."""

    def __init__(self, store) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str):
        found = getattr(self.store, name)
        if not callable(found):
            return found

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return found(*args, **kwargs)

        return counted


async def test_a_scrape_reads_the_asking_runs_at_once_and_counts_answers_waiting(store):
    asked = {}
    for number in range(ASKING):
        result = await metrics_app.approval.run(f"topic {number}", store=store)
        asked[result.run_id] = result.pending_requests[0].request_id
    client = Client(store)  # answers delivered, none applied: no worker runs
    for run_id in list(asked)[:ANSWERED]:
        await client.respond(run_id, {asked[run_id]: True})
    counting = Counting(store)
    reader = GaugeReader(counting, Hosted([metrics_app.approval]))

    first = await reader.read(now=0.0)
    assert first.open_requests == {"approval": ASKING - ANSWERED}
    counting.calls.clear()
    again = await reader.read(now=0.0)  # every checkpoint decoded already
    assert again.open_requests == {"approval": ASKING - ANSWERED}
    reads = sum(counting.calls.values())
    assert reads <= 8, counting.calls  # before: two reads for each of the 40 runs
    assert counting.calls["answers_waiting"] == 1


@pytest.mark.parametrize("answered", [0, 3])
async def test_a_store_lists_the_answers_waiting_in_the_inboxes_of_the_runs_asked_about(
    store,
    answered,
):
    asked = {}
    for number in range(4):
        result = await metrics_app.approval.run(f"topic {number}", store=store)
        asked[result.run_id] = result.pending_requests[0].request_id
    ids = list(asked)
    client = Client(store)
    for run_id in ids[:answered]:
        await client.respond(run_id, {asked[run_id]: False})
    waiting = await store.answers_waiting([*ids, "no-such-run"])
    assert waiting == {run_id: {asked[run_id]} for run_id in ids[:answered]}
    assert await store.answers_waiting(ids[answered:]) == {}
    assert await store.answers_waiting([]) == {}
