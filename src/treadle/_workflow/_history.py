"""A run's history and its branches: forks, and resumes from an older checkpoint.

A fork is a new run whose first checkpoint is a (patched) copy of one of
another run's; a resume from an older checkpoint branches the run itself
there, once its first superstep writes. :class:`RunHistory` is what a run's
lineage looks like to a reader: its checkpoints and the runs forked from it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._checkpointer import Checkpointer
from treadle._engine._barrier import BarrierState
from treadle._engine._result import RunStatus
from treadle._engine._state import checked_keys
from treadle._exceptions import (
    GraphChangedError,
    RequestError,
    SerializationError,
    VersionMismatchError,
)
from treadle._values import _ids
from treadle._values._schedules import chosen_run_id
from treadle._workflow._runs import load_restored

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._store import CheckpointInfo, RunReads, RunRecord, Store
    from treadle._values._actors import Actor
    from treadle._workflow._workflow import Workflow


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


async def check_branch(store: Store, restored: RestoredRun) -> None:
    """Refuse a resume from an older checkpoint where the run would only rest, running nothing.

    Called by the resume door before it takes the run (a resume refused
    takes and records nothing); a session's rollback, which delivers a
    message at the branch, is not such a resume.

    A branch is written by its first superstep; a point that runs none (it
    awaits an answer, with no message, timer or deadline to go on with)
    would write nothing, and its resume said the run awaited input again
    while the run stayed as it was. A decision made since stays made (the
    first answer to a request is its only one): a fork goes on from there
    as a new run, whose requests can be answered anew.

    Raises:
        RequestError: naming the checkpoint and the fork that goes on from it.
    """
    rests = not (
        restored.pending
        or restored.spawned
        or restored.deadline_at is not None
        or restored.waits.next_wake_at() is not None
    )
    if not rests:
        return
    head = (await store.get_run(restored.run_id)).checkpoint_id
    if head == restored.checkpoint_id:
        return
    run_id, checkpoint_id = restored.run_id, restored.checkpoint_id
    msg = (
        f"resuming run {run_id!r} from checkpoint {checkpoint_id!r} would run nothing: the run "
        f"rests there ({restored.status}), and what was decided since stays decided; fork it "
        f"to go on from there as a new run (treadle fork {run_id} --checkpoint {checkpoint_id})"
    )
    raise RequestError(msg)


async def fork_point(
    workflow: Workflow, store: Store, run_id: str, checkpoint_id: str
) -> RestoredRun:
    """The checkpoint a fork starts from, decoded by the version of the workflow that wrote it.

    A run moved to another version (``treadle migrate``) keeps the
    checkpoints it had before the move, parented under the move's; those
    were written by the version it moved from, whose code forks them (a new
    run of that version), though the run itself is on another one now.

    Raises:
        VersionMismatchError: the run is on another version, and this
            version's graph did not write the checkpoint either.
        GraphChangedError, CheckpointNotFoundError, ...: as :func:`load_restored`
            (a cancelled run's checkpoints fork like any other: the fork is a new run).
    """
    loaded = await store.load_resumable(run_id, checkpoint_id)
    row, _, record = loaded
    if row.version == workflow.version or record is None:
        return await load_restored(workflow, store, run_id, checkpoint_id, loaded, forking=True)
    mismatch = VersionMismatchError(run_id, row.workflow, row.version, workflow.version)
    try:
        restored = workflow.codec.decode(record, run_id=run_id)
    except SerializationError as error:  # it names types of another version's graph
        raise mismatch from error
    if restored.fingerprint != workflow.fingerprint:
        raise mismatch
    return restored


async def fork_run(
    workflow: Workflow,
    store: Store,
    run_id: str,
    checkpoint_id: str,
    state_patch: Mapping[str, Any] | None,
    new_run_id: str | None,
    *,
    started_by: str | None = None,
) -> str:
    """Create a run branching from a checkpoint, its state patched; return its id.

    ``started_by``: who forks it (an actor as JSON text), recorded with the
    new run as ``run_forked``.

    Raises:
        ValueError: ``new_run_id`` breaks the rule every door names runs by
            (:data:`~treadle._values._ids.RUN_ID_RULE`); nothing is stored.
    """
    if new_run_id is not None:
        chosen_run_id(new_run_id)  # as a started run's (and a fork is never a schedule's tick)
    restored = await fork_point(workflow, store, run_id, checkpoint_id)
    new_id = new_run_id or _ids.new_run_id()
    barrier = BarrierState(
        run_id=new_id,
        superstep=restored.superstep,
        status=RunStatus(restored.status) if not restored.pending else RunStatus.RUNNING,
        pending={k: tuple(v) for k, v in restored.pending.items()},
        fan_in_buffers=restored.fan_in_buffers,
        state={**restored.state, **checked_keys("state_patch", state_patch or {})},
        iterations=restored.iterations,
        outputs=tuple(restored.outputs),
        waits=restored.waits,
        deadline_at=restored.deadline_at,
        spawned=restored.spawned,
        outcome=restored.outcome,
        written=frozenset(state_patch or ()),
        branch=restored.branch,
    )
    # The fork's first checkpoint names its parent's pieces for all it did not patch.
    checkpointer = Checkpointer(
        store, workflow.codec, workflow.fingerprint, base=restored, fields=workflow.search_fields
    )
    await checkpointer.create(
        workflow.name,
        workflow.stored_description,
        barrier,
        restored.snapshots,
        parent_run_id=run_id,
        version=workflow.version,
        started_by=started_by,
    )
    return new_id


async def run_history(store: RunReads, run_id: str) -> RunHistory:
    """A run's row, checkpoints and forks."""
    run = await store.get_run(run_id)
    return RunHistory(
        run=run,
        checkpoints=await store.list_checkpoints(run_id),
        forks=await store.list_runs(parent_run_id=run_id),
    )


async def fork_on_its_version(
    workflow: Workflow,
    others: Callable[[], Iterable[Workflow]],
    run_id: str,
    checkpoint_id: str,
    state_patch: Mapping[str, Any] | None,
    *,
    store: Store,
    actor: Actor | None,
    new_run_id: str | None = None,
) -> str:
    """Fork with ``workflow`` (the run's version), else with the first of ``others`` that can.

    A checkpoint from before a migration was written by the version the run
    moved from: that version forks it (:func:`fork_point`), the run's own
    refuses it as a changed graph. ``others`` (the other versions at hand,
    newest first: a module's, a server's) is asked for only then.

    Raises:
        GraphChangedError: no version at hand wrote it (the run's version's error).
    """

    async def fork_with(version: Workflow) -> str:
        return await version.fork(
            run_id, checkpoint_id, state_patch, new_run_id=new_run_id, store=store, actor=actor
        )

    try:
        return await fork_with(workflow)
    except GraphChangedError:
        for other in others():
            with contextlib.suppress(GraphChangedError):
                return await fork_with(other)
        raise
