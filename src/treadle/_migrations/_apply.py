"""Running migration functions over a checkpoint, and checking the result against the new graph.

:func:`apply_migrations` is pure: it reads a decoded checkpoint, runs the
functions of a migration path over what they see of it, and returns the
barrier a new checkpoint is made of, or raises :class:`MigrationError`
listing every reason the new version could not go on from it. Writing it
(under the run's lease, with the run moved to the new version) is the
caller's.

The result is checked as the engine will use it, so a run that moves also
runs: every executor it refers to is in the new graph, every message it
holds has a handler at its target, fan-in buffers match the new graph's
fan-ins, sub-workflow runs match their new sub-workflows, and the whole
checkpoint encodes with the new version's codec and decodes back.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._delta import PieceCache
from treadle._engine._barrier import BarrierState
from treadle._engine._result import RunStatus
from treadle._exceptions import MigrationError, TreadleError
from treadle._migrations._contents import CheckpointContents, contents_of
from treadle._migrations._parts import CheckpointParts, executor_of, messages_for
from treadle._stores._records import CheckpointInfo, CheckpointRecord
from treadle._values._ids import new_checkpoint_id
from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from treadle._checkpoints._codec import RestoredRun
    from treadle._engine._delivery import FanInBuffer
    from treadle._migrations._steps import Migration
    from treadle._workflow._workflow_graph import WorkflowGraph


@dataclass(frozen=True, slots=True)
class MigratedCheckpoint:
    """A run's checkpoint moved to a new version, checked, not yet written.

    Attributes:
        barrier: What the new checkpoint holds (run, superstep and status
            as before; ``written=None``, so every state value is stored).
        snapshots: The executors' snapshots that go with it.
        before: What the first migration received.
        after: What the last one returned (its ``renamed`` and
            ``dropped`` say what moved).
    """

    barrier: BarrierState
    snapshots: Mapping[str, Any]
    before: CheckpointContents
    after: CheckpointContents


def apply_migrations(
    restored: RestoredRun,
    path: Sequence[Migration],
    new_workflow: WorkflowGraph,
    *,
    executors: Iterable[str] = (),
) -> MigratedCheckpoint:
    """Run ``path``'s functions over ``restored``, in order, and check the result.

    Args:
        restored: The run's checkpoint, decoded (by the old version's codec
            when at hand).
        path: The migrations from the run's version to ``new_workflow``'s
            (:func:`migration_path`); empty, the checkpoint is only checked.
        new_workflow: The version the run moves to.
        executors: The executor ids of the run's version, when known (see
            :func:`contents_of`).

    Raises:
        MigrationError: A function raised or returned something else than
            ``CheckpointContents``, or the result does not fit
            ``new_workflow``; ``reasons`` lists every problem found.
        ValueError: ``path`` is not a chain of migrations of ``new_workflow``.
    """
    path = tuple(path)
    _check_path(path, new_workflow.name)
    version = path[0].from_version if path else new_workflow.version
    before = contents_of(restored, new_workflow.name, version, executors=executors)
    contents = before
    for step in path:
        contents = _run_one(step, replace(contents, version=step.from_version))
    after = contents
    barrier, snapshots, problems = _checked(restored, after, new_workflow)
    if problems:
        raise MigrationError(problems, restored.run_id)
    return MigratedCheckpoint(barrier, snapshots, before, after)


def _check_path(path: Sequence[Migration], name: str) -> None:
    for step in path:
        if step.workflow != name:
            msg = f"migration {step.name} is for workflow {step.workflow!r}, not {name!r}"
            raise ValueError(msg)
    for earlier, later in itertools.pairwise(path):
        if earlier.to_version != later.from_version:
            msg = (
                f"migrations {earlier.name} (to version {earlier.to_version}) and "
                f"{later.name} (from version {later.from_version}) do not follow each other"
            )
            raise ValueError(msg)


def _run_one(step: Migration, contents: CheckpointContents) -> CheckpointContents:
    """One migration function's result, or the reason it has none."""
    label = f"migration {step.name} (version {step.from_version} -> {step.to_version})"
    try:
        result = step(contents)
    except Exception as error:  # the team's code: any failure is a reason
        reason = f"{label} raised {error_text(error)}"
        raise MigrationError([reason], contents.run_id) from error
    if not isinstance(result, CheckpointContents):
        reason = (
            f"{label} returned a {type(result).__qualname__}, not CheckpointContents: return "
            f"the value its methods make (run.rename_executor(...), run.with_state(...))"
        )
        raise MigrationError([reason], contents.run_id)
    changed = [
        f"{name} ({getattr(contents, name)!r} -> {getattr(result, name)!r})"
        for name in ("run_id", "workflow", "superstep", "status")
        if getattr(result, name) != getattr(contents, name)
    ]
    if changed:
        reason = f"{label} changed {', '.join(changed)}, which a migration cannot change"
        raise MigrationError([reason], contents.run_id)
    return replace(result, version=step.to_version)


