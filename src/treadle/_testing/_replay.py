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

Nothing reaches the recorded store: the copy is in memory. No step runs
again either: its side effects (a reminder sent, a payment made) happened
when the run was recorded. Each invocation that suspended in the recorded
superstep replays with the journal it was kept with, so every ``ctx.step``
returns its recorded result; a step that journal does not hold is never
called (``_engine/_replaying.py``): in an invocation the run kept a journal
for, it is a step the new code added, reported as a divergence; in one that
completed (whose steps' results a run does not keep) the superstep cannot
be compared past it, and is listed as skipped, with why.

A run is checked against the code of its own version: the workflows given
are looked up by the run's name and version, and a run whose version is not
among them is skipped, its report saying so (``RunReplay.checked``).
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from treadle._engine._replaying import REPLAYING, ReplayJournals, StepNotReplayed
from treadle._exceptions import TreadleError
from treadle._stores._memory import MemoryStore
from treadle._testing._clock import FakeClock
from treadle._workflow._versions import Hosted
from treadle._workflow._workflow import Workflow

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._store import CheckpointInfo, LoggedEvent, RunRecord, Store

# JournalMismatchError's message, as the log keeps it: where, and what the handler called.
_JOURNAL_MISMATCH = re.compile(r"at position (\d+), but the handler now called (\w+) (.+?); keep ")

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
    """One run's replay: how many supersteps matched, its first divergence, what was skipped.

    Attributes:
        run_id: The run.
        supersteps: How many of its supersteps were replayed and compared.
        divergence: The first divergence, or ``None``.
        skipped: What was not compared, each with why (a superstep, or the
            whole run when ``checked`` is false).
        checked: Whether the run was checked at all: ``False`` for a run of a
            version (or workflow) the code given does not hold.
    """

    run_id: str
    supersteps: int
    divergence: Divergence | None = None
    skipped: tuple[str, ...] = ()
    checked: bool = True


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
    workflow: Workflow | Iterable[Workflow], store: Store, run_ids: Sequence[str] | None = None
) -> ReplayReport:
    """Check new code against runs recorded in ``store``, each run against its own version.

    ``workflow`` is the new code: one workflow, or several (every version a
    module holds). A run is replayed with the one of its name and version;
    a run of a version not given is skipped, and its report says so. By
    default every run of the workflows' names is checked.

    Returns a report naming, per run, the first superstep where the new
    code routed, ran or journaled differently (see the module docstring).
    No step body runs: each returns its journaled result.
    """
    hosted = Hosted([workflow] if isinstance(workflow, Workflow) else workflow)
    if run_ids is None:
        run_ids = [
            run.run_id for name in hosted.names() for run in await store.list_runs(workflow=name)
        ]
    report = []
    for run_id in run_ids:
        run = await store.get_run(run_id)
        code = hosted.get(run.workflow, run.version)
        if code is None:
            why = (
                f"run of {run.workflow!r} version {run.version} not checked: "
                f"the code given holds {hosted.describe()}"
            )
            report.append(RunReplay(run_id, 0, None, (why,), checked=False))
        else:
            report.append(await _replay_run(code, store, run))
    return ReplayReport(tuple(report))


