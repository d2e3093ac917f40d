"""``Worker``: one of many processes sharing runs through PostgreSQL.

The loop: claim as many runnable runs as there are free slots (see
:mod:`treadle._stores._postgres_queue`), run each to its next rest on a
fenced view of the store, release it; heartbeat every lease held a third of
a lease apart; when nothing is runnable, wait a poll interval. Each run is
driven by the ordinary engine (``Workflow.run`` / ``resume``), so a run on a
worker keeps every guarantee of ``docs/semantics.md``; what the worker adds
is who may commit.

Failure handling, by cause:

* the lease is lost (a heartbeat finds it taken, a commit is fenced off, or
  a client cancelled): the run's task is cancelled and nothing more is
  written; the run goes on wherever it is now leased;
* the store fails (an outage): the run is released (or its lease expires)
  and continues from its last checkpoint; it is not marked failed;
* the run fails (a handler raised, a deadline passed): it is ``FAILED`` in
  the store, as in one process;
* the run keeps killing its worker: each takeover of an expired lease
  counts, and past ``max_recoveries`` the run is parked ``FAILED`` with the
  reason instead of being claimed again;
* the run is paused (a client asked): its next commit checkpoints the
  superstep, pauses it and gives the claim up; no worker claims it until
  it is unpaused.

Shutdown (``stop()``, or SIGTERM in ``treadle worker``): no new claims; each
run finishes its current superstep, commits it and is released, so another
worker continues it at once. Runs still computing after ``shutdown_grace``
seconds are cancelled and released without committing their superstep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._inbox import applicable
from treadle._checkpoints._leases import LeaseKeeper
from treadle._checkpoints._ownership import Ownership
from treadle._engine._clock import SystemClock
from treadle._engine._errors import RunCancelledError, WorkflowRunError
from treadle._engine._options import RunOptions
from treadle._engine._result import ENDED
from treadle._exceptions import (
    AppLoadError,
    CheckpointCorruptError,
    DurabilityError,
    GraphChangedError,
    LeaseLostError,
    RequestError,
    SerializationError,
    TreadleError,
    WorkerStoppingError,
)
from treadle._scaleout._tick_queue import QueueStarter
from treadle._stores._postgres_queue import READY_CHANNEL, Claim, InboxItem, RunQueue
from treadle._stores._store import Lease
from treadle._tasks import stop_if_cancelled
from treadle._values._actors import Actor
from treadle._values._text import error_text
from treadle._workflow._driving import continue_taken, drive
from treadle._workflow._inputs import coerce_input
from treadle._workflow._launch import Launch
from treadle._workflow._limit_board import LimitBoard
from treadle._workflow._runs import take_over
from treadle._workflow._ticker import HeldBack, serve_schedules
from treadle._workflow._versions import Hosted

if TYPE_CHECKING:
    from collections.abc import Iterable

    from treadle._engine._clock import Clock
    from treadle._engine._metrics import Metrics
    from treadle._graph._limits import CallLimit
    from treadle._stores._postgres import PostgresStore
    from treadle._stores._postgres_leases import LeasedStore
    from treadle._workflow._workflow import Workflow

logger = logging.getLogger("treadle.worker")


@dataclass(eq=False)
class _Held:
    claim: Claim
    view: LeasedStore
    task: asyncio.Task[Any] | None = None


class Worker:
    """Serves the runs of some workflows from a ``PostgresStore``, alongside other workers.

    Args:
        store: The shared store.
        workflows: The workflows this worker runs, by name and version: it
            claims only runs of the versions it hosts (and runs started with
            no version, which it starts on the newest it hosts).
        worker_id: Written into the rows it leases (default: host:pid:random).
        concurrency: Runs driven at once.
        lease: Seconds a claim lasts without a heartbeat; a dead worker's
            runs are taken over this long after its last heartbeat (plus a
            poll interval).
        poll_interval: Seconds between claims when nothing was runnable.
        max_recoveries: Takeovers of one run in a row before it is parked
            ``FAILED`` as crash-looping.
        shutdown_grace: Seconds :meth:`serve` waits for runs to reach their
            next barrier after :meth:`stop` (default: the lease).
        clock: The time source for timers (the system clock by default).
        metrics: Where its runs report what they do, and it its lease
            renewals and takeovers (``treadle worker --metrics-port``).
        limits: The call limits its runs share with every worker on the
            database (``CallLimit``; see ``docs/flow-control.md``): a name
            declared here wins over a workflow's own declaration of it.
    """

    def __init__(
        self,
        store: PostgresStore,
        workflows: Iterable[Workflow],
        *,
        worker_id: str | None = None,
        concurrency: int = 8,
        lease: float = 30.0,
        poll_interval: float = 1.0,
        max_recoveries: int = 3,
        shutdown_grace: float | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        limits: Iterable[CallLimit] = (),
    ) -> None:
        if concurrency < 1:
            msg = f"concurrency must be at least 1, got {concurrency}"
            raise ValueError(msg)
        if poll_interval <= 0 or lease <= poll_interval:
            msg = (
                f"need 0 < poll_interval < lease, got poll_interval={poll_interval}, lease={lease}"
            )
            raise ValueError(msg)
        self.store = store
        self.workflows = Hosted(workflows)
        if not self.workflows:
            msg = "a worker needs at least one workflow to serve"
            raise ValueError(msg)
        self.limits = LimitBoard(limits)
        for hosted in self.workflows.all():
            self.limits.check(hosted)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.max_recoveries = max_recoveries
        self.shutdown_grace = lease if shutdown_grace is None else shutdown_grace
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.metrics = metrics
        self.queue = RunQueue(store, self.worker_id, lease=lease)
        self._ticks = QueueStarter(store, self.workflows)
        self._held_back = HeldBack()  # schedules it failed to serve (see serve_schedules)
        # Stopped mid-commit, it must not hold its runs' rows (which claims skip) past its lease.
        store.limit_stalls(lease)
        self._held: dict[str, _Held] = {}
        self._leases = LeaseKeeper()  # one in the task group of serve() or run_until_idle()
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()  # a slot freed, or a run became ready: claim now

    def stop(self) -> None:
        """Stop claiming; runs finish their current superstep and are released."""
        self._stopping.set()
        self._wake.set()
        for held in self._held.values():
            held.view.stop_after_commit(WorkerStoppingError(f"worker {self.worker_id} is stopping"))

    async def serve(self) -> None:
        """Claim and run until :meth:`stop`, then drain (see the module docstring)."""
        logger.info("worker %s serving %s", self.worker_id, self.workflows.describe())
        async with asyncio.TaskGroup() as group:
            self._leases = LeaseKeeper(group)
            beating = group.create_task(self._heartbeats(), name="treadle-heartbeat")
            listening = group.create_task(self._listen(), name="treadle-listen")
            loop, ticked = asyncio.get_running_loop(), -self.poll_interval
            while not self._stopping.is_set():
                stop_if_cancelled()  # lost below (see treadle._tasks): this loop would never end
                self._wake.clear()  # before claiming: a wake-up meanwhile is not lost
                # Schedules are polled, not told: every round a run ending wakes would
                # ask again (a query per run); half a poll apart at most is as prompt.
                if loop.time() - ticked >= self.poll_interval / 2:
                    ticked = loop.time()
                    await self._tick()
                claimed = await self._claim_free_slots(group)
                if claimed == 0 or len(self._held) >= self.concurrency:
                    await self._woken_or_polled()
            await self._drain()
            beating.cancel()
            listening.cancel()
            await self._leases.close()
        logger.info("worker %s stopped", self.worker_id)

    async def _listen(self) -> None:
        """Claim as soon as a client starts or feeds a run, not a poll later.

        Timers and expired leases are still found by polling; so is
        everything while the listening connection is down.
        """
        while True:
            stop_if_cancelled()
            try:
                async for _ in self.store.notifications(READY_CHANNEL):
                    self._wake.set()
            except DurabilityError as error:
                logger.warning("worker %s cannot listen (polling only): %s", self.worker_id, error)
            await asyncio.sleep(self.poll_interval)

    async def run_until_idle(self) -> int:
        """Claim and run until nothing is runnable; return how many claims were served.

        For tests and batch jobs: the same claims, leases and fencing as
        :meth:`serve`, without waiting for timers that are not yet due.
        """
        served = 0
        empty_rounds = 0
        async with asyncio.TaskGroup() as group:
            self._leases = LeaseKeeper(group)
            beating = group.create_task(self._heartbeats())
            while True:
                stop_if_cancelled()
                self._wake.clear()
                await self._tick()
                claimed = await self._claim_free_slots(group)
                served += claimed
                # A claim skips rows another transaction has locked (a heartbeat, a release
                # still finishing): nothing claimed twice, a poll apart, is what idle means.
                empty_rounds = empty_rounds + 1 if claimed == 0 and not self._held else 0
                if empty_rounds == 2:  # noqa: PLR2004 - twice, a poll apart
                    break
                if claimed == 0:
                    await self._woken_or_polled()
            beating.cancel()
            await self._leases.close()
        return served

    async def _tick(self) -> None:
        """Queue the runs of the due ticks of the schedules of the workflows it hosts.

        In the same round as its claims, so a tick's run is claimed at once,
        here or by another worker (see :mod:`treadle._workflow._ticker`).
        """
        try:
            await serve_schedules(
                self.store,
                self.workflows.names(),
                self.clock.now(),
                self._ticks,
                held_back=self._held_back,
                grace=self.poll_interval,  # it comes to a tick up to a poll after its time
            )
        except DurabilityError as error:
            logger.warning("worker %s cannot serve schedules: %s", self.worker_id, error)

    async def _claim_free_slots(self, group: asyncio.TaskGroup) -> int:
        free = self.concurrency - len(self._held)
        if free <= 0:
            return 0
        try:
            # Queued starts whose turn came become pending runs first, claimed below.
            await self.store.admit_queued(self.workflows.names(), self.clock.now(), limit=free)
            claims = await self.queue.claim(self.workflows.keys(), self.clock.now(), free)
        except DurabilityError as error:
            logger.warning("worker %s cannot claim: %s", self.worker_id, error)
            return 0
        for claim in claims:
            logger.info(
                "claimed run %s epoch %d status %s recoveries %d",
                claim.run_id,
                claim.epoch,
                claim.status,
                claim.recoveries,
            )
            if claim.recoveries and self.metrics is not None:  # its last owner's lease expired
                self.metrics.leases(0, 1)
            held = _Held(claim, self.queue.leased(claim, None))
            self._held[claim.run_id] = held
            group.create_task(self._serve_claim(held), name=f"treadle-run-{claim.run_id}")
        return len(claims)

    async def _drain(self) -> None:
        if not self._held:
            return
        running = {held.task: held for held in self._held.values() if held.task is not None}
        _, late = await asyncio.wait(running, timeout=self.shutdown_grace)
        for task in late:
            # Detached first: cancelling would otherwise record the run CANCELLED.
            running[task].view.detach(WorkerStoppingError(f"worker {self.worker_id} stopped"))
            task.cancel()
        if late:
            await asyncio.wait(late)

    async def _woken_or_polled(self) -> None:
        """Wait for a wake-up, or a poll interval at most.

        ``asyncio.timeout``, not ``asyncio.wait_for``: on Python 3.11 the
        latter loses a cancellation that comes as the wake-up does.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.poll_interval):
                await self._wake.wait()

    async def _heartbeats(self) -> None:
        while True:
            stop_if_cancelled()
            await asyncio.sleep(self.queue.lease / 3)
            held = {run_id: h.claim.epoch for run_id, h in self._held.items()}
            try:
                lost = await self.queue.heartbeat(held)
            except DurabilityError as error:
                logger.warning("worker %s cannot heartbeat: %s", self.worker_id, error)
                continue
            if self.metrics is not None:
                self.metrics.leases(len(held) - len(lost), 0)
            for run_id in lost:
                gone = self._held.get(run_id)
                if gone is None or gone.view.paused:  # a paused run's commit let the claim go
                    continue
                gone.view.detach(LeaseLostError(run_id, gone.claim.epoch))  # said as it settles
                if gone.task is not None:
                    gone.task.cancel()

    async def _say_lost(self, run_id: str, epoch: int) -> None:
        """Log why a run's lease was lost: it was cancelled, or another owner took it.

        A cancel fences the owner out as a takeover does; an operator reading
        "lease lost" alone took a cancelled run for one taken over.
        """
        try:
            status = (await self.store.get_run(run_id)).status
        except TreadleError:  # deleted meanwhile, or the store failing: the lease is all we know
            status = None
        if status == "cancelled":
            logger.info("run %s was cancelled; its lease (epoch %d) is given up", run_id, epoch)
        else:
            logger.warning(
                "lease lost on run %s (epoch %d): another process holds it", run_id, epoch
            )

    async def _serve_claim(self, held: _Held) -> None:
        claim = held.claim
        try:
            inner = asyncio.create_task(self._execute(held))
            held.task = inner
            if self._stopping.is_set():
                held.view.stop_after_commit(
                    WorkerStoppingError(f"worker {self.worker_id} is stopping")
                )
            try:
                await asyncio.wait([inner])
            except asyncio.CancelledError:
                inner.cancel()
                await asyncio.wait([inner])
                raise
            await self._settle(held, inner)
        finally:
            self._held.pop(claim.run_id, None)
            self._wake.set()

    async def _execute(self, held: _Held) -> None:
        claim = held.claim
        # A run started without a version (0) starts on the newest hosted here.
        workflow = self.workflows.find(claim.workflow, claim.version or None)
        if claim.status in ENDED:
            return  # its worker died between the last commit and the release
        if claim.recoveries > self.max_recoveries:
            reason = (
                f"parked: its worker was lost {claim.recoveries} times in a row while "
                f"running it (max_recoveries={self.max_recoveries}); resume it by hand"
            )
            logger.error("run %s %s", claim.run_id, reason)
            await held.view.set_status(claim.run_id, "failed", reason)
            return
        items = list(claim.inbox)  # read with the claim
        with self._leases.driving(), self.limits.declaring():
            if claim.checkpoint_id is None:
                await self._start(workflow, held, items)
            else:
                await self._continue(workflow, held, items)

    def _ownership(self, held: _Held) -> Ownership:
        """The claim as the lease the engine writes under: the claim is the lease.

        Its heartbeat is :meth:`_heartbeats` (one statement for every claim),
        so the ownership's own renewals touch no database; its writes are
        fenced by the claim's epoch in the view.
        """
        claim, duration = held.claim, self.queue.lease
        lease = Lease(claim.run_id, self.worker_id, claim.epoch, time.time() + duration)
        return Ownership(held.view, lease, duration)

    async def _start(self, workflow: Workflow, held: _Held, items: list[InboxItem]) -> None:
        run_id = held.claim.run_id
        start = next((item for item in items if item.kind == "start"), None)
        if start is None:
            reason = "parked: a pending run with no start input in its inbox"
            await held.view.set_status(run_id, "failed", reason)
            return
        held.view.consume(start.seq)
        message = coerce_input(workflow, workflow.serializer.loads(start.payload))
        # The client's deadline, on this worker's clock (run() counts from now).
        deadline_at = held.claim.deadline_at
        # A deadline already passed fails the run at once, as it would have anywhere.
        timeout = None if deadline_at is None else max(deadline_at - self.clock.now(), 1e-9)
        options = RunOptions(
            clock=self.clock, record_events=False, timeout=timeout, metrics=self.metrics
        )
        owned = self._ownership(held)
        launch = Launch(message, run_id=run_id, options=options, store=held.view, ownership=owned)
        await drive(workflow, launch)

    async def _continue(self, workflow: Workflow, held: _Held, items: list[InboxItem]) -> None:
        # The engine reads and applies the inbox itself, under this claim's lease
        # (messages under an input policy: its session inbox, when the policy lets it).
        items = list(applicable(items, hold_messages=workflow.input_policy.watches_turns))
        if items:
            held.view.consume(items[-1].seq)
        options = RunOptions(clock=self.clock, record_events=False, metrics=self.metrics)
        taken = await take_over(
            workflow, held.view, held.claim.run_id, ownership=self._ownership(held)
        )
        await continue_taken(workflow, taken, held.view, options)

    async def _settle(self, held: _Held, task: asyncio.Task[None]) -> None:
        """Release the run, or not, according to how its task ended."""
        claim, view = held.claim, held.view
        error = None if task.cancelled() else task.exception()
        if view.paused:  # the commit that paused it released it too
            logger.info("run %s paused; released epoch %d", claim.run_id, claim.epoch)
            return
        detached = view.detached
        if isinstance(detached, LeaseLostError):
            await self._say_lost(claim.run_id, claim.epoch)
            return
        if detached is not None and not isinstance(detached, WorkerStoppingError):
            logger.warning("run %s: the store failed (%s); giving it back", claim.run_id, detached)
        if error is not None and detached is None:
            if isinstance(error, RequestError):
                logger.warning("run %s: inbox items refused: %s", claim.run_id, error)
                await self._refuse_inbox(held, error_text(error))
            elif isinstance(error, RunCancelledError):
                return
            elif isinstance(error, GraphChangedError | CheckpointCorruptError | SerializationError):
                # This worker cannot load the run (another graph under its name, a
                # corrupt checkpoint, a type it does not allow): park it, naming why,
                # rather than claim it again. It keeps its status and checkpoints, so
                # a resume by code that can load it takes it up.
                logger.error("parked run %s: it cannot run here: %s", claim.run_id, error)
                await self._park(held, error_text(error))
            elif isinstance(error, AppLoadError):
                # The run's input fits no handler: the input is at fault, not this code.
                logger.error("run %s failed: %s", claim.run_id, error)
                await self._fail(held, error_text(error))
            elif isinstance(error, DurabilityError):
                logger.warning("run %s: the store failed (%s); giving it back", claim.run_id, error)
            elif not isinstance(error, WorkflowRunError):
                logger.error("run %s: worker error", claim.run_id, exc_info=error)
        try:
            # What its loop read and left makes no worker claim it again (see Leases.release).
            seen = view.seen if error is None and detached is None else 0
            released = await self.queue.release(claim, self.clock.now(), seen=seen)
        except DurabilityError as failure:
            logger.warning(
                "run %s: release failed (%s); its lease will expire", claim.run_id, failure
            )
            return
        if released:
            logger.info("released run %s epoch %d", claim.run_id, claim.epoch)

    async def _park(self, held: _Held, reason: str) -> None:
        lease = Lease(held.claim.run_id, self.worker_id, held.claim.epoch, 0.0)
        with contextlib.suppress(DurabilityError):
            await held.view.park(lease, reason)

    async def _fail(self, held: _Held, reason: str) -> None:
        with contextlib.suppress(DurabilityError):
            await held.view.set_status(held.claim.run_id, "failed", reason)

    async def _refuse_inbox(self, held: _Held, reason: str) -> None:
        """Refuse, on the record, the unapplied items a run failed to take as a whole.

        Those that fit no request are refused one by one where the run is
        taken over (``take_over``); this is for what only fails together.
        """
        items = await self.queue.inbox(held.claim.run_id)
        if items:
            lease = Lease(held.claim.run_id, self.worker_id, held.claim.epoch, 0.0)
            actor = Actor.service(self.worker_id, door="worker")
            with contextlib.suppress(DurabilityError):
                await held.view.refuse_inbox(lease, [(i.seq, reason) for i in items], actor)
