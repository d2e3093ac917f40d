"""Saving one run's barriers to a store, in the order they commit.

The loop hands every committed barrier to its :class:`Checkpointer`, which
encodes it, links it to the checkpoint it was computed from and commits it
to the store in one transaction. Status changes that commit no superstep
(a failure, a cancellation) update the run row only, so the last checkpoint
stays exactly what the last barrier committed.

Two durability modes:

* ``"sync"`` (default): the next superstep starts only once the barrier's
  commit is durable (fsync'd). A crash loses nothing committed.
* ``"background"``: the commit of barrier N runs while superstep N+1
  computes; barrier N+1 first waits for commit N. At most one commit is in
  flight, so a crash loses at most the last superstep's checkpoint (the run
  resumes from the one before and re-runs at most two supersteps). The
  final barrier, and every status change, wait for all commits.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from treadle._durable._checkpoint import EncodeCache
from treadle._durable._store import CheckpointInfo, CheckpointRecord, RunRecord

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._durable._checkpoint import CheckpointCodec
    from treadle._durable._store import Store
    from treadle._runtime._barrier import BarrierState


Durability: TypeAlias = Literal["sync", "background"]


def new_checkpoint_id() -> str:
    """A fresh, opaque checkpoint id."""
    return uuid.uuid4().hex


class Checkpointer:
    """Persists the barriers of one run.

    Args:
        store: Where checkpoints go.
        codec: How barriers become sealed bytes.
        fingerprint: The graph fingerprint stamped into every checkpoint.
        parent_checkpoint_id: The checkpoint the next one is computed from
            (``None`` for a new run).
        keep_last: Retention for this run (``None``: the store's setting).
        durability: ``"sync"`` or ``"background"`` (see the module docstring).
    """

    def __init__(
        self,
        store: Store,
        codec: CheckpointCodec,
        fingerprint: str,
        *,
        parent_checkpoint_id: str | None = None,
        keep_last: int | None = None,
        durability: Durability = "sync",
    ) -> None:
        if durability not in ("sync", "background"):
            msg = f"durability must be 'sync' or 'background', got {durability!r}"
            raise ValueError(msg)
        self.store = store
        self._codec = codec
        self._fingerprint = fingerprint
        self.last_checkpoint_id = parent_checkpoint_id
        self._keep_last = keep_last
        self._background = durability == "background"
        self._cache = EncodeCache()
        self._in_flight: asyncio.Future[None] | None = None

    def _record(self, barrier: BarrierState, snapshots: Mapping[str, Any]) -> CheckpointRecord:
        info = CheckpointInfo(
            checkpoint_id=new_checkpoint_id(),
            run_id=barrier.run_id,
            superstep=barrier.superstep,
            status=barrier.status.value,
            parent_checkpoint_id=self.last_checkpoint_id,
            created_at=time.time(),
            wake_at=barrier.wake_at,
        )
        blob = self._codec.encode(barrier, self._fingerprint, snapshots, self._cache)
        return CheckpointRecord(info, blob)

    async def create(
        self,
        workflow_name: str,
        graph: bytes,
        barrier: BarrierState,
        snapshots: Mapping[str, Any],
        *,
        parent_run_id: str | None = None,
    ) -> str:
        """Create the run row with its first checkpoint; return the checkpoint id."""
        record = self._record(barrier, snapshots)
        now = record.info.created_at
        run = RunRecord(
            run_id=barrier.run_id,
            workflow=workflow_name,
            status=barrier.status.value,
            superstep=barrier.superstep,
            checkpoint_id=record.info.checkpoint_id,
            parent_run_id=parent_run_id,
            parent_checkpoint_id=self.last_checkpoint_id if parent_run_id else None,
            created_at=now,
            updated_at=now,
            wake_at=barrier.wake_at,
            deadline_at=barrier.deadline_at,
        )
        await self.store.create_run(run, graph, record)
        self.last_checkpoint_id = record.info.checkpoint_id
        return record.info.checkpoint_id

    async def save(self, barrier: BarrierState, snapshots: Mapping[str, Any]) -> str:
        """Commit one barrier; return its checkpoint id.

        In background mode the commit is started and left running (after the
        previous one has finished); a final barrier is always waited for.
        """
        await self.flush()
        record = self._record(barrier, snapshots)
        commit = self.store.commit(record, keep_last=self._keep_last)
        if self._background and not barrier.status.is_final:
            self._in_flight = asyncio.ensure_future(commit)
        else:
            await commit
        self.last_checkpoint_id = record.info.checkpoint_id
        return record.info.checkpoint_id

    async def flush(self) -> None:
        """Wait until every checkpoint handed over is durable (re-raising its error)."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            await in_flight

    async def record_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Record a status that commits no superstep (failed, cancelled, running)."""
        try:
            await self.flush()
        finally:
            await self.store.set_status(run_id, status, error)
