"""``MemoryStore``'s start policies: the decisions of ``_start_plans``, over its dicts.

Each decision runs whole under the store's lock, which is what the SQL
stores' gate lock is to them: deciders take turns (see
:mod:`treadle._stores._starts` for what is decided).
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from treadle._exceptions import RunExistsError, StartRefusedError
from treadle._stores import _audit
from treadle._stores._memory_ownership import MemoryRun
from treadle._stores._records import Claimed, InboxItem, Lease, RunRecord
from treadle._stores._sql_ownership import ENDED_STATUSES
from treadle._stores._sql_rules import check_limit
from treadle._stores._starts import Admission, full_for

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable, Sequence

    from treadle._stores._starts import StartRequest
    from treadle._values._actors import Actor

_QUEUED = "queued"


@dataclasses.dataclass(slots=True)
class MemoryStart:
    """A run's start row, as the SQL stores' ``treadle_starts`` keeps it."""

    request: StartRequest
    state: str  # "queued", "holding" or "done"
    admit_at: float | None
    order: int  # first come first, among starts due at one time


class MemoryAdmissions(ABC):
    """What the store port asks of ``MemoryStore`` about start policies (``Admissions``)."""

    _runs: dict[str, MemoryRun]
    _starts: dict[str, MemoryStart]
    _lock: threading.RLock
    _inbox_seq: int

    @abstractmethod
    def _record(self, records: Iterable[_audit.Recorded], at: float) -> None:
        """Write each action's record, under the lock the caller holds with its effect."""

    @abstractmethod
    def _check_open(self) -> None:
        """Refuse to work once the store is closed."""

    async def admit(
        self,
        request: StartRequest,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> Admission:
        """Decide one start, once (see ``Admissions.admit``)."""
        self._check_open()
        with self._lock:
            now = time.time() if request.at is None else request.at
            wall = time.time()
            workflow = request.workflow
            if request.dedup_id is not None:
                for start in self._starts.values():
                    first = start.request
                    found = self._runs.get(first.run_id)  # gone: deleted since
                    same = (first.workflow, first.dedup_id) == (workflow, request.dedup_id)
                    if same and found is not None:
                        return Admission(first.run_id, "deduplicated", found.record.status)
            holding = self._admit_due(workflow, now)
            if request.debounce is not None:
                for start in self._of(workflow, _QUEUED):
                    waiting = start.request
                    if waiting.key == request.key and waiting.debounce is not None:
                        run = self._runs[waiting.run_id]
                        item, _ = run.inbox[0]
                        run.inbox[0] = (dataclasses.replace(item, payload=request.payload), wall)
                        start.admit_at = now + request.debounce
                        if actor is not None:  # the run goes on with this input: who gave it
                            self._record(
                                [_audit.debounced(waiting.run_id, request.payload, actor)], wall
                            )
                        return Admission(waiting.run_id, "debounced", _QUEUED)
                self._insert(request, wall, None, actor, now + request.debounce)
                return Admission(request.run_id, "debounced", _QUEUED)
            full = full_for(holding, request.key, request.per_key, request.concurrency)
            if full is not None:
                if request.refuse:
                    holders = [
                        start.request.run_id
                        for start in self._of(workflow, "holding")
                        if full != "key" or start.request.key == request.key
                    ]
                    raise StartRefusedError(workflow, request.key, holders, full)
                self._insert(request, wall, None, actor, now)
                return Admission(request.run_id, "queued", _QUEUED)
            lease = None if owner is None else Lease(request.run_id, owner, 1, wall + duration)
            self._insert(request, wall, lease, actor, None)
            return Admission(request.run_id, "started", "pending", lease)

    async def admit_queued(self, workflows: Sequence[str], now: float, *, limit: int) -> int:
        """Admit queued starts whose turn has come (see ``Admissions.admit_queued``)."""
        self._check_open()
        check_limit(limit)
        with self._lock:
            admitted: list[str] = []
            for workflow in sorted(set(workflows)):
                if len(admitted) < limit:
                    self._admit_due(workflow, now, admitted)
            return len(admitted)

    async def claim_starts(
        self, workflows: Sequence[str], owner: str, duration: float, now: float, *, limit: int
    ) -> list[Claimed]:
        """Admit what is due, then lease admitted runs nobody started (see the port)."""
        await self.admit_queued(workflows, now, limit=limit)
        with self._lock:
            wall = time.time()
            claimed: list[Claimed] = []
            for start in list(self._starts.values()):
                run = self._runs.get(start.request.run_id)
                if len(claimed) >= limit or run is None or start.state != "holding":
                    continue
                record = run.record
                if record.workflow not in workflows or record.status != "pending":
                    continue
                if record.parked is not None or not run.free(wall):
                    continue
                run.epoch += 1
                run.record = dataclasses.replace(record, owner=owner, lease_until=wall + duration)
                lease = Lease(record.run_id, owner, run.epoch, wall + duration)
                claimed.append(
                    Claimed(lease, record.workflow, delivered=True, version=record.version)
                )
            return claimed

    def _admitted(self, run_id: str, lease: Lease | None) -> MemoryRun | None:
        """The admitted row ``create_run`` under ``lease`` starts (``None``: a new run).

        Raises:
            RunExistsError: ``run_id`` is a run's other than one admitted to ``lease``.
        """
        found = self._runs.get(run_id)
        if found is None:
            return None
        record = found.record
        if lease is None or record.status != "pending" or run_id not in self._starts:
            raise RunExistsError(run_id)
        if (record.owner, found.epoch) != (lease.owner, lease.epoch):
            raise RunExistsError(run_id)
        return found

    def _of(self, workflow: str, state: str) -> list[MemoryStart]:
        return [
            start
            for start in self._starts.values()
            if start.request.workflow == workflow and start.state == state
        ]

    def _admit_due(
        self, workflow: str, now: float, admitted: list[str] | None = None
    ) -> dict[str, int]:
        """Admit the workflow's due queued starts as room allows; slots held after, by key."""
        for start in self._of(workflow, _QUEUED) + self._of(workflow, "holding"):
            run = self._runs.get(start.request.run_id)
            if run is None or run.record.status in ENDED_STATUSES:
                start.state, start.admit_at = "done", None
        holding: dict[str, int] = {}
        for start in self._of(workflow, "holding"):
            holding[start.request.key] = holding.get(start.request.key, 0) + 1
        queued = self._of(workflow, _QUEUED)
        due = [s for s in queued if s.admit_at is not None and s.admit_at <= now]
        for start in sorted(due, key=lambda s: (s.admit_at, s.order)):
            request = start.request
            if full_for(holding, request.key, request.per_key, request.concurrency) is not None:
                continue
            run = self._runs[request.run_id]
            if run.record.status != _QUEUED:
                continue  # it left the line meanwhile (cancelled): released next time
            wall = time.time()
            run.record = dataclasses.replace(run.record, status="pending", updated_at=wall)
            run.ready_at = wall
            start.state, start.admit_at = "holding", None
            holding[request.key] = holding.get(request.key, 0) + 1
            if admitted is not None:
                admitted.append(request.run_id)
        return holding

    def _insert(
        self,
        request: StartRequest,
        wall: float,
        lease: Lease | None,
        actor: Actor | None,
        admit_at: float | None,
    ) -> None:
        if request.run_id in self._runs:
            raise RunExistsError(request.run_id)
        queued = admit_at is not None
        record = RunRecord(
            run_id=request.run_id,
            workflow=request.workflow,
            status=_QUEUED if queued else "pending",
            superstep=0,
            checkpoint_id=None,
            parent_run_id=None,
            parent_checkpoint_id=None,
            created_at=wall,
            updated_at=wall,
            deadline_at=request.deadline_at,
            owner=lease.owner if lease is not None else None,
            lease_until=lease.until if lease is not None else None,
            version=request.version,
            started_by=request.started_by,
        )
        self._inbox_seq += 1
        item = InboxItem(self._inbox_seq, "start", None, request.payload)
        ready_at = None if queued or lease is not None else wall
        run = MemoryRun(record, b"", {}, epoch=lease.epoch if lease is not None else 0)
        run.ready_at = ready_at
        run.inbox.append((item, wall))
        self._runs[request.run_id] = run
        state = _QUEUED if queued else "holding"
        self._starts[request.run_id] = MemoryStart(request, state, admit_at, len(self._starts))
        if actor is not None:
            self._record(
                _audit.delivered(request.run_id, [("start", None, request.payload)], actor), wall
            )


def adopted(admitted: MemoryRun, made: MemoryRun) -> MemoryRun:
    """The run ``create_run`` made, on the row its start policy admitted: who, when, its inbox.

    Its log goes on from the queued run's: the ``run_created`` (and ``start_debounced``)
    written while it waited were dropped with the queued row, on this store only.
    """
    made.record = dataclasses.replace(
        made.record,
        created_at=admitted.record.created_at,
        started_by=admitted.record.started_by,
    )
    made.inbox = admitted.inbox
    made.events = admitted.events  # what was recorded while it waited (who started it, ...)
    made.consumed = max((item.seq for item, _ in admitted.inbox), default=admitted.consumed)
    return made