async def _replay_run(workflow: Workflow, store: Store, run: RunRecord) -> RunReplay:
    run_id = run.run_id
    graph = await store.get_graph(run_id)
    events = await store.read_events(run_id)
    checkpoints = await store.list_checkpoints(run_id)
    skipped: list[str] = []
    # Supersteps up to a migration ran on the version the run was moved from.
    migrated = max((e.superstep for e in events if e.kind == "run_migrated"), default=-1)
    if migrated >= 0:
        skipped.append(f"supersteps to {migrated}: recorded before a migration to this version")
    replayed = 0
    for before, after in pairwise(checkpoints):
        if after.superstep != before.superstep + 1 or after.superstep <= migrated:
            continue  # pruned in between, a branch or a migration: nothing to compare with
        logged = [e for e in events if e.superstep == after.superstep]
        restored = workflow.codec.decode(
            await store.load_checkpoint(run_id, after.checkpoint_id), run_id=run_id
        )
        recorded = _decisions(restored, logged)
        journals = ReplayJournals(
            {(s.executor_id, s.envelope.stamp): s.journal for s in restored.waits.suspended}
        )
        try:
            outcome = await _replayed(
                workflow, store, (run, graph), before, (logged, journals), skipped
            )
        except StepNotReplayed as stop:
            divergence = _unjournaled(run_id, after.superstep, recorded, stop, skipped)
            if divergence is not None:
                return RunReplay(run_id, replayed + 1, divergence, tuple(skipped))
            continue
        if outcome is None:
            continue
        replayed += 1
        divergence = _first_divergence(run_id, after.superstep, recorded, outcome)
        if divergence is not None:
            return RunReplay(run_id, replayed, divergence, tuple(skipped))
    return RunReplay(run_id, replayed, None, tuple(skipped))


def _unjournaled(
    run_id: str, superstep: int, recorded: _Decisions, stop: StepNotReplayed, skipped: list[str]
) -> Divergence | None:
    """A step the replay did not run: a divergence, or (unknowable) a skipped superstep.

    An invocation the run kept a journal for (it suspended) journaled every
    step it reached: one past them is a step the new code added. One that
    completed kept no results of the steps it ran; whether the recorded run
    called this one cannot be told, so the superstep is not compared.
    """
    old = recorded.journals.get(stop.executor_id)
    if old is None:
        skipped.append(
            f"superstep {superstep}: executor {stop.executor_id!r} reached {stop.kind} "
            f"{stop.name!r}, whose result the run did not keep (the invocation completed); "
            f"not run again, so the superstep is not compared"
        )
        return None
    new = (*old[: stop.cursor], (stop.kind, stop.name))
    return Divergence(run_id, superstep, stop.executor_id, "journal", old, new, stop.name)


async def _replayed(
    workflow: Workflow,
    store: Store,
    row: tuple[RunRecord, bytes],
    before: CheckpointInfo,
    recorded: tuple[list[LoggedEvent], ReplayJournals],
    skipped: list[str],
) -> _Decisions | None:
    """Run the superstep after ``before`` with ``workflow`` on a memory copy; ``None``: skipped.

    Raises:
        StepNotReplayed: A handler reached a step ``recorded`` holds no result for.
    """
    run, graph = row
    logged, journals = recorded
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
        token = REPLAYING.set(journals)
        # The limit stops it after one superstep; a handler's failure is in the log.
        try:
            with contextlib.suppress(TreadleError):
                await workflow.resume(
                    run.run_id,
                    store=memory,
                    deterministic=True,
                    clock=clock,
                    max_supersteps=before.superstep + 1,
                )
        except BaseExceptionGroup as group:  # raised in a task of the run's
            stops = group.subgroup(StepNotReplayed)
            if stops is None:
                raise
            raise _first_leaf(stops) from group
        finally:
            REPLAYING.reset(token)
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


def _first_leaf(group: BaseExceptionGroup[StepNotReplayed]) -> StepNotReplayed:
    """The first step that stopped a replay, out of the groups its tasks wrapped it in."""
    first = group.exceptions[0]
    return first if isinstance(first, StepNotReplayed) else _first_leaf(first)


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
        mismatch = _JOURNAL_MISMATCH.search(message)
        if mismatch is None:
            return Divergence(run_id, superstep, executor_id, "error", recorded.error, message)
        # Replayed with its recorded journal, the handler reached another step than kept there.
        position, kind, name = int(mismatch[1]), mismatch[2], ast.literal_eval(mismatch[3])
        old = recorded.journals.get(executor_id)
        if old is None:
            return Divergence(
                run_id, superstep, executor_id, "error", recorded.error, message, name
            )
        new = (*old[:position], (kind, name))
        return Divergence(run_id, superstep, executor_id, "journal", old, new, name)
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
