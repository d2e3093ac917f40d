"""Start policies from ``treadle.workers``' client: decided by the store, served by workers.

A client with no workflow code gives the policy (and its key) as plain
values; what it queues, a worker starts when its turn comes.
"""

from __future__ import annotations

import pytest
import scale_app

import treadle.workers
from treadle import StartPolicy
from treadle.errors import StartRefusedError
from treadle.workers import Worker


async def test_a_client_deduplicates_and_queues_and_a_worker_serves_the_queue(store):
    client = treadle.workers.Client(store)  # no workflow code here: plain JSON inputs
    first = await client.start("asker", "one?", deduplication_id="form-1")
    again = await client.start("asker", "two?", deduplication_id="form-1")
    assert again == first
    assert (await client.get(first)).status == "pending"  # admitted: ready for a worker
    singleton = StartPolicy(singleton=True)
    held = await client.start("napper", {"seconds": 0}, start_policy=singleton, key="acme")
    waiting = await client.start("napper", {"seconds": 0}, start_policy=singleton, key="acme")
    assert (await client.get(waiting)).status == "queued"
    refuse = StartPolicy(singleton=True, when_busy="refuse")
    with pytest.raises(StartRefusedError) as refused:
        await client.start("napper", {"seconds": 0}, start_policy=refuse, key="acme")
    assert refused.value.holding == (held,)
    worker = Worker(store, [scale_app.asker, scale_app.napper], lease=2.0, poll_interval=0.05)
    await worker.run_until_idle()
    assert (await client.get(first)).status == "awaiting_input"
    assert (await client.get(held)).status == "completed"
    await worker.run_until_idle()  # the queued one's turn came as the first ended
    assert (await client.get(waiting)).status == "completed"
