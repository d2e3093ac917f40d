"""The store's gauges, read when a scraper asks: runs by status, open requests, timers due.

These are facts about the store, not about a process: read at scrape time,
every process exposing them (``treadle serve``, each ``treadle worker``)
answers the same, however many processes share the store, and nothing is
lost when one restarts (see ``docs/observing.md``).

Runs by workflow and status are counted by the store (``run_counts``), so
a scrape reads a few rows however many runs there are. Open requests live
in each waiting run's latest checkpoint, which only its workflow reads; a
:class:`GaugeReader` keeps what it decoded per checkpoint, so a scrape
decodes only the runs that moved since the last one. A request
whose answer waits in the run's inbox (on PostgreSQL, until a worker takes
the run up) is answered, as ``treadle requests`` counts it; the store reads
those answers for every asking run at once (``answers_waiting``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from treadle._engine._metrics import StoreGauges
from treadle._exceptions import TreadleError
from treadle._operations._requests import ASKING, workflow_for

if TYPE_CHECKING:
    from treadle._stores._store import RunRecord, Store
    from treadle._workflow._versions import Hosted


class GaugeReader:
    """Reads :class:`StoreGauges` from one store, remembering decoded checkpoints.

    Args:
        store: The store to read.
        workflows: Workflows already loaded (a server's ``--app``, a
            worker's); others are loaded from where each run records it.
    """

    def __init__(self, store: Store, workflows: Hosted | None = None) -> None:
        self.store = store
        self.workflows = workflows
        # (run id, checkpoint id) -> the ids of the requests that checkpoint waits on.
        self._asked: dict[tuple[str, str | None], tuple[str, ...]] = {}

    async def read(self, now: float) -> StoreGauges:
        """The gauges as the store stands now (``now``: seconds since the epoch)."""
        # Counted by the store: listing every run to count them read the whole table into
        # the process at each scrape (a million runs outlasted a scrape's timeout).
        by_status = await self.store.run_counts()
        open_requests: Counter[str] = Counter()
        oldest: float | None = None
        asked: dict[tuple[str, str | None], tuple[str, ...]] = {}
        asking = await self._asking()
        for run in asking.values():
            key = (run.run_id, run.checkpoint_id)
            request_ids = self._asked.get(key)
            if request_ids is None:
                request_ids = await self._requests_of(run)
            asked[key] = request_ids
        self._asked = asked  # forget the checkpoints no longer latest
        # Reads for every asking run at once, not a few for each: thousands of runs
        # resting on approvals made thousands of reads a scrape.
        asking_ids = [run_id for (run_id, _), request_ids in asked.items() if request_ids]
        answered = await self.store.answers_waiting(asking_ids)
        # A commit between the listing and the inbox read (an answer applied takes the
        # request and its answer at once) moved the run on: the next reading counts it.
        still = await self._asking()
        for (run_id, checkpoint_id), request_ids in asked.items():
            now_at = still.get(run_id)
            if now_at is None or now_at.checkpoint_id != checkpoint_id:
                continue
            waiting = sum(1 for r in request_ids if r not in answered.get(run_id, ()))
            if waiting:
                open_requests[now_at.workflow] += waiting
                oldest = max(oldest or 0.0, now - now_at.updated_at)
        due = await self.store.count_due_runs(now)  # counted by the store, none read here
        return StoreGauges(by_status, dict(open_requests), oldest, due)

    async def _asking(self) -> dict[str, RunRecord]:
        """The runs resting where a request may ask, by id (one listing per such status)."""
        listed = [run for status in ASKING for run in await self.store.list_runs(status=status)]
        return {run.run_id: run for run in listed}

    async def _requests_of(self, run: RunRecord) -> tuple[str, ...]:
        """The requests a run's latest checkpoint waits on (none if it cannot be read)."""
        try:
            workflow = await workflow_for(self.store, run, None, self.workflows)
            record = await self.store.load_checkpoint(run.run_id)
            restored = workflow.codec.decode(record, run_id=run.run_id)
        except TreadleError:
            return ()
        return tuple(r.request_id for r in restored.waits.pending_requests())
