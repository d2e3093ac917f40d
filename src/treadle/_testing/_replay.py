"""The replay check: does new code make the decisions a stored run recorded?

Each recorded superstep is replayed on its own: checkpoint ``k`` is copied
into a fresh :class:`MemoryStore`, the new workflow runs exactly one
superstep from it there (deterministically, on a fake clock set to when
the recorded superstep ran, with the answer the run was given), and what it
did is compared with what the log and checkpoint ``k + 1`` recorded: which
executors ran, the messages they routed (targets and payload types), and
the journals of the invocations that suspended (kinds and names, in
order). Journaled waits re-executed with a journal check themselves: a
handler that now calls its steps in another order fails with
``JournalMismatchError``, reported as the divergence.

Nothing reaches the recorded store: the copy is in memory, and only the
handlers' own side effects happen.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from treadle._exceptions import TreadleError
from treadle._stores._memory import MemoryStore
from treadle._testing._clock import FakeClock

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._store import CheckpointInfo, LoggedEvent, RunRecord, Store
    from treadle._workflow._workflow import Workflow

_EXECUTOR_KINDS = ("executor_invoked", "executor_completed", "executor_suspended", "output")


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the new code first decided differently from a recorded run.

    Attributes:
        run_id: The run.
        superstep: The superstep replayed (from the checkpoint before it).
        executor_id: The executor that diverged (``None``: the superstep as a whole).
        what: What differs: ``"executors"``, ``"events"``, ``"messages"``,
            ``"journal"`` or ``"error"``.
        recorded: What the run recorded.
        replayed: What the new code did.
        step: The journaled step or wait where it diverged, when it is one.
    """

    run_id: str
    superstep: int
    executor_id: str | None
    what: str
    recorded: Any
    replayed: Any
    step: str | None = None

    def describe(self) -> str:
        """One line naming the run, superstep, executor and step."""
        where = f"run {self.run_id} superstep {self.superstep}"
        if self.executor_id is not None:
            where += f" executor {self.executor_id!r}"
        if self.step is not None:
            where += f" step {self.step!r}"
        return (
            f"{where}: {self.what} differ: recorded {self.recorded!r}, replayed {self.replayed!r}"
        )


