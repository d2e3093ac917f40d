"""Who keeps a run's lease: whoever drives the run, not the process.

Each driver of runs owns a :class:`LeaseKeeper`: a ``Runtime``, the
server's driver, a CLI command, a worker; a run nobody drives (a lone
``workflow.run`` with a store, a stream) gets one of its own. The keeper
renews the leases it holds from one heartbeat, in its driver's task group
(or, for a run of its own, in a task the run's release cancels), and
detaching is by keeper: stopping one driver detaches the runs *it* holds,
while a second driver in the same process goes on untouched.

Runs find their driver's keeper in two ways: given in their ``Launch``
(the server opens a run in a request's task, then drives it in its own),
or as the keeper of the task they run in (:meth:`LeaseKeeper.driving`), so
public entry points such as ``Workflow.run`` need no argument for it. The
context variable holds no table of runs: each task sees the keeper of the
driver that started it, and nothing outlives its driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING

from treadle._exceptions import DurabilityError
from treadle._tasks import cancel_and_wait, stop_if_cancelled

if TYPE_CHECKING:
    from collections.abc import Iterator

    from treadle._checkpoints._ownership import Ownership

_DRIVING: ContextVar[LeaseKeeper | None] = ContextVar("treadle_lease_keeper", default=None)


class LeaseKeeper:
    """The leases one driver holds, renewed by one heartbeat, detached together.

    Args:
        group: The driver's task group, where the heartbeat runs; ``None``
            for a keeper of one run, whose heartbeat task :meth:`close`
            cancels.

    Holding a run costs a set insertion: the heartbeat starts only once the
    first renewal could be due, so a run that rests or ends sooner (nearly
    every one) never wakes it.
    """

    def __init__(self, group: asyncio.TaskGroup | None = None) -> None:
        self._group = group
        self._held: set[Ownership] = set()
        self._beating: asyncio.Task[None] | None = None
        self._due: asyncio.TimerHandle | None = None
        self._closed = False

    @staticmethod
    def current() -> LeaseKeeper | None:
        """The keeper of the driver whose task this is (``None``: no driver)."""
        return _DRIVING.get()

    @contextlib.contextmanager
    def driving(self) -> Iterator[LeaseKeeper]:
        """Runs opened in this block (and the tasks it starts) are held by this keeper."""
        token = _DRIVING.set(self)
        try:
            yield self
        finally:
            _DRIVING.reset(token)

    @property
    def held(self) -> frozenset[str]:
        """The ids of the runs whose leases this keeper holds now."""
        return frozenset(ownership.lease.run_id for ownership in self._held)

    def hold(self, ownership: Ownership) -> None:
        """Renew ``ownership``'s lease until it lets go (:meth:`let_go`, on its close).

        A keeper whose driver has stopped detaches it instead: the run is
        left as it stands, for whoever takes it up next.
        """
        if self._closed:
            ownership.detach(DurabilityError("the driver of this run has stopped"))
            return
        self._held.add(ownership)
        ownership.keeper = self
        if self._beating is None and self._due is None:
            loop = asyncio.get_running_loop()
            due_in = max(ownership.renewal_at() - time.time(), 0.0)
            self._due = loop.call_later(due_in, self._start_beating)

    def let_go(self, ownership: Ownership) -> None:
        """Stop renewing ``ownership``'s lease (it was released, lost or detached)."""
        self._held.discard(ownership)

    def detach(self, reason: str) -> list[str]:
        """Detach every run this keeper holds (its driver stops); return their ids.

        Their further writes are refused, so each run stays as last
        committed and resumable; its ownership then gives the lease up as
        the run unwinds. Runs of other keepers are left alone.
        """
        detached = []
        for ownership in list(self._held):
            ownership.detach(DurabilityError(reason))
            detached.append(ownership.lease.run_id)
        return detached

    async def close(self) -> None:
        """Stop the heartbeat; the keeper holds nothing more."""
        self._closed = True
        due, self._due = self._due, None
        if due is not None:
            due.cancel()
        beating, self._beating = self._beating, None
        if beating is not None:
            await cancel_and_wait(beating)

    def _start_beating(self) -> None:
        self._due = None
        if self._closed or not self._held:
            return
        if self._group is not None:
            self._beating = self._group.create_task(self._beat(), name="treadle-leases")
        else:
            loop = asyncio.get_running_loop()
            self._beating = loop.create_task(self._beat(), name="treadle-leases")

    async def _beat(self) -> None:
        """Renew every lease a third of which has passed, a sixth of a lease apart."""
        try:
            while self._held:
                stop_if_cancelled()  # lost below (see treadle._tasks): close() would wait
                now = time.time()
                due = [ownership for ownership in self._held if ownership.renewal_due(now)]
                if due:
                    await asyncio.gather(*(ownership.renew() for ownership in due))
                if not self._held:
                    break
                await asyncio.sleep(min(ownership.duration for ownership in self._held) / 6)
        finally:
            self._beating = None
