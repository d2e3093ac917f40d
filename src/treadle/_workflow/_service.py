"""The embedded runtime: one store, one clock, and the timers of every run.

A run that rests on a durable timer lives only in its store; something must
wake it when the timer falls due — also if the process that set the timer
has died since. ``Runtime`` is that something for the embedded set-up: it
knows the workflows by name, *claims* from the store the runs that need
taking up (a due timer or deadline, an answer delivered and not applied, or
an orphan whose owner died mid-run), each with a lease, and continues each
under it. ``treadle worker`` processes play the same part on PostgreSQL.

It may host several versions of a workflow: each run goes on with the
version it records, and new runs take the newest. A claimed run it cannot
load (a workflow or version it was not given, a changed graph, a corrupt
checkpoint) is *parked*: set aside with the reason, logged once,
and not claimed again until a ``resume`` takes it up; every other run goes
on being served.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._leases import LeaseKeeper
from treadle._checkpoints._ownership import Ownership, lease_duration, new_owner, owner_is_dead
from treadle._engine._clock import SystemClock
from treadle._engine._errors import RunCancelledError, WorkflowRunError
from treadle._engine._options import RunOptions
from treadle._exceptions import (
    CheckpointCorruptError,
    DurabilityError,
    GraphChangedError,
    RunBusyError,
    RunNotFoundError,
    RunPausedError,
    SerializationError,
    TreadleError,
)
from treadle._stores._store import checked_store
from treadle._tasks import close_group, each_at_most, stop_if_cancelled
from treadle._values._text import error_text
from treadle._workflow._claim_reads import ClaimReads
from treadle._workflow._driving import continue_taken, drive
from treadle._workflow._launch import Launch
from treadle._workflow._limit_board import LimitBoard
from treadle._workflow._runs import take_over
from treadle._workflow._schedule_actions import Schedules
from treadle._workflow._tick_runs import OpeningStarter
from treadle._workflow._ticker import HeldBack, serve_schedules
from treadle._workflow._versions import Hosted

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
    from types import TracebackType

    from treadle._checkpoints._codec import RestoredRun
    from treadle._engine._clock import Clock
    from treadle._engine._metrics import Metrics
    from treadle._engine._result import RunResult
    from treadle._graph._limits import CallLimit
    from treadle._stores._store import Claimed, Lease, Store
    from treadle._workflow._tick_runs import Drive
    from treadle._workflow._workflow import Workflow

logger = logging.getLogger("treadle.runtime")

# What makes a run impossible to continue here, whatever is retried: park it.
_UNLOADABLE = (GraphChangedError, CheckpointCorruptError, SerializationError)
_CLAIM_BATCH = 1000
WAKE_CONCURRENCY = 64
"""How many runs ``wake_due`` continues at once by default.