# -- the check ------------------------------------------------------------------------------


def _checked(
    restored: RestoredRun, after: CheckpointContents, workflow: WorkflowGraph
) -> tuple[BarrierState, Mapping[str, Any], list[str]]:
    """The barrier ``after`` makes, its snapshots, and every problem the new version has with it."""
    parts = after._parts  # noqa: SLF001 - the engine's half, kept for this module
    label = f"version {after.version} of {after.workflow!r}"
    problems = _graph_problems(parts, workflow, "", label)
    fan_in, fan_in_problems = _aligned_fan_ins(parts.fan_in, workflow, "", label)
    problems += fan_in_problems
    barrier = BarrierState(
        run_id=restored.run_id,
        superstep=restored.superstep,
        status=RunStatus(restored.status),
        pending=dict(parts.pending),
        fan_in_buffers=fan_in,
        state=dict(after.state),
        iterations=dict(parts.iterations),
        outputs=parts.outputs,
        waits=parts.wait_book(),
        deadline_at=parts.deadline_at,
        spawned=parts.spawned,
        outcome=restored.outcome,
        written=None,
        branch=restored.branch,
    )
    snapshots = dict(parts.snapshots)
    storing = _value_problems(after, workflow)
    problems += storing
    if not storing:
        problems += _round_trip(restored, barrier, snapshots, workflow)
    return barrier, snapshots, problems


def _graph_problems(
    parts: CheckpointParts, graph: WorkflowGraph, where: str, version: str
) -> list[str]:
    """Executors the checkpoint refers to that ``graph`` lacks, and messages it would refuse.

    ``where`` prefixes executor ids inside a sub-workflow (``"legal/"``);
    ``version`` names the graph in messages.
    """
    problems: list[str] = []
    present = set(graph.executor_ids)
    missing: dict[str, list[str]] = {}
    for executor_id, what in parts.references():
        if executor_id not in present:
            missing.setdefault(executor_id, []).append(what)
    for executor_id, whats in missing.items():
        problems.append(
            f"executor {where}{executor_id!r} is not in {version}, but the checkpoint still "
            f"refers to it: {'; '.join(dict.fromkeys(whats))}. rename_executor({executor_id!r}, "
            f"...) to the executor that takes its place, or drop_executor({executor_id!r})"
        )
    for executor_id in sorted(present):
        prototype = graph.prototype(executor_id)
        for envelope in messages_for(parts, executor_id):
            payload = envelope.payload
            if prototype.find_handler(type(payload)) is None:
                takes = ", ".join(t.__qualname__ for t in prototype.accepted_types()) or "nothing"
                problems.append(
                    f"a {type(payload).__qualname__} on its way to {where}{executor_id!r} "
                    f"(from {envelope.source!r}) has no handler there in {version} (it takes: "
                    f"{takes}); convert it with with_pending({executor_id!r}, [...])"
                )
    for key, run in parts.nested.items():
        executor_id = executor_of(key)
        if executor_id not in present:
            continue  # named above
        inner = graph.subgraph_of(executor_id)
        if inner is None:
            problems.append(
                f"executor {where}{executor_id!r} holds a sub-workflow run, but is not a "
                f"sub-workflow in {version}"
            )
            continue
        nested = CheckpointParts.of(run.barrier, run.snapshots)
        path = f"{where}{executor_id}/"
        inside = f"sub-workflow {inner.name!r} of {version}"
        problems += _graph_problems(nested, inner, path, inside)
        problems += _aligned_fan_ins(nested.fan_in, inner, path, inside)[1]
    return problems


