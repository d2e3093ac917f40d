"""One owner per run: the lease a process holds while it advances a run.

Every run with a store advances under an :class:`Ownership`: a lease taken
from the store (``create_run`` for a new run, ``acquire`` for a stored
one, or handed over by a timer service's ``claim``), renewed by a heartbeat
while the run computes, and given up with the commit that brings the run to
rest. Every write the run makes carries the lease, so a process that lost
it (paused past its lease, cancelled, taken over) commits nothing.

Renewing is the business of whoever drives the run: its
:class:`~treadle._checkpoints._leases.LeaseKeeper` holds the ownership,
renews it, and detaches it when that driver stops (a CLI command on
Ctrl-C, a server, a runtime): its writes are refused from then on, so
nothing is recorded as cancelled, and its lease is given up so that
``resume`` or a timer service takes the run over at once from its last
checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from typing import TYPE_CHECKING

from treadle._engine._errors import RunCancelledError
from treadle._exceptions import DurabilityError, LeaseLostError, RunBusyError
from treadle._stores._store import Lease
from treadle._values._actors import Actor
from treadle._values._ids import random_bits

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from treadle._checkpoints._leases import LeaseKeeper
    from treadle._stores._store import CheckpointRecord, EventEntry, RunRecord, Store


_HOST = socket.gethostname()


def new_owner() -> str:
    """An owner name for one lease: ``host:pid:tag``, so ``treadle runs`` can say who holds it."""
    return f"{_HOST}:{os.getpid()}:{random_bits(24):06x}"


def owner_is_dead(owner: str) -> bool:
    """Whether ``owner`` names a process on this host that no longer exists.

    Only ever ``True`` when that is certain, so a lease is never taken from
    a live process; an owner on another host is judged by its lease alone.
    """
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, owned by someone else
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet is dead too (state ``Z``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:  # noqa: PTH123 - one small read
            return stat.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def lease_duration(store: Store) -> float:
    """The lease a store's runs are held with (its ``lease`` setting)."""
    return store.lease


