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
the run up) is answered, as ``treadle requests`` counts it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from treadle._engine._metrics import StoreGauges
from treadle._exceptions import RunNotFoundError, TreadleError
from treadle._operations._requests import ASKING, workflow_for
from treadle._operations._schemas import answered_in_inbox

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
        asking = [run for status in ASKING for run in await self.store.list_runs(status=status)]
        for run in asking:
            key = (run.run_id, run.checkpoint_id)
            request_ids = self._asked.get(key)
            if request_ids is None:
                request_ids = await self._requests_of(run)
            asked[key] = request_ids
            if not request_ids:
                continue
            answered = await answered_in_inbox(self.store, run.run_id)
            waiting = sum(1 for r in request_ids if r not in answered)
            if waiting and not await self._still_at(run.run_id, key[1]):
                # A commit came between the listing and the inbox read (an answer applied
                # takes the request and its answer at once): the next reading counts it.
                continue
            if waiting:
                open_requests[run.workflow] += waiting
                oldest = max(oldest or 0.0, now - run.updated_at)
        self._asked = asked  # forget the checkpoints no longer latest
        due = await self.store.count_due_runs(now)  # counted by the store, none read here
        return StoreGauges(by_status, dict(open_requests), oldest, due)

    async def _still_at(self, run_id: str, checkpoint_id: str | None) -> bool:
        """Whether the run's latest checkpoint is still ``checkpoint_id`` (not so if deleted)."""
        try:
            return (await self.store.get_run(run_id)).checkpoint_id == checkpoint_id
        except RunNotFoundError:
            return False

    async def _requests_of(self, run: RunRecord) -> tuple[str, ...]:
        """The requests a run's latest checkpoint waits on (none if it cannot be read)."""
        try:
            workflow = await workflow_for(self.store, run, None, self.workflows)
            record = await self.store.load_checkpoint(run.run_id)
            restored = workflow.codec.decode(record, run_id=run.run_id)
        except TreadleError:
            return ()
        return tuple(r.request_id for r in restored.waits.pending_requests())