Their commits share a transaction and an fsync (group commit), so the
batch a commit joins grows with it: waking 4,000 parked runs on SQLite
took some 20% less CPU a run at 64 than at 16, and no less at 128 or 256
(``benchmarks/engines/treadle.py``'s ``idle_runs``). Flow control bounds
what the woken handlers may do at once (see ``docs/flow-control.md``).
"""


class Runtime:
    """Runs workflows on a store and wakes their timers when they fall due.

    Args:
        store: Where runs live (``SqliteStore`` for the embedded set-up).
        workflows: The workflows whose runs it may resume, found by name and
            version (any number of versions of one name).
        clock: The time source (``treadle.testing.FakeClock`` in tests).
        poll_interval: How often :meth:`serve` asks the store for due runs.
        metrics: Where the runs it continues report (``docs/observing.md``).
        limits: The call limits its runs share (``CallLimit``; see
            ``docs/flow-control.md``): a name declared here wins over a
            workflow's own declaration of it, and a workflow that leaves a
            limit to its host must find it here.

    Use ``async with Runtime(...) as runtime:`` to run the timer service in
    the background for the block's duration, or call :meth:`wake_due`
    yourself (a cron job, a test).
    """

    def __init__(
        self,
        store: Store,
        workflows: Iterable[Workflow],
        *,
        clock: Clock | None = None,
        poll_interval: float = 1.0,
        metrics: Metrics | None = None,
        limits: Iterable[CallLimit] = (),
    ) -> None:
        self.store = checked_store(store)
        self.metrics = metrics
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.poll_interval = poll_interval
        self._held_back = HeldBack()  # schedules it failed to serve (see serve_schedules)
        self.hosted = Hosted(workflows)
        self.limits = LimitBoard(limits)
        for hosted in self.hosted.all():
            self.limits.check(hosted)
        self._group: asyncio.TaskGroup | None = None
        self._service: asyncio.Task[None] | None = None
        self._leases: LeaseKeeper | None = None  # the runs it drives in its block

    def workflow(self, name: str, version: int | None = None) -> Workflow:
        """Version ``version`` of the workflow named ``name`` (``None``: the newest hosted).

        Raises:
            AppLoadError: It is not hosted here (a ``LookupError``).
        """
        return self.hosted.find(name, version)

    async def start(
        self, workflow: Workflow | str, message: Any, *, version: int | None = None, **options: Any
    ) -> RunResult:
        """Start a run on this runtime's store and clock; return when it rests or ends.

        A name starts the newest version hosted, unless ``version`` names another.
        Inside the runtime's ``async with`` block the runtime drives it:
        leaving the block detaches it, as the runs it wakes. ``options`` are
        :meth:`Workflow.run`'s, ``start_policy`` and ``deduplication_id``
        included: a start that waits its turn returns ``QUEUED`` at once, and
        this runtime (or any service of the store) starts it when its turn comes.
        """
        chosen = self.workflow(workflow, version) if isinstance(workflow, str) else workflow
        driving = self._leases.driving() if self._leases is not None else contextlib.nullcontext()
        with driving, self.limits.declaring():
            return await chosen.run(message, store=self.store, clock=self.clock, **options)

    async def wake_due(
        self, *, limit: int | None = None, concurrency: int = WAKE_CONCURRENCY
    ) -> list[RunResult]:
        """Continue every run that needs taking up now; return their results.

        That is: runs whose timer or deadline is due, runs delivered an
        answer or message nobody applied, and orphans (``running`` with no
        current owner); never a paused run. Each is claimed with a lease
        first, so two services (or a service and a ``resume``) never
        continue one run twice. Up to ``concurrency`` runs continue at
        once. Results come in claim order, earliest due first.

        A run that fails (its deadline passed, a handler raised) is recorded
        as ``FAILED`` in the store and reported in the list like any other.
        A run this runtime cannot load is parked with the reason (see the
        module docstring) and left out of the list.
        """
        if concurrency < 1:
            msg = f"concurrency must be at least 1, got {concurrency}"
            raise ValueError(msg)
        if self._leases is not None:
            return await self._wake_due(self._leases, limit, concurrency)
        leases = LeaseKeeper()  # called outside the block: a keeper of this call's own
        try:
            return await self._wake_due(leases, limit, concurrency)
        finally:
            await leases.close()

    async def _wake_due(
        self, leases: LeaseKeeper, limit: int | None, concurrency: int
    ) -> list[RunResult]:
        duration = lease_duration(self.store)
        batch = _CLAIM_BATCH if limit is None else limit
        results: list[RunResult | None] = []
        # One value for every run this call continues: options are immutable, and
        # made (checks included) and laid over a workflow's defaults once, not per run.
        options = RunOptions(clock=self.clock, record_events=False, metrics=self.metrics)

        # A claim's lease is kept from the claim on, not from when a slot frees: a batch
        # claims up to a thousand runs, and one driven past its lease would be fenced
        # out of its own first write (a call's line, its commit) by its own lateness.
        # Runs that never started (the call was cancelled) give theirs up at the end.
        async def wake(
            index: int, claimed: Claimed, ownership: Ownership, reads: ClaimReads
        ) -> None:
            try:
                results[index] = await self._continue_claimed(claimed, ownership, reads, options)
            finally:
                await ownership.close()

        async def start(index: int, claimed: Claimed, ownership: Ownership) -> None:
            try:
                results[index] = await self._start_admitted(claimed, ownership)
            finally:
                await ownership.close()

        async def drive_tick(index: int, drive: Drive) -> None:
            results[index] = await drive()

        starting = await self.store.claim_starts(
            self.hosted.names(), new_owner(), duration, self.clock.now(), limit=batch
        )
        results.extend([None] * len(starting))
        held = [self._hold(leases, one.lease, duration) for one in starting]
        try:
            with self._driving(leases):
                await each_at_most(
                    concurrency,
                    [
                        functools.partial(start, index, one, ownership)
                        for index, (one, ownership) in enumerate(zip(starting, held, strict=True))
                    ],
                )
        finally:
            await _let_go(held)

        await self._let_go_for_the_dead(duration, batch)
        ticked = await self._tick(leases, options)  # the schedules' due ticks: their runs opened
        while True:  # without a limit, batch after batch until nothing more is due
            claimed = await self.store.claim(new_owner(), duration, self.clock.now(), limit=batch)
            offset = len(results)
            results.extend([None] * (len(claimed) + len(ticked)))
            reads = ClaimReads(self.store, [one.lease.run_id for one in claimed], concurrency)
            held = [self._hold(leases, one.lease, duration) for one in claimed]
            jobs: list[Callable[[], Coroutine[Any, Any, None]]] = [
                functools.partial(wake, index, one, ownership, reads)
                for index, (one, ownership) in enumerate(zip(claimed, held, strict=True), offset)
            ]
            jobs.extend(
                functools.partial(drive_tick, index, drive)
                for index, drive in enumerate(ticked, start=offset + len(claimed))
            )
            try:
                with self._driving(leases):
                    await each_at_most(concurrency, jobs)
            finally:
                await _let_go(held)
            ticked = []
            if limit is not None or len(claimed) < batch:
                break
        return [result for result in results if result is not None]

    @contextlib.contextmanager
    def _driving(self, leases: LeaseKeeper) -> Iterator[None]:
        """Tasks made in this block drive their runs under ``leases`` and this runtime's limits.

        Each task copies the context it is made in: set here once, around the
        tasks' creation (nothing awaited), rather than entered in every task.
        """
        with leases.driving(), self.limits.declaring():
            yield

    async def _tick(self, leases: LeaseKeeper, options: RunOptions) -> list[Drive]:
        """Decide the hosted workflows' schedules' due ticks; the drives of the runs opened.

        ``options``: the one value of the ``wake_due`` call, which the runs it
        wakes share too (a workflow keeps the settings of one options value).
        """
        starter = OpeningStarter(self.store, self.hosted, options, leases)
        with leases.driving():
            await serve_schedules(
                self.store,
                self.hosted.names(),
                self.clock.now(),
                starter,
                held_back=self._held_back,
                grace=self.poll_interval,  # it comes to a tick up to a poll after its time
            )
        return starter.opened

    @property
    def schedules(self) -> Schedules:
        """The store's schedules, changed as this program (on this runtime's clock)."""
        return Schedules(self.store, clock=self.clock)

    async def _let_go_for_the_dead(self, duration: float, limit: int) -> None:
        """Give up the leases of owners known dead, so that this round's claim takes their runs.

        A process on this host that no longer exists (killed, crashed) will
        never renew its leases: ``resume`` does not wait them out
        (``owner_is_dead``), and neither does a service. Each is taken from its
        dead owner (a new epoch fences it out) and let go at once, so the run
        is claimed by the ordinary rules, by whichever service comes first.
        """
        for held in await self.store.held_claimable(self.clock.now(), limit=limit):
            if not owner_is_dead(held.owner):
                continue
            logger.info(
                "run %s: its owner %s is dead (no such process on this host); "
                "taking the run over without waiting out its lease",
                held.run_id,
                held.owner,
            )
            try:
                lease = await self.store.acquire(
                    held.run_id, new_owner(), duration, replacing=held.owner
                )
            except (RunBusyError, RunNotFoundError, RunPausedError):
                continue  # another service was quicker, or the run went meanwhile
            await self.store.release(lease)

    def _log_claim(self, lease: Lease, restored: RestoredRun, delivered: bool) -> None:
        if restored.status == "running":
            why = "orphaned: its owner died or let go mid-run"
        elif restored.deadline_at is not None and restored.deadline_at <= self.clock.now():
            why = "its deadline passed"
        elif delivered:
            why = "delivered to"
        else:
            why = "its timer is due"
        logger.info(
            "claimed run %s epoch %d status %s superstep %d (%s)",
            lease.run_id,
            lease.epoch,
            restored.status,
            restored.superstep,
            why,
        )

    def _hold(self, leases: LeaseKeeper, lease: Lease, duration: float) -> Ownership:
        """A claim's ownership, its lease renewed by ``leases`` (leaving the block detaches it)."""
        ownership = Ownership(self.store, lease, duration)
        leases.hold(ownership)
        return ownership

    async def _continue_claimed(
        self, claimed: Claimed, ownership: Ownership, reads: ClaimReads, options: RunOptions
    ) -> RunResult | None:
        lease, name = claimed.lease, claimed.workflow
        workflow = self.hosted.get(name, claimed.version)
        try:
            loaded = await reads.take(lease.run_id)  # read with its chunk of the claim
            if workflow is None:
                await self._park(ownership, self._not_hosted(name, claimed.version))
                return None
            try:
                taken = await take_over(
                    workflow,
                    self.store,
                    lease.run_id,
                    ownership=ownership,
                    read_inbox=claimed.delivered,
                    loaded=loaded,
                )
            except _UNLOADABLE as error:
                await self._park(ownership, error_text(error))
                return None
            except RunCancelledError:
                return None  # cancelled between the claim and the read
            self._log_claim(lease, taken.restored, claimed.delivered)
            try:
                result = await continue_taken(workflow, taken, self.store, options)
            except WorkflowRunError as error:
                logger.info(
                    "run %s failed at superstep %d: %s: %s",
                    lease.run_id,
                    error.result.superstep,
                    type(error).__name__,
                    error,
                )
                return error.result
            except TreadleError as error:
                # Not raised: the other runs go on; what went wrong is in the store and the log.
                logger.warning("run %s: %s", lease.run_id, error)
                return None
            logger.info("run %s %s at superstep %d", lease.run_id, result.status, result.superstep)
            return result
        finally:
            await ownership.close()

    async def _start_admitted(self, claimed: Claimed, ownership: Ownership) -> RunResult | None:
        """Start a run its start policy admitted, from the input its inbox holds."""
        lease = claimed.lease
        workflow = self.hosted.get(claimed.workflow, claimed.version or None)
        try:
            if workflow is None:
                await self._park(ownership, self._not_hosted(claimed.workflow, claimed.version))
                return None
            items = await self.store.inbox(lease.run_id)
            row = await self.store.get_run(lease.run_id)
            start = next((item for item in items if item.kind == "start"), None)
            if start is None:  # started meanwhile by whoever it was admitted to
                return None
            message = workflow.serializer.loads(start.payload)
            # The deadline it was started with, on this service's clock (run() counts from now).
            deadline_at = row.deadline_at
            timeout = None if deadline_at is None else max(deadline_at - time.time(), 1e-9)
            options = RunOptions(
                clock=self.clock, record_events=False, metrics=self.metrics, timeout=timeout
            )
            launch = Launch(
                message, run_id=lease.run_id, options=options, store=self.store, ownership=ownership
            )
            logger.info(
                "starting run %s of %s: its start policy admitted it", lease.run_id, row.workflow
            )
            try:
                return await drive(workflow, launch)
            except WorkflowRunError as error:
                logger.info("run %s failed: %s: %s", lease.run_id, type(error).__name__, error)
                return error.result
        except TreadleError as error:
            # Not raised: the other runs go on; what went wrong is in the store and the log.
            logger.warning("run %s could not start: %r", lease.run_id, error)
            return None
        finally:
            await ownership.close()

    def _not_hosted(self, name: str, version: int) -> str:
        versions = self.hosted.versions(name)
        if not versions:
            return f"no workflow {name!r} here (this runtime has: {self.hosted.describe()})"
        hosted = ", ".join(f"v{v}" for v in versions)
        return (
            f"version {version} of {name!r} is not hosted here (this runtime has {hosted}): "
            f"host it, or move the run with treadle migrate --from {version} --to {versions[-1]}"
        )

    async def _park(self, ownership: Ownership, reason: str) -> None:
        run_id = ownership.lease.run_id
        logger.error("parked run %s: %s; `treadle resume %s` takes it up", run_id, reason, run_id)
        with contextlib.suppress(DurabilityError):
            await ownership.park(reason)

    async def serve(self) -> None:
        """Wake due runs forever, every ``poll_interval`` seconds (cancel to stop)."""
        while True:
            stop_if_cancelled()  # lost below (see treadle._tasks): this loop would never end
            try:
                await self.wake_due()
            except DurabilityError as error:  # the store is down: try again next time
                logger.warning("cannot claim runs: %s", error)
            await self.clock.sleep_until(self.clock.now() + self.poll_interval)

    async def __aenter__(self) -> Runtime:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self._leases = LeaseKeeper(group)
        self._service = group.create_task(self.serve(), name="treadle-timers")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Leaving the block stops the service, not the runs it was driving: they
        # are detached (nothing recorded), their leases given up, so they stay
        # resumable from their last checkpoint and the next service takes them
        # up at once. Runs driven by anything else in this process go on.
        leases, self._leases = self._leases, None
        if leases is not None:
            for run_id in leases.detach("the runtime driving it stopped"):
                logger.info(
                    "left run %s as last committed; `treadle resume %s` or a worker takes it up",
                    run_id,
                    run_id,
                )
        service, self._service = self._service, None
        if service is not None:
            service.cancel()
        if leases is not None:
            await leases.close()
        group, self._group = self._group, None
        if group is not None:
            await close_group(group)

    @property
    def workflows(self) -> Mapping[str, Workflow]:
        """The workflows this runtime serves, by name: the newest version of each."""
        return {workflow.name: workflow for workflow in self.hosted}


async def _let_go(held: list[Ownership]) -> None:
    """Give up the leases of claimed runs whose drive never started (the call was cancelled).

    The others closed theirs as their drive ended; closing one again does nothing.
    """
    for ownership in held:
        await ownership.close()
