"""The checkpoints of the runs a timer service claimed, read a batch at a time.

A service claims up to a thousand due runs in one statement, then continues
them a few at a time (``Runtime.wake_due``'s ``concurrency``). Each needs
its run row, graph and latest checkpoint: read one by one, that is a round
trip to the store's reader per run, which for a run that wakes, takes one
superstep and ends is as much as the rest of its wake-up. So the rows are
read for a chunk of the claimed runs at once (``load_claimed``), when the
first of them comes to be continued, and handed out as each is.

Read under the claim's leases, the rows cannot be moved on meanwhile by
anyone else: a commit needs the lease. A chunk is no larger than the number
of runs continued at once, so the rows read ahead are few, and a run asked
for out of turn (or gone from the store) is simply read alone.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._store import Claims
    from treadle._workflow._runs import Resumable


class ClaimReads:
    """The resumable rows of a batch of claimed runs, read a chunk at a time, in claim order."""

    def __init__(self, store: Claims, run_ids: Sequence[str], chunk: int) -> None:
        self._store = store
        self._ids = list(run_ids)
        self._position = {run_id: index for index, run_id in enumerate(self._ids)}
        self._chunk = max(chunk, 1)
        self._next = 0  # the first claimed run not read yet
        self._read: dict[str, Resumable] = {}
        self._lock = asyncio.Lock()

    async def take(self, run_id: str) -> Resumable | None:
        """The run's rows, read with its chunk (``None``: read it alone, as before)."""
        read = self._read.pop(run_id, None)
        if read is not None:  # its chunk was read already: no lock to wait on
            return read
        index = self._position.get(run_id)
        if index is None:
            return None
        async with self._lock:  # one read per chunk, however many runs ask at once
            if index >= self._next:
                end = max(index + 1, self._next + self._chunk)
                wanted, self._next = self._ids[self._next : end], end
                for loaded in await self._store.load_claimed(wanted):
                    self._read[loaded[0].run_id] = loaded
        return self._read.pop(run_id, None)
