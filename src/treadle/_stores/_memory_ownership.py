"""``MemoryStore``'s ownership part: leases, the inbox, cancelling, parking and claims.

A mixin, as :class:`~treadle._stores._sql_reads.SqlReads` gives the SQL
stores their reads; with it the record the store keeps per run
(:class:`MemoryRun`), which both read and write. Every method runs to
completion without awaiting and under the store's lock.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._exceptions import (
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RequestError,
    RunBusyError,
    RunNotFoundError,
    RunPausedError,
)
from treadle._graph._input_policy import policy_of_kind
from treadle._stores import _audit, _memory_events, _pausing
from treadle._stores._sql_ownership import (
    ENDED_STATUSES,
    NOTHING_TO_RESUME,
    answer_preview,
    check_items,
    check_not_ended,
    check_version,
)
from treadle._stores._sql_rules import check_limit, due_at
from treadle._stores._store import Claimed, InboxItem, Lease
from treadle._values._actors import Actor

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable, Mapping, Sequence

    from treadle._stores._events import LoggedEvent
    from treadle._stores._store import CheckpointRecord, RunRecord
    from treadle._values._search_fields import FieldValue


@dataclass(slots=True)
class MemoryRun:
    """One run as ``MemoryStore`` keeps it: its row, graph, checkpoints, lease and inbox."""

    record: RunRecord
    graph: bytes
    # Insertion order is commit order: retention drops from the front.
    checkpoints: dict[str, CheckpointRecord]
    epoch: int = 0
    ready_at: float | None = None
    # Every item ever delivered, applied ones too: the answers ledger.
    inbox: list[tuple[InboxItem, float]] = dataclasses.field(default_factory=list)
    consumed: int = 0  # items up to this seq are applied
    events: list[LoggedEvent] = dataclasses.field(default_factory=list)  # its event log
    fields: dict[str, FieldValue] = dataclasses.field(default_factory=dict)  # its search fields

    def free(self, now: float) -> bool:
        """Whether nobody holds a current lease on the run at ``now``."""
        return not self.record.owned(now)

    def unapplied(self, after: int = 0) -> bool:
        """Whether the inbox holds items not yet applied (of those after ``after``)."""
        return any(item.seq > max(self.consumed, after) for item, _ in self.inbox)


class MemoryOwnership(ABC):
    """What the store port asks of ``MemoryStore`` about who owns a run, and its inbox.

    ``acquire``, ``renew``, ``release``, ``deliver``, ``inbox``,
    ``answer_of``, ``cancel``, ``pause``, ``unpause``, ``park`` and ``claim``.
    """

    _runs: dict[str, MemoryRun]
    _lock: threading.RLock
    _inbox_seq: int  # the seq of the latest item delivered to any run

    @abstractmethod
    def _record(self, records: Iterable[_audit.Recorded], at: float) -> None:
        """Write each action's record, under the lock the caller holds with its effect."""

    @abstractmethod
    def _check_open(self) -> None:
        """Refuse to work once the store is closed."""

    @abstractmethod
    def _run(self, run_id: str) -> MemoryRun:
        """The run ``run_id``, or ``RunNotFoundError``."""

    @abstractmethod
    async def load_resumable(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> tuple[RunRecord, bytes, CheckpointRecord | None]:
        """The run row, its graph and one checkpoint (see the store port)."""

    async def acquire(
        self,
        run_id: str,
        owner: str,
        duration: float,
        *,
        replacing: str | None = None,
        actor: Actor | None = None,
    ) -> Lease:
        """Take the run's lease if no one holds a current one (see the store port).

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: Another owner's lease is current.
        """
        self._check_open()
        with self._lock:
            run = self._run(run_id)
            now = time.time()
            if run.record.status == _pausing.PAUSED:
                raise RunPausedError(run_id)
            if not run.free(now) and (replacing is None or run.record.owner != replacing):
                raise RunBusyError(
                    run_id, str(run.record.owner), float(run.record.lease_until or 0)
                )
            lease = self._lease(run, owner, now + duration, parked=None)
            if actor is not None and run.record.status not in NOTHING_TO_RESUME:
                self._record([_audit.Recorded(run_id, "run_resumed", actor, {})], now)
            return lease

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """Extend a current lease by ``duration`` seconds from now.

        Raises:
            LeaseLostError: The lease is no longer current.
        """
        self._check_open()
        with self._lock:
            run = self._run(lease.run_id)
            self._check_lease(run, lease)
            until = time.time() + duration
            run.record = dataclasses.replace(run.record, lease_until=until)
            return dataclasses.replace(lease, until=until)

    async def release(self, lease: Lease, *, seen: int = 0) -> bool:
        """Give a lease up; ``False`` when it was no longer current (``seen``: see the port)."""
        self._check_open()
        with self._lock:
            run = self._runs.get(lease.run_id)
            if run is None or not self._holds(run, lease):
                return False
            self._release(run, seen)
            return True

    async def deliver(
        self,
        run_id: str,
        items: Sequence[tuple[str, str | None, bytes]],
        *,
        version: int | None = None,
        actor: Actor | None = None,
    ) -> None:
        """Put items in the run's inbox, all or none; the first answer to a request wins.

        Raises:
            RunNotFoundError: No such run.
            RequestError: The run has ended.
            RequestAlreadyAnsweredError: A request was answered already.
            ValueError, TypeError: An item no owner could apply (see ``check_items``).
        """
        self._check_open()
        check_items(run_id, items)
        with self._lock:
            run = self._run(run_id)
            record = run.record
            check_version(run_id, record.workflow, record.version, version)
            answers = {item.target: (item, at) for item, at in run.inbox if item.kind == "answer"}
            now = time.time()
            for kind, target, payload in items:
                if kind != "answer":
                    continue
                if target in answers:
                    first, at = answers[target]
                    raise RequestAlreadyAnsweredError(
                        run_id, str(target), answer_preview(first.payload), at
                    )
                answers[target] = (InboxItem(0, kind, target, bytes(payload)), now)
            check_not_ended(run_id, run.record.status)
            for kind, target, payload in items:
                self._inbox_seq += 1
                run.inbox.append(
                    (InboxItem(self._inbox_seq, kind, target, bytes(payload), now), now)
                )
            run.ready_at = run.ready_at if run.ready_at is not None else now
            if actor is not None:
                self._record(_audit.delivered(run_id, items, actor), now)

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """The run's inbox items not yet applied, in delivery order."""
        self._check_open()
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return []
            return [item for item, _ in run.inbox if item.seq > run.consumed]

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (its JSON, cut short, and when it came), or ``None``."""
        self._check_open()
        with self._lock:
            run = self._runs.get(run_id)
            for item, at in run.inbox if run is not None else ():
                if item.kind == "answer" and item.target == request_id:
                    return answer_preview(item.payload), at
            return None

    async def answered_payload(self, run_id: str, request_id: str) -> bytes | None:
        """The answer kept for a request, whole, as delivered (``None``: none was kept)."""
        self._check_open()
        with self._lock:
            run = self._runs.get(run_id)
            for item, _ in run.inbox if run is not None else ():
                if item.kind == "answer" and item.target == request_id:
                    return item.payload
            return None

    async def cancel(self, run_id: str, *, actor: Actor | None = None) -> None:
        """Mark the run ``cancelled`` wherever it is, fencing out any owner.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended already.
        """
        self._check_open()
        with self._lock:
            run = self._run(run_id)
            if run.record.status in ENDED_STATUSES:
                msg = f"run {run_id!r} has ended ({run.record.status}); there is nothing to cancel"
                raise RequestError(msg)
            run.epoch += 1
            run.ready_at = None
            run.record = dataclasses.replace(
                run.record,
                status="cancelled",
                owner=None,
                lease_until=None,
                error=None,
                updated_at=time.time(),
                pause_requested=None,
            )
            _memory_events.log_status(run, time.time(), "cancel")
            if actor is not None:
                self._record([_audit.Recorded(run_id, "run_cancelled", actor, {})], time.time())
            self._refuse_unapplied(run, actor, "the run was cancelled before taking it")
            run.consumed = self._inbox_seq

    async def pause(self, run_id: str, *, actor: Actor | None = None) -> _pausing.PauseOutcome:
        """Pause the run now, or ask its owner to at its next commit (see the store port).

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended.
        """
        self._check_open()
        with self._lock:
            run = self._runs.get(run_id)
            now = time.time()
            step = _pausing.decide_pause(run_id, _pausable(run), now)
            if run is not None and step == "pause":
                run.epoch += 1  # an owner presumed dead commits nothing more
                run.record = dataclasses.replace(
                    run.record,
                    status=_pausing.PAUSED,
                    pause_requested=None,
                    owner=None,
                    lease_until=None,
                    updated_at=now,
                )
                _memory_events.log_status(run, now, "pause")
            elif run is not None and step == "request" and run.record.pause_requested is None:
                run.record = dataclasses.replace(run.record, pause_requested=now)
            if actor is not None and step != "none":  # a paused run: nothing changed, no record
                self._record([_audit.paused(run_id, actor, step)], now)
            return _pausing.pause_outcome(step)

    async def unpause(
        self,
        run_id: str,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> _pausing.Unpaused:
        """Let a paused run go on (leased to ``owner``, if given), or withdraw a pause asked.

        Raises:
            RunNotFoundError: No such run.
            RunBusyError: With ``owner``, another owner's lease is current.
            RequestError: It has ended, or is neither paused nor asked to pause.
        """
        self._check_open()
        with self._lock:
            run = self._runs.get(run_id)
            now = time.time()
            step = _pausing.decide_unpause(run_id, _pausable(run), now, taking=owner is not None)
            assert run is not None  # noqa: S101 - decide_unpause refuses an unknown run
            if actor is not None:
                self._record([_audit.unpaused(run_id, actor, step)], now)
            if step == "withdraw":
                run.record = dataclasses.replace(run.record, pause_requested=None)
                return _pausing.Unpaused(withdrawn=True)
            latest = run.checkpoints.get(run.record.checkpoint_id or "")
            status = latest.info.status if latest is not None else "pending"
            run.record = dataclasses.replace(
                run.record, status=status, pause_requested=None, updated_at=now
            )
            run.ready_at = (run.ready_at or now) if run.unapplied() else None
            _memory_events.log_status(run, now, "unpause")
            if owner is None:
                return _pausing.Unpaused(withdrawn=False)
            lease = self._lease(run, owner, now + duration, parked=run.record.parked)
            return _pausing.Unpaused(withdrawn=False, lease=lease)

    async def refuse_inbox(
        self, lease: Lease, refusals: Sequence[tuple[int, str]], actor: Actor
    ) -> None:
        """Take inbox items the owner cannot apply out of the inbox, recorded (see the port).

        Raises:
            LeaseLostError: The lease is no longer current; nothing was written.
        """
        self._check_open()
        with self._lock:
            run = self._run(lease.run_id)
            self._check_lease(run, lease)
            self._refuse(run, actor, {seq: why for seq, why in refusals if seq > run.consumed})

    def _refuse(self, run: MemoryRun, actor: Actor | None, reasons: Mapping[int, str]) -> None:
        """Take the items ``reasons`` names out of the run's inbox, each recorded with why."""
        gone = [item for item, _ in run.inbox if item.seq in reasons]
        run.inbox = [(item, at) for item, at in run.inbox if item.seq not in reasons]
        if not run.unapplied():
            run.ready_at = None
        if actor is None or not gone:
            return
        run_id = run.record.run_id
        records = [
            _audit.refused(run_id, actor, item.kind, item.target, reasons[item.seq])
            for item in gone
        ]
        self._record(records, time.time())

    def _refuse_leftovers(self, run: MemoryRun, lease: Lease | None, status: str) -> None:
        """A run ending under ``lease`` refuses its unapplied messages (``refuse_leftovers``)."""
        if lease is not None and status in ENDED_STATUSES:
            owner = Actor.service(lease.owner, door="worker")
            self._refuse_unapplied(run, owner, f"the run {status} before taking it")

    def _refuse_unapplied(self, run: MemoryRun, actor: Actor | None, why: str) -> None:
        """Refuse the session messages the run holds unapplied (``refuse_unapplied``)."""
        left = [item for item, _ in run.inbox if item.seq > run.consumed]
        if refused := {i.seq: why for i in left if policy_of_kind(i.kind) is not None}:
            self._refuse(run, actor, refused)  # and the answers behind them: the run ended
            run.consumed, run.ready_at = max(i.seq for i in left), None

    async def park(self, lease: Lease, reason: str) -> None:
        """Set a run aside with ``reason`` and give its lease up.

        Raises:
            LeaseLostError: The lease is no longer current.
        """
        self._check_open()
        with self._lock:
            run = self._run(lease.run_id)
            self._check_lease(run, lease)
            run.ready_at = None
            run.record = dataclasses.replace(
                run.record, owner=None, lease_until=None, parked=reason
            )

    async def claim(self, owner: str, duration: float, now: float, *, limit: int) -> list[Claimed]:
        """Lease up to ``limit`` runs a timer service should take up (see the store port)."""
        self._check_open()
        check_limit(limit)
        with self._lock:
            wall = time.time()
            candidates = [
                run
                for run in self._runs.values()
                if run.free(wall)
                and run.record.parked is None
                and run.record.status not in _NOT_SERVICEABLE
            ]
            due = sorted(
                (
                    (when, run)
                    for run in candidates
                    if (when := due_at(run.record)) is not None and when <= now
                ),
                key=lambda pair: pair[0],
            )
            chosen: dict[str, MemoryRun] = {run.record.run_id: run for _, run in due[:limit]}
            for run in candidates:
                ready = run.ready_at is not None and run.ready_at <= wall
                if ready or run.record.status == "running":
                    chosen.setdefault(run.record.run_id, run)
            return [
                Claimed(
                    self._lease(run, owner, wall + duration, parked=run.record.parked),
                    run.record.workflow,
                    run.ready_at is not None,
                    run.record.version,
                )
                for run in list(chosen.values())[:limit]
            ]

    async def held_claimable(self, now: float, *, limit: int) -> list[Lease]:
        """The current leases on runs a claim would take, were they free (see the store port)."""
        self._check_open()
        check_limit(limit)
        with self._lock:
            wall = time.time()
            held = [
                Lease(run.record.run_id, run.record.owner, run.epoch, run.record.lease_until)
                for run in self._runs.values()
                if run.record.owner is not None
                and run.record.lease_until is not None
                and not run.free(wall)
                and run.record.parked is None
                and run.record.status not in _NOT_SERVICEABLE
                and (
                    run.record.status == "running"
                    or (run.ready_at is not None and run.ready_at <= wall)
                    or ((when := due_at(run.record)) is not None and when <= now)
                )
            ]
        return held[:limit]

    async def load_claimed(
        self, run_ids: Sequence[str]
    ) -> list[tuple[RunRecord, bytes, CheckpointRecord | None]]:
        """Each run's ``load_resumable`` of its latest checkpoint (see the store port)."""
        loaded = []
        for run_id in run_ids:
            try:
                loaded.append(await self.load_resumable(run_id))
            except RunNotFoundError:
                continue  # gone meanwhile: left out
        return loaded

    def _lease(self, run: MemoryRun, owner: str, until: float, *, parked: str | None) -> Lease:
        run.epoch += 1
        run.record = dataclasses.replace(run.record, owner=owner, lease_until=until, parked=parked)
        return Lease(run.record.run_id, owner, run.epoch, until)

    def _holds(self, run: MemoryRun, lease: Lease) -> bool:
        return run.record.owner == lease.owner and run.epoch == lease.epoch

    def _check_lease(self, run: MemoryRun, lease: Lease | None) -> None:
        if lease is not None and not self._holds(run, lease):
            raise LeaseLostError(lease.run_id, lease.epoch)

    def _release(self, run: MemoryRun, seen: int = 0) -> None:
        if run.record.pause_requested is not None:
            self._honour_pause(run)
            return
        if run.unapplied(after=seen):
            run.ready_at = run.ready_at if run.ready_at is not None else time.time()
        else:
            run.ready_at = None
        run.record = dataclasses.replace(run.record, owner=None, lease_until=None)

    def _honour_pause(self, run: MemoryRun) -> bool:
        """Pause a run whose owner commits or lets go (unless it ended); ``True`` if paused."""
        status = run.record.status
        run.record = dataclasses.replace(
            run.record,
            status=_pausing.paused_status(status),
            pause_requested=None,
            owner=None,
            lease_until=None,
        )
        paused = status not in ENDED_STATUSES
        if paused:
            _memory_events.log_status(run, time.time(), "pause")
        return paused


# Not for a timer service: ended and paused runs, and runs queued for workers (pending).
_NOT_SERVICEABLE = frozenset((*ENDED_STATUSES, _pausing.PAUSED, "pending"))


def _pausable(run: MemoryRun | None) -> tuple[object, ...] | None:
    """A run as the pause rules read it: (status, owner, lease_until, pause_requested)."""
    if run is None:
        return None
    record = run.record
    return (record.status, record.owner, record.lease_until, record.pause_requested)