@dataclass(frozen=True, slots=True)
class RunReplay:
    """One run's replay: how many supersteps matched, its first divergence, what was skipped."""

    run_id: str
    supersteps: int
    divergence: Divergence | None = None
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """Every run's replay; ``ok`` when none diverged."""

    runs: tuple[RunReplay, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Whether every run replayed as recorded."""
        return all(run.divergence is None for run in self.runs)

    @property
    def divergences(self) -> list[Divergence]:
        """The first divergence of each run that has one."""
        return [run.divergence for run in self.runs if run.divergence is not None]


@dataclass(frozen=True, slots=True)
class _Decisions:
    """What one superstep decided, in the terms the check compares."""

    executors: tuple[str, ...]
    events: tuple[tuple[str, str | None], ...]
    messages: dict[str, tuple[str, ...]]
    journals: dict[str, tuple[tuple[str, str], ...]]
    error: tuple[str, str] | None = None


async def replay(
    workflow: Workflow, store: Store, run_ids: Sequence[str] | None = None
) -> ReplayReport:
    """Check ``workflow`` against runs recorded in ``store`` (default: every run of its name).

    Returns a report naming, per run, the first superstep where the new
    code routed, ran or journaled differently (see the module docstring).
    """
    if run_ids is None:
        listed = await store.list_runs(workflow=workflow.name)
        run_ids = [run.run_id for run in listed]
    return ReplayReport(tuple([await _replay_run(workflow, store, run_id) for run_id in run_ids]))


async def _replay_run(workflow: Workflow, store: Store, run_id: str) -> RunReplay:
    run = await store.get_run(run_id)
    graph = await store.get_graph(run_id)
    events = await store.read_events(run_id)
    checkpoints = await store.list_checkpoints(run_id)
    skipped: list[str] = []
    replayed = 0
    for before, after in pairwise(checkpoints):
        if after.superstep != before.superstep + 1:
            continue  # pruned in between, or a branch: nothing recorded to compare with
        logged = [e for e in events if e.superstep == after.superstep]
        recorded = await _recorded(workflow, store, after, logged)
        outcome = await _replayed(workflow, store, (run, graph), before, logged, skipped)
        if outcome is None:
            continue
        replayed += 1
        divergence = _first_divergence(run_id, after.superstep, recorded, outcome)
        if divergence is not None:
            return RunReplay(run_id, replayed, divergence, tuple(skipped))
    return RunReplay(run_id, replayed, None, tuple(skipped))


async def _recorded(
    workflow: Workflow, store: Store, info: CheckpointInfo, logged: list[LoggedEvent]
) -> _Decisions:
    record = await store.load_checkpoint(info.run_id, info.checkpoint_id)
    restored = workflow.codec.decode(record, run_id=info.run_id)
    return _decisions(restored, logged)


async def _replayed(
    workflow: Workflow,
    store: Store,
    row: tuple[RunRecord, bytes],
    before: CheckpointInfo,
    logged: list[LoggedEvent],
    skipped: list[str],
) -> _Decisions | None:
    """Run the superstep after ``before`` with ``workflow`` on a memory copy; ``None``: skipped."""
    run, graph = row
    record = await store.load_checkpoint(before.run_id, before.checkpoint_id)
    started = [e for e in logged if e.kind == "superstep_started"]
    if not started:
        return None
    memory = MemoryStore()
    copy = replace(
        run,
        status=before.status,
        superstep=before.superstep,
        checkpoint_id=before.checkpoint_id,
        parent_run_id=None,
        parent_checkpoint_id=None,
        error=None,
        wake_at=before.wake_at,
    )
    await memory.create_run(
        copy, graph, replace(record, info=replace(record.info, parent_checkpoint_id=None))
    )
    try:
        if not await _deliver_answers(workflow, store, memory, run.run_id, before, skipped):
            return None
        clock = FakeClock(start=started[0].at)
        # The limit stops it after one superstep; a handler's failure is in the log.
        with contextlib.suppress(TreadleError):
            await workflow.resume(
                run.run_id,
                store=memory,
                deterministic=True,
                clock=clock,
                max_supersteps=before.superstep + 1,
            )
        mine = [
            e for e in await memory.read_events(run.run_id) if e.superstep == before.superstep + 1
        ]
        after = await memory.load_checkpoint(run.run_id)
        if after.info.superstep != before.superstep + 1:
            return _decisions(None, mine)
        return _decisions(workflow.codec.decode(after, run_id=run.run_id), mine)
    finally:
        await memory.close()


async def _deliver_answers(
    workflow: Workflow,
    store: Store,
    memory: MemoryStore,
    run_id: str,
    before: CheckpointInfo,
    skipped: list[str],
) -> bool:
    """Put the answers the run was given to the requests open at ``before`` in the copy's inbox."""
    record = await store.load_checkpoint(run_id, before.checkpoint_id)
    restored = workflow.codec.decode(record, run_id=run_id)
    if any(s.wait.kind == "input" for s in restored.waits.suspended):
        # Session messages are not kept once applied: nothing to replay them with.
        skipped.append(f"superstep {before.superstep + 1}: waits for session input")
        return False
    items: list[tuple[str, str | None, bytes]] = []
    for request in restored.waits.pending_requests():
        kept = await store.answered_payload(run_id, request.request_id)
        if kept is None:
            continue  # not answered (yet): the superstep ran without it
        items.append(("answer", request.request_id, kept))
    if items:
        await memory.deliver(run_id, items)
    return True


def _decisions(restored: RestoredRun | None, logged: list[LoggedEvent]) -> _Decisions:
    started = [e for e in logged if e.kind == "superstep_started"]
    executors = tuple(started[0].data.get("executor_ids", ())) if started else ()
    events = tuple((e.kind, e.executor_id) for e in logged if e.kind in _EXECUTOR_KINDS)
    error = None
    for event in logged:
        if event.kind == "executor_failed" and not event.data.get("retrying"):
            raised = event.data.get("error") or {}
            error = (str(event.executor_id), f"{raised.get('type')}: {raised.get('message')}")
            break
    if restored is None:
        return _Decisions(executors, events, {}, {}, error)
    messages = {
        target: tuple(_type_name(e.payload) for e in inbox)
        for target, inbox in sorted(restored.pending.items())
        if inbox
    }
    journals = {
        s.executor_id: tuple((kind, name) for kind, name, _ in s.journal)
        for s in restored.waits.suspended
    }
    return _Decisions(executors, events, messages, journals, error)


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _first_divergence(
    run_id: str, superstep: int, recorded: _Decisions, replayed: _Decisions
) -> Divergence | None:
    if replayed.error is not None and replayed.error != recorded.error:
        executor_id, message = replayed.error
        step = (
            message.split("handler now called ", 1)[1].split(";")[0]
            if "now called" in message
            else None
        )
        return Divergence(run_id, superstep, executor_id, "error", recorded.error, message, step)
    if recorded.executors != replayed.executors:
        return Divergence(
            run_id, superstep, None, "executors", recorded.executors, replayed.executors
        )
    for executor_id in sorted(set(recorded.journals) | set(replayed.journals)):
        old = recorded.journals.get(executor_id, ())
        new = replayed.journals.get(executor_id, ())
        if old != new:
            index = next(
                (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
                min(len(old), len(new)),
            )
            step = (new[index] if index < len(new) else old[index])[1]
            return Divergence(run_id, superstep, executor_id, "journal", old, new, step)
    if recorded.events != replayed.events:
        index = next(
            (
                i
                for i, (a, b) in enumerate(zip(recorded.events, replayed.events, strict=False))
                if a != b
            ),
            0,
        )
        where = (replayed.events or recorded.events)[
            min(index, len(replayed.events or recorded.events) - 1)
        ][1]
        return Divergence(run_id, superstep, where, "events", recorded.events, replayed.events)
    if recorded.messages != replayed.messages:
        return Divergence(run_id, superstep, None, "messages", recorded.messages, replayed.messages)
    return None
