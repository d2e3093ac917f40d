"""The store port: the handful of operations durability needs.

A store keeps two things per run: one **run row** (status, latest
checkpoint, lineage) and its **checkpoints** (sealed, opaque blobs, one per
committed superstep). It never interprets a blob; encoding, checksums and
graph fingerprints belong to the checkpoint codec, so a backend is small and
the same conformance suite (``tests/durable/test_store_suite.py``) can hold
every backend to the same behaviour.

Every method is a coroutine; a backend whose driver blocks (sqlite3) runs it
on a thread of its own so the event loop never waits on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as the store knows it.

    Attributes:
        run_id: The run's id.
        workflow: The workflow's name.
        status: A ``RunStatus`` value (``"running"``, ``"completed"``, ...).
        superstep: The last committed superstep.
        checkpoint_id: The newest checkpoint, or ``None`` before the first.
        parent_run_id: For a fork, the run it branched from.
        parent_checkpoint_id: For a fork, the checkpoint it branched from.
        created_at: Seconds since the epoch.
        updated_at: Seconds since the epoch, at the last change.
        error: Why a ``FAILED`` run failed, in one line.
        wake_at: When the run's next durable timer falls due (epoch
            seconds), for ``WAITING`` runs and runs with scheduled messages.
        deadline_at: The run's wall-clock deadline (its ``timeout=``), kept
            so that it is enforced across restarts.
    """

    run_id: str
    workflow: str
    status: str
    superstep: int
    checkpoint_id: str | None
    parent_run_id: str | None
    parent_checkpoint_id: str | None
    created_at: float
    updated_at: float
    error: str | None = None
    wake_at: float | None = None
    deadline_at: float | None = None


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """A checkpoint's metadata, as ``history`` lists it.

    ``parent_checkpoint_id`` is the checkpoint this one was computed from: the
    previous barrier, or for a resumed-from-the-past or forked run, the
    checkpoint it branched from. ``wake_at`` is when the earliest durable
    timer pending at this barrier falls due (``None``: no timer).
    """

    checkpoint_id: str
    run_id: str
    superstep: int
    status: str
    parent_checkpoint_id: str | None
    created_at: float
    wake_at: float | None = None


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """A checkpoint with its sealed blob."""

    info: CheckpointInfo
    blob: bytes


class Store(Protocol):
    """Where runs and their checkpoints live.

    Implementations: ``MemoryStore`` (tests, ephemeral work), ``SqliteStore``
    (the embedded default), ``PostgresStore`` (many workers).
    """

    async def create_run(self, run: RunRecord, graph: bytes, first: CheckpointRecord) -> None:
        """Insert a new run with its graph description and first checkpoint.

        Raises:
            RunExistsError: a run with this id exists already.
        """
        ...

    async def commit(self, checkpoint: CheckpointRecord, *, keep_last: int | None = None) -> None:
        """Atomically add a checkpoint and make it the run's latest.

        The run row takes the checkpoint's status, superstep and
        ``wake_at``. With
        ``keep_last`` (or the store's own retention setting) the run's older
        checkpoints beyond that many are deleted in the same transaction.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    def commit_many(
        self, checkpoints: Sequence[CheckpointRecord], *, keep_last: int | None = None
    ) -> Awaitable[None]:
        """:meth:`commit` for several checkpoints of one run, in order, atomically.

        All of them are added or none is; the run row follows the last. This
        is how a run's checkpointer writes, every barrier: in batched mode
        several at once, those that queued while the previous call wrote.

        An ``async def`` fits. A store may also start the work when called
        and return an awaitable of its outcome (``SqliteStore`` does), so
        that a caller which awaits it later overlaps it with its own work
        from the start; either way the checkpoints are durable once awaited.

        Raises:
            RunNotFoundError: no such run (when awaited).
            ValueError: an id is taken; the checkpoints are none, of several
                runs, or repeat an id.
        """
        ...

    async def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Change a run's status without a new checkpoint (failure, cancel).

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def get_run(self, run_id: str) -> RunRecord:
        """The run row.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def get_graph(self, run_id: str) -> bytes:
        """The graph description stored when the run was created.

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def load_checkpoint(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> CheckpointRecord:
        """One checkpoint of a run; its latest when ``checkpoint_id`` is None.

        Raises:
            RunNotFoundError: no such run.
            CheckpointNotFoundError: the run has no such checkpoint.
        """
        ...

    async def load_resumable(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> tuple[RunRecord, bytes, CheckpointRecord | None]:
        """``get_run``, ``get_graph`` and ``load_checkpoint`` in one consistent read.

        What a resume needs, in one round trip. The checkpoint is ``None``
        when the run has no such checkpoint (rather than raising, so the
        caller can check the run's status and graph first).

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def list_checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every kept checkpoint of a run, oldest first (by superstep, then time).

        Raises:
            RunNotFoundError: no such run.
        """
        ...

    async def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        parent_run_id: str | None = None,
        limit: int | None = None,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first."""
        ...

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """Runs a timer service must wake: due first.

        A run is due when its status is ``waiting`` or ``awaiting_input`` and
        its ``wake_at`` or its ``deadline_at`` is at or before ``now``.
        Ordered by the earlier of the two, oldest first.
        """
        ...

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints; return how many went.

        The run's latest checkpoint is always kept.
        """
        ...

    async def close(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""
        ...