class Ownership:
    """A held lease on one run and the writes made under it.

    Args:
        store: The store the run lives in.
        lease: The lease held.
        duration: Seconds each renewal extends it by.
    """

    def __init__(self, store: Store, lease: Lease, duration: float) -> None:
        self.store = store
        self.lease = lease
        self.duration = duration
        self.consumed: int | None = None  # inbox items applied, marked with the next commit
        self.seen = 0  # the newest inbox item read by the run's loop (see Leases.release)
        self.detached: DurabilityError | None = None
        self.released = False
        self.keeper: LeaseKeeper | None = None  # renews the lease while the run is driven

    def __repr__(self) -> str:
        """Name the run, the owner and the epoch: what tells two ownerships apart."""
        lease = self.lease
        return f"Ownership({lease.run_id!r}, owner={lease.owner!r}, epoch={lease.epoch})"

    @classmethod
    async def acquire(
        cls, store: Store, run_id: str, *, wait: bool = False, actor: Actor | None = None
    ) -> Ownership:
        """Take the run's lease; with ``wait``, until its current owner lets go.

        With ``actor``, taking it is a resume, which the store records.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: Another process holds a current lease (without ``wait``).
        """
        duration = lease_duration(store)
        replacing = None
        while True:
            try:
                lease = await store.acquire(
                    run_id, new_owner(), duration, replacing=replacing, actor=actor
                )
            except RunBusyError as busy:
                if replacing != busy.owner and owner_is_dead(busy.owner):
                    replacing = busy.owner  # its process is gone: no need to wait out the lease
                    continue
                replacing = None
                if not wait:
                    raise
                # The owner releases when its run rests, or its lease runs out.
                pause = min(max(busy.lease_until - time.time(), 0.01), 0.05)
                await asyncio.sleep(pause)
                continue
            return cls(store, lease, duration)

    @classmethod
    def new(cls, store: Store, run_id: str) -> Ownership:
        """The lease a new run is created with (epoch 1), before ``create_run`` writes it."""
        duration = lease_duration(store)
        return cls(store, Lease(run_id, new_owner(), 1, time.time() + duration), duration)

    def renewal_at(self) -> float:
        """When a third of the lease will have passed since it was taken or last renewed."""
        return self.lease.until - self.duration * 2 / 3

    def renewal_due(self, now: float) -> bool:
        """Whether a third of the lease has passed since it was taken or last renewed."""
        live = not (self.released or self.detached)
        return live and now >= self.renewal_at()

    async def renew(self) -> None:
        """Extend the lease (a heartbeat); a lost lease detaches, a store outage waits."""
        try:
            self.lease = await self.store.renew(self.lease, self.duration)
        except LeaseLostError as lost:
            self.detach(lost)
        except DurabilityError:
            pass  # the store is down: the next beat tries again

    def detach(self, reason: DurabilityError) -> None:
        """Refuse every later write with ``reason``: the run stays as last committed."""
        if self.detached is None:
            self.detached = reason

    # --- writes under the lease ------------------------------------------------------

    async def create_run(self, run: RunRecord, graph: bytes, first: CheckpointRecord) -> None:
        """Create the run owned by this lease."""
        self._check()
        await self.store.create_run(run, graph, first, lease=self.lease)

    def commit_many(
        self,
        checkpoints: Sequence[CheckpointRecord],
        *,
        keep_last: int | None,
        release: bool,
        immediate: bool = False,
    ) -> Awaitable[bool]:
        """Commit under the lease, marking applied inbox items; ``release``: give it up too.

        Returns the store's own awaitable (no task of its own: this is every
        superstep's path), which gives ``True`` when the commit paused the
        run (someone asked to; the lease went with it); whoever awaits it
        reports the outcome back with :meth:`committed` or :meth:`lost`.
        """
        self._check()
        consumed, self.consumed = self.consumed, None
        return self.store.commit_many(
            checkpoints,
            keep_last=keep_last,
            lease=self.lease,
            consumed=consumed,
            release=release,
            immediate=immediate,
        )

    def committed(self, *, released: bool) -> None:
        """A commit made through :meth:`commit_many` is durable (and gave the lease up)."""
        if released:
            self.released = True

    async def lost(self, error: LeaseLostError) -> DurabilityError | RunCancelledError:
        """A write was fenced off: refuse everything from now on; the error to raise."""
        self.detach(error)
        return await self._why_lost(error)

    async def set_status(
        self,
        status: str,
        error: str | None,
        *,
        release: bool,
        events: Sequence[EventEntry] = (),
    ) -> None:
        """Record a status (and its events) under the lease; quietly nothing once detached."""
        if self.detached is not None:
            return
        await self._settle(
            self.store.set_status(
                self.lease.run_id, status, error, lease=self.lease, release=release, events=events
            ),
            release=release,
        )

    async def refuse_inbox(
        self, refusals: Sequence[tuple[int, str]], actor: Actor | None = None
    ) -> None:
        """Take inbox items this owner cannot apply out of the run's inbox, each on the record.

        ``refusals``: (seq, reason) of each. ``actor``: on whose behalf, when
        a door's caller set the takeover going (an answerer, a resume): the
        record names them and their door. Without, it names this process
        (its lease's owner) as the service that refused them.
        """
        self._check()
        if actor is None:
            actor = Actor.service(self.lease.owner, door="worker")
        try:
            await self.store.refuse_inbox(self.lease, refusals, actor)
        except LeaseLostError as error:
            raise await self.lost(error) from None

    async def park(self, reason: str) -> None:
        """Set the run aside with ``reason`` and give the lease up (see ``Store.park``)."""
        self._check()
        await self._settle(self.store.park(self.lease, reason), release=True)

    async def _settle(self, done: Awaitable[None], *, release: bool) -> None:
        try:
            await done
        except LeaseLostError as error:
            raise await self.lost(error) from None
        self.committed(released=release)

    async def _why_lost(self, lost: LeaseLostError) -> DurabilityError | RunCancelledError:
        with contextlib.suppress(DurabilityError):
            if (await self.store.get_run(self.lease.run_id)).status == "cancelled":
                return RunCancelledError(self.lease.run_id)
        return lost

    def _check(self) -> None:
        if self.detached is not None:
            raise self.detached

    async def close(self) -> None:
        """Leave the keeper and give the lease up, unless that happened already."""
        keeper, self.keeper = self.keeper, None
        if keeper is not None:
            keeper.let_go(self)
        if self.released or isinstance(self.detached, LeaseLostError):
            return
        self.released = True
        with contextlib.suppress(DurabilityError):  # the lease then simply runs out
            await self.store.release(self.lease, seen=self.seen)