def _aligned_fan_ins(
    buffers: tuple[FanInBuffer, ...], graph: WorkflowGraph, where: str, version: str
) -> tuple[tuple[FanInBuffer, ...], list[str]]:
    """The buffers, one per fan-in of ``graph`` (each where its index says); what does not fit."""
    edges = graph.router.fan_ins
    aligned: list[FanInBuffer] = [{} for _ in edges]
    problems: list[str] = []
    for index, buffer in enumerate(buffers):
        if not buffer:
            continue
        held = ", ".join(map(repr, buffer))
        if index >= len(edges):
            problems.append(
                f"fan-in #{index} holds messages from {held}, but {version} has "
                f"{len(edges)} fan-in(s)"
            )
            continue
        edge = edges[index]
        if not set(buffer) <= set(edge.sources):
            problems.append(
                f"fan-in #{index} holds messages from {held}, but in {version} it is "
                f"{list(edge.sources)!r} -> {where}{edge.target!r}"
            )
            continue
        aligned[index] = buffer
    return tuple(aligned), problems


def _value_problems(after: CheckpointContents, workflow: WorkflowGraph) -> list[str]:
    """Each value the new version's serializer cannot store, named where it sits."""
    serializer = workflow.codec.serializer
    store: Callable[[Any], Any] = getattr(serializer, "to_json", serializer.dumps)
    parts = after._parts  # noqa: SLF001 - the engine's half, kept for this module
    located: list[tuple[str, Any]] = [(f"state key {k!r}", v) for k, v in after.state.items()]
    for executor_id, payloads in after.pending.items():
        located += [(f"a message on its way to {executor_id!r}", p) for p in payloads]
    for s in parts.suspended:
        located.append(
            (f"what {s.executor_id!r}'s {s.wait.kind} {s.wait.key!r} holds", s.wait.payload)
        )
        located += [
            (f"{s.executor_id!r}'s journal entry {name!r}", value) for _, name, value in s.journal
        ]
    located += [(f"the snapshot of {e!r}", v) for e, v in parts.snapshots.items()]
    located += [(f"output #{i}", v) for i, v in enumerate(parts.outputs)]
    problems = []
    version = f"version {after.version} of {after.workflow!r}"
    for where, value in located:
        try:
            store(value)
        except (TreadleError, TypeError, ValueError) as error:
            problems.append(
                f"{where} holds a {type(value).__qualname__} that {version} cannot store: {error}"
            )
    return problems


def _round_trip(
    restored: RestoredRun,
    barrier: BarrierState,
    snapshots: Mapping[str, Any],
    workflow: WorkflowGraph,
) -> list[str]:
    """Encode the barrier as the new version will, and decode it back: what fails, if anything."""
    codec = workflow.codec
    try:
        encoded = codec.encode(barrier, workflow.fingerprint, snapshots, PieceCache())
        info = CheckpointInfo(
            checkpoint_id=new_checkpoint_id(),
            run_id=barrier.run_id,
            superstep=barrier.superstep,
            status=barrier.status.value,
            parent_checkpoint_id=restored.checkpoint_id,
            created_at=0.0,
            wake_at=barrier.wake_at,
        )
        record = CheckpointRecord(
            info, encoded.blob, encoded.refs, encoded.pieces, encoded.requires, ()
        )
        codec.decode(record, run_id=barrier.run_id)
    except (TreadleError, TypeError, ValueError) as error:
        return [f"the migrated checkpoint does not round-trip through the new codec: {error}"]
    return []
