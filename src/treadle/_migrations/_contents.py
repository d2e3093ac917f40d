"""What a migration function sees of a parked run, and the changes it may make.

A migration receives a :class:`CheckpointContents` and returns one. It is a
frozen value: each method returns a new one, so a function reads as a
chain (``run.rename_executor("write", "draft").with_state(priority=1)``)
and a function that raises halfway leaves nothing half done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from treadle._migrations._parts import (
    CheckpointParts,
    drop,
    held_waits,
    messages_for,
    rename,
    with_payloads,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._checkpoints._codec import RestoredRun

WaitKindName: TypeAlias = Literal["request", "input", "timer", "workflow", "scheduled", "approval"]


@dataclass(frozen=True, slots=True)
class WaitSummary:
    """One thing a parked run waits for, as a migration sees it (read only).

    Attributes:
        executor_id: The executor waiting: the one whose invocation is
            suspended, the target of a scheduled message, or the one that
            asked to hand off (for an approval).
        kind: ``"request"`` (an answer to ``ctx.request``), ``"input"``
            (session input), ``"timer"`` (``ctx.sleep``), ``"workflow"`` (a
            sub-workflow resting inside the invocation), ``"scheduled"`` (a
            message from ``ctx.schedule_message`` or ``continue_later``) or
            ``"approval"`` (a handoff waiting for a person).
        key: The request id for requests and approvals, the invocation's
            key for a sub-workflow, the schedule key for a scheduled
            message (``None`` when it has none).
        due_at: When a timer or scheduled message falls due, or a
            request's deadline (seconds since the epoch).
        payload: What a request asked; for an approval, the question a
            person sees; for a sub-workflow, its pending requests; for a
            scheduled message, the message.
        message: The message delivered when the wait ends: the one the
            suspended invocation handles again, the scheduled message, the
            payload handed off.
    """

    executor_id: str
    kind: WaitKindName
    key: str | None
    due_at: float | None = None
    payload: Any = None
    message: Any = None


@dataclass(frozen=True, slots=True)
class CheckpointContents:
    """A parked run's checkpoint, as a migration function receives and returns it.

    Made by treadle from a run's latest checkpoint; a migration changes it
    only through its methods (and ``dataclasses.replace(..., state=...)``),
    each returning a new value. What it may change: executor names
    (:meth:`rename_executor`), executors that are gone
    (:meth:`drop_executor`), state (:meth:`with_state`,
    :meth:`without_state`), the payloads of messages on their way
    (:meth:`with_pending`) and executors' snapshots (:meth:`with_snapshot`).
    Its identity (run, superstep, status), outputs and what each wait
    waits for stay as they were. A sub-workflow resting inside the run is
    carried as is: its executors are its own workflow's.

    Attributes:
        run_id: The run.
        workflow: The workflow's name.
        version: The version these contents are for: the migration's
            ``from_version`` when it receives them.
        superstep: The superstep the checkpoint was taken at.
        status: The run's status then (``"awaiting_input"``, ``"waiting"``...).
        state: The committed state, by key.
        renamed: Every executor renamed so far, by its name in the version
            the migrations started from (old → new).
        dropped: Every executor dropped so far, by that name.
    """

    run_id: str
    workflow: str
    version: int
    superstep: int
    status: str
    state: Mapping[str, Any]
    _parts: CheckpointParts = field(repr=False)
    renamed: Mapping[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    _graph: frozenset[str] = field(default=frozenset(), repr=False)
    """The executors of the version the contents are for, when the caller knew them."""

    # -- what the run holds ------------------------------------------------------------------
    @property
    def executors(self) -> tuple[str, ...]:
        """Every executor id the checkpoint refers to (messages, waits, counters), sorted."""
        return self._parts.executors()

    @property
    def pending(self) -> Mapping[str, tuple[Any, ...]]:
        """The payloads of the messages on their way to each executor.

        For each executor, in this order: its inbox (delivered next
        superstep, in delivery order); the messages its suspended
        invocations handle again once their waits end; the messages
        scheduled for it, in the order they were scheduled; the payloads
        handed off to it that wait for approval. :meth:`with_pending`
        replaces them in the same order. Messages buffered in a fan-in are
        not listed (they are delivered together, as one list).
        """
        parts = self._parts
        targets = {*parts.pending, *(s.executor_id for s in parts.suspended)}
        targets.update(m.target for m in parts.scheduled)
        targets.update(a.target for a in parts.approvals)
        found = {t: tuple(e.payload for e in messages_for(parts, t)) for t in sorted(targets)}
        return {t: payloads for t, payloads in found.items() if payloads}

    @property
    def waits(self) -> Mapping[str, tuple[WaitSummary, ...]]:
        """What each executor waits for (see :class:`WaitSummary`).

        Its suspended invocations, the messages scheduled for it, the
        handoffs it asked for that wait for approval, its sub-workflows.
        """
        parts = self._parts
        found: dict[str, list[WaitSummary]] = {}
        for s in parts.suspended:
            wait = s.wait
            payload = wait.payload
            if wait.kind == "workflow" and (nested := parts.nested.get(wait.key)) is not None:
                payload = tuple(nested.barrier.waits.pending_requests())
            summary = WaitSummary(
                s.executor_id, wait.kind, wait.key, wait.due_at, payload, s.envelope.payload
            )
            found.setdefault(s.executor_id, []).append(summary)
        for m in parts.scheduled:
            summary = WaitSummary(
                m.target, "scheduled", m.key, m.due_at, m.envelope.payload, m.envelope.payload
            )
            found.setdefault(m.target, []).append(summary)
        for a in parts.approvals:
            summary = WaitSummary(a.source, "approval", a.key, None, a.question, a.envelope.payload)
            found.setdefault(a.source, []).append(summary)
        return {executor_id: tuple(found[executor_id]) for executor_id in sorted(found)}

    @property
    def snapshots(self) -> Mapping[str, Any]:
        """Each executor's snapshot (``Executor.snapshot``), by executor id."""
        return dict(self._parts.snapshots)

    @property
    def iterations(self) -> Mapping[str, int]:
        """How many times each executor ran so far."""
        return dict(self._parts.iterations)

    @property
    def outputs(self) -> tuple[Any, ...]:
        """What the run output so far (a migration does not change it)."""
        return self._parts.outputs

    # -- changes -----------------------------------------------------------------------------
    def rename_executor(self, old: str, new: str) -> CheckpointContents:
        """The contents with executor ``old`` called ``new``: everything of it moves.

        Its pending messages, suspended invocations (with their journals),
        scheduled messages, handoff approvals, sub-workflow runs, spawned
        work, fan-in buffers, iteration count and snapshot, and the sender
        of every message it sent. Keys made from its id move too, so its
        handlers re-execute under the new id; the requests it asked keep
        their ids, so an answer sent before the move still fits.

        Raises:
            ValueError: ``old`` is not an executor of the run, or ``new``
                already is one.
        """
        _check_id("new", new)
        self._check_known(old)
        if new == old:
            return self
        if new in self._parts.executors():
            msg = (
                f"cannot rename {old!r} to {new!r} in run {self.run_id!r}: the checkpoint "
                f"already refers to {new!r}; drop_executor({new!r}) first or pick another name"
            )
            raise ValueError(msg)
        renamed = dict(self.renamed)
        original = next((o for o, n in renamed.items() if n == old), old)
        renamed[original] = new
        if original == new:  # renamed back
            del renamed[original]
        graph = self._graph - {old} | {new} if old in self._graph else self._graph
        parts = rename(self._parts, self.run_id, old, new)
        return replace(self, _parts=parts, renamed=renamed, _graph=graph)

    def drop_executor(self, executor_id: str, *, force: bool = False) -> CheckpointContents:
        """The contents without executor ``executor_id``: for an executor the new version lacks.

        Messages pending for it or scheduled for it, its spawned work,
        fan-in buffers' messages from it, its iteration count and snapshot
        are dropped. What someone outside waits on is dropped only with
        ``force=True``: its suspended invocations (the requests they asked
        go unanswered), its sub-workflow runs and the handoff approvals it
        asked for or would receive.

        Raises:
            ValueError: ``executor_id`` is not an executor of the run, or
                it holds waits and ``force`` is not given.
        """
        self._check_known(executor_id)
        held = held_waits(self._parts, executor_id)
        if held and not force:
            msg = (
                f"executor {executor_id!r} of run {self.run_id!r} holds {'; '.join(held)}: "
                f"dropping it drops what they wait for. Pass force=True to drop them too, "
                f"or rename_executor({executor_id!r}, ...) to an executor of the new version"
            )
            raise ValueError(msg)
        renamed = dict(self.renamed)
        original = next((o for o, n in renamed.items() if n == executor_id), executor_id)
        renamed.pop(original, None)
        dropped = self.dropped if original in self.dropped else (*self.dropped, original)
        return replace(
            self,
            _parts=drop(self._parts, executor_id),
            renamed=renamed,
            dropped=dropped,
            _graph=self._graph - {executor_id},
        )

    def with_state(
        self, values: Mapping[str, Any] | None = None, /, **more: Any
    ) -> CheckpointContents:
        """The contents with these state keys set (added, or replacing their values).

        ``with_state(priority="normal")`` or ``with_state({"priority": "normal"})``.

        Raises:
            TypeError: ``values`` is not a mapping of str keys.
        """
        if values is not None and not isinstance(values, Mapping):
            msg = f"with_state takes a mapping or keywords, got {type(values).__qualname__}"
            raise TypeError(msg)
        given = {**(values or {}), **more}
        for key in given:
            if not isinstance(key, str):
                msg = f"state keys are str, got {key!r}"
                raise TypeError(msg)
        return replace(self, state={**self.state, **given})

    def without_state(self, *keys: str) -> CheckpointContents:
        """The contents without these state keys.

        Keys the run does not hold are ignored: runs differ in what they wrote.
        """
        gone = set(keys)
        return replace(self, state={k: v for k, v in self.state.items() if k not in gone})

    def with_pending(self, executor_id: str, payloads: Sequence[Any]) -> CheckpointContents:
        """The contents with new payloads for the messages on their way to ``executor_id``.

        ``payloads`` replaces :attr:`pending` ``[executor_id]`` one for one,
        in the same order: the way to convert messages whose type the new
        version changed. Stamps, senders and journals stay.

        Raises:
            ValueError: ``executor_id`` has no messages on their way, or
                ``payloads`` has another count than it has.
        """
        if isinstance(payloads, str | bytes) or not hasattr(payloads, "__len__"):
            msg = f"with_pending takes a sequence of payloads, got {type(payloads).__qualname__}"
            raise TypeError(msg)
        waiting = messages_for(self._parts, executor_id)
        if not waiting:
            has = ", ".join(map(repr, self.pending)) or "none"
            msg = (
                f"no messages are on their way to {executor_id!r} in run {self.run_id!r} "
                f"(executors with messages: {has})"
            )
            raise ValueError(msg)
        if len(payloads) != len(waiting):
            msg = (
                f"{len(waiting)} message(s) are on their way to {executor_id!r} in run "
                f"{self.run_id!r}, got {len(payloads)} payload(s): give one for each"
            )
            raise ValueError(msg)
        return replace(self, _parts=with_payloads(self._parts, executor_id, list(payloads)))

    def with_snapshot(self, executor_id: str, snapshot: Any) -> CheckpointContents:
        """The contents with ``executor_id``'s snapshot replaced (what its ``restore`` gets).

        Raises:
            ValueError: ``executor_id`` is not an executor of the run.
        """
        self._check_known(executor_id)
        snapshots = {**self._parts.snapshots, executor_id: snapshot}
        return replace(self, _parts=replace(self._parts, snapshots=snapshots))

    def _check_known(self, executor_id: str) -> None:
        _check_id("executor_id", executor_id)
        known = self._parts.executors()
        if executor_id in known or executor_id in self._graph:
            return
        listed = ", ".join(map(repr, sorted({*known, *self._graph}))) or "none"
        msg = f"run {self.run_id!r} has no executor {executor_id!r} (it knows: {listed})"
        raise ValueError(msg)


def _check_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        msg = f"{name} must be a non-empty executor id (str), got {value!r}"
        raise TypeError(msg) if not isinstance(value, str) else ValueError(msg)


def contents_of(
    restored: RestoredRun, workflow: str, version: int, *, executors: Iterable[str] = ()
) -> CheckpointContents:
    """What a migration function sees of a decoded checkpoint.

    ``executors``: the executor ids of the version the checkpoint was
    written by, when known (its graph's). A migration may then rename or
    drop any of them, including those this run holds nothing of: the
    same function serves every run, wherever each is parked. Without
    them, only the executors the checkpoint refers to are known.
    """
    return CheckpointContents(
        run_id=restored.run_id,
        workflow=workflow,
        version=version,
        superstep=restored.superstep,
        status=restored.status,
        state=dict(restored.state),
        _parts=CheckpointParts.of(restored, restored.snapshots),
        _graph=frozenset(executors),
    )
