"""Runner methods over stored runs: load for resume, fork, history.

Loading refuses a run written by another graph *before* decoding anything,
so no executor runs and no unknown type is even looked up; the error names
every executor and edge that changed.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._durable._checkpointer import Checkpointer
from treadle._durable._graph_description import (
    describe_changes,
    encode_description,
    fingerprint,
)
from treadle._exceptions import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    GraphChangedError,
    RequestError,
    RunCancelledError,
)
from treadle._runtime._barrier import BarrierState
from treadle._runtime._result import RunStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._durable._checkpoint import RestoredRun
    from treadle._durable._store import CheckpointInfo, RunRecord, Store
    from treadle._runtime._workflow import Workflow


@dataclass(frozen=True, slots=True)
class RunHistory:
    """A run's checkpoints and its lineage: what ``Workflow.history`` returns.

    Attributes:
        run: The run row; for a fork, ``run.parent_run_id`` and
            ``run.parent_checkpoint_id`` say where it branched from.
        checkpoints: Every kept checkpoint, oldest first, each with the
            checkpoint it was computed from.
        forks: Runs forked from this one, newest first.
    """

    run: RunRecord
    checkpoints: list[CheckpointInfo]
    forks: list[RunRecord]


async def load_restored(
    workflow: Workflow, store: Store, run_id: str, checkpoint_id: str | None
) -> RestoredRun:
    """Decode a run's checkpoint for this workflow, refusing a changed graph.

    Raises:
        RunNotFoundError, CheckpointNotFoundError: nothing to load.
        GraphChangedError: the run was written by a different graph.
        CheckpointCorruptError: the checkpoint fails its checksum.
        SerializationError: it names a type this workflow does not allow.
    """
    row, graph, record = await store.load_resumable(run_id, checkpoint_id)
    if row.status == RunStatus.CANCELLED.value:
        raise RunCancelledError(run_id)
    try:
        stored = _stored_fingerprint(graph)
    except ValueError as error:
        raise CheckpointCorruptError(run_id, "<graph>", f"unreadable graph: {error}") from error
    if stored != workflow.fingerprint:
        changes = describe_changes(json.loads(graph), workflow.description)
        raise GraphChangedError(run_id, changes)
    if record is None:
        raise CheckpointNotFoundError(run_id, checkpoint_id)
    restored = workflow.codec.decode(
        record.blob, run_id=run_id, checkpoint_id=record.info.checkpoint_id
    )
    if restored.fingerprint != workflow.fingerprint:
        raise GraphChangedError(
            run_id,
            [f"checkpoint {restored.checkpoint_id!r} was written by graph {restored.fingerprint}"],
        )
    return restored


@functools.lru_cache(maxsize=64)
def _stored_fingerprint(graph: bytes) -> str:
    """The fingerprint of a stored graph description; every run of a workflow stores the same.

    Raises:
        ValueError: The bytes are not a JSON graph description.
    """
    return fingerprint(json.loads(graph))


async def fork_run(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str,
    state_patch: Mapping[str, Any] | None,
    new_run_id: str | None,
) -> str:
    """Create a run branching from a checkpoint, its state patched; return its id."""
    restored = await load_restored(workflow, store, run_id, checkpoint_id)
    new_id = new_run_id or uuid.uuid4().hex
    barrier = BarrierState(
        run_id=new_id,
        superstep=restored.superstep,
        status=RunStatus(restored.status) if not restored.pending else RunStatus.RUNNING,
        pending={k: tuple(v) for k, v in restored.pending.items()},
        fan_in_buffers=restored.fan_in_buffers,
        state={**restored.state, **(state_patch or {})},
        iterations=restored.iterations,
        outputs=tuple(restored.outputs),
        waits=restored.waits,
        deadline_at=restored.deadline_at,
        spawned=restored.spawned,
    )
    checkpointer = Checkpointer(
        store, workflow.codec, workflow.fingerprint, parent_checkpoint_id=restored.checkpoint_id
    )
    await checkpointer.create(
        workflow.name,
        encode_description(workflow.description),
        barrier,
        restored.snapshots,
        parent_run_id=run_id,
    )
    return new_id


async def run_history(store: Store, run_id: str) -> RunHistory:
    """A run's row, checkpoints and forks."""
    run = await store.get_run(run_id)
    return RunHistory(
        run=run,
        checkpoints=await store.list_checkpoints(run_id),
        forks=await store.list_runs(parent_run_id=run_id),
    )


async def cancel_run(store: Store, run_id: str) -> None:
    """Mark a resting run ``CANCELLED``; its last checkpoint stays intact.

    Raises:
        RequestError: the run has ended already.
    """
    row = await store.get_run(run_id)
    if RunStatus(row.status) in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.STALLED):
        msg = f"run {run_id!r} has ended ({row.status}); there is nothing to cancel"
        raise RequestError(msg)
    await store.set_status(run_id, RunStatus.CANCELLED.value)
