"""The engine's half of a checkpoint a migration moves, and how executors are renamed in it.

:class:`CheckpointParts` holds, as immutable values, everything of a decoded
checkpoint other than its state: messages with their stamps, waits with
their journals, counters, snapshots. ``CheckpointContents`` shows users a
plain view of it; the functions here do the work its methods promise.

Renaming an executor is more than renaming dict keys. Some keys are *made
from* executor ids and are recomputed when a handler runs again: a wait's
key (a request's id) is a hash of the executor's id, its message's stamp
and its position in the journal (``wait_key``), and a sub-workflow's run is
kept under its invocation's key (``executor@stamp``), which is also the
scope its own waits' keys are made in. A handler re-executed under its new
id checks each journaled wait against the key it computes, so the journals'
keys are recomputed here for the new id, exactly as the engine will. A
suspended wait keeps its key, which is the request's id people answer, and
records the recomputed one as its ``replay_key``, which its answer is
journaled under. Keys that are only ever matched, never recomputed (a
scheduled message's key, a handoff approval's id), keep their value; a
sub-workflow's run moves to its invocation's new key.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._engine._delivery import Envelope, HandoffContext
from treadle._engine._spawn import SpawnRecord
from treadle._engine._waits import (
    HandoffApproval,
    NestedRun,
    ScheduledMessage,
    Suspension,
    WaitBook,
    off_branch,
    wait_key,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from treadle._engine._barrier import CommittedPoint
    from treadle._engine._delivery import FanInBuffer, Stamp
    from treadle._engine._journal import JournalEntry

# A wait key starts with its kind's first three letters (see ``wait_key``).
_KINDS = MappingProxyType({"req": "request", "inp": "input", "tim": "timer"})


@dataclass(frozen=True, slots=True)
class CheckpointParts:
    """Everything of a checkpoint but its state and identity, as immutable values."""

    pending: Mapping[str, tuple[Envelope, ...]]
    fan_in: tuple[FanInBuffer, ...]
    iterations: Mapping[str, int]
    snapshots: Mapping[str, Any]
    suspended: tuple[Suspension, ...]
    scheduled: tuple[ScheduledMessage, ...]
    answered: frozenset[str]
    approvals: tuple[HandoffApproval, ...]
    nested: Mapping[str, NestedRun]
    saved: Mapping[str, Mapping[str, Any]]
    spawned: tuple[SpawnRecord, ...]
    outputs: tuple[Any, ...]
    deadline_at: float | None

    @classmethod
    def of(cls, point: CommittedPoint, snapshots: Mapping[str, Any]) -> CheckpointParts:
        """The parts of a decoded checkpoint or a sub-workflow's barrier (copied)."""
        book = point.waits
        return cls(
            pending={target: tuple(inbox) for target, inbox in point.pending.items()},
            fan_in=tuple(dict(buffer) for buffer in point.fan_in_buffers),
            iterations=dict(point.iterations),
            snapshots=dict(snapshots),
            suspended=tuple(book.suspended),
            scheduled=tuple(book.scheduled),
            answered=frozenset(book.answered),
            approvals=tuple(book.approvals),
            nested=dict(book.nested),
            saved={key: dict(steps) for key, steps in book.saved.items()},
            spawned=tuple(point.spawned),
            outputs=tuple(point.outputs),
            deadline_at=point.deadline_at,
        )

    def wait_book(self) -> WaitBook:
        """The waits as the engine keeps them (a new book, owned by the caller)."""
        return WaitBook(
            self.suspended,
            self.scheduled,
            self.answered,
            self.approvals,
            dict(self.nested),
            {key: dict(steps) for key, steps in self.saved.items()},
        )

    def references(self) -> list[tuple[str, str]]:
        """Every (executor id, what refers to it) the checkpoint holds, in a stable order."""
        found: list[tuple[str, str]] = []
        for target, inbox in self.pending.items():
            found.append((target, f"{len(inbox)} message(s) pending for it"))
        for s in self.suspended:
            what = "a sub-workflow run" if s.wait.kind == "workflow" else f"a {s.wait.kind} wait"
            found.append((s.executor_id, f"its suspended invocation ({what} {s.wait.key!r})"))
        for key, run in self.nested.items():
            found.append((executor_of(key), f"the sub-workflow run {key!r} ({run.path!r})"))
        found.extend(
            (m.target, f"a message scheduled for it (due at {m.due_at})") for m in self.scheduled
        )
        for a in self.approvals:
            found.append((a.source, f"its handoff awaiting approval {a.key!r}"))
            found.append((a.target, f"a handoff to it awaiting approval {a.key!r}"))
        found.extend(
            (r.executor_id, f"background work it spawned ({r.name!r})") for r in self.spawned
        )
        found.extend((executor_of(k), f"saved steps of its invocation {k!r}") for k in self.saved)
        found.extend((e, "its iteration count") for e in self.iterations)
        found.extend((e, "its snapshot") for e in self.snapshots)
        for index, buffer in enumerate(self.fan_in):
            found.extend((source, f"its messages buffered in fan-in #{index}") for source in buffer)
        return found

    def executors(self) -> tuple[str, ...]:
        """The executor ids the checkpoint refers to, sorted."""
        return tuple(sorted({executor_id for executor_id, _ in self.references()}))


def executor_of(key: str) -> str:
    """The executor of an invocation key (``executor@stamp``)."""
    return key.rpartition("@")[0]


def _renamed_key(key: str, rename: Callable[[str], str]) -> str:
    executor_id, at, stamp = key.rpartition("@")
    return f"{rename(executor_id)}{at}{stamp}" if at else key


# -- renaming ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scopes:
    """Where one level's wait keys are made: (old scope, new scope) pairs to try.

    A run's own waits are keyed in scope ``""`` (or, recorded before keys
    were scoped, in its run id); a sub-workflow's in its parent's scope
    followed by ``/`` and its invocation's key.
    """

    pairs: tuple[tuple[str, str], ...]

    def inner(self, old_key: str, new_key: str) -> _Scopes:
        return _Scopes(tuple((f"{o}/{old_key}", f"{n}/{new_key}") for o, n in self.pairs))

    @property
    def moved(self) -> bool:
        return any(o != n for o, n in self.pairs)


class _Rekeying:
    """Recomputes the keys of one level of waits for renamed executors and moved scopes."""

    def __init__(self, rename: Callable[[str], str], scopes: _Scopes) -> None:
        self.rename = rename
        self.scopes = scopes

    def touches(self, executor_id: str) -> bool:
        return self.scopes.moved or self.rename(executor_id) != executor_id

    def wait(self, kind: str, key: str, executor_id: str, stamp: Stamp, index: int) -> str:
        """The key a wait made at ``index`` of an invocation gets once renamed (or ``key``)."""
        new_id = self.rename(executor_id)
        made, branch = off_branch(key)  # a rollback's branch keeps its mark (see on_branch)
        for old_scope, new_scope in self.scopes.pairs:
            if wait_key(kind, old_scope, executor_id, stamp, index) == made:
                return wait_key(kind, new_scope, new_id, stamp, index) + branch
        return key  # not made as the engine makes it now: left alone

    def journal(
        self, entries: Sequence[JournalEntry], executor_id: str, stamp: Stamp
    ) -> list[JournalEntry]:
        out: list[JournalEntry] = []
        for index, (kind, name, value) in enumerate(entries):
            if kind in ("wait", "timeout") and (full := _KINDS.get(name[:3])) and name[3:4] == "-":
                name = self.wait(full, name, executor_id, stamp, index)  # noqa: PLW2901
            elif kind == "wait" and executor_of(name) == executor_id:  # a sub-workflow's wake-up
                name = _renamed_key(name, self.rename)  # noqa: PLW2901
            out.append((kind, name, value))
        return out

    def envelope(self, envelope: Envelope, target: str) -> Envelope:
        handoff = envelope.handoff
        if handoff is not None and self.rename(handoff.source) != handoff.source:
            handoff = HandoffContext(self.rename(handoff.source), handoff.reason)
        journal = envelope.journal
        if journal is not None and self.touches(target):
            journal = self.journal(journal, target, envelope.stamp)
        return Envelope(
            envelope.stamp, self.rename(envelope.source), envelope.payload, handoff, journal
        )

    def suspension(self, s: Suspension) -> Suspension:
        wait, journal, stamp = s.wait, s.journal, s.envelope.stamp
        if self.touches(s.executor_id):
            journal = self.journal(journal, s.executor_id, stamp)
            if wait.kind == "workflow":  # keyed as its run is in ``nested``
                wait = replace(wait, key=_renamed_key(wait.key, self.rename))
            else:  # the key stays (people answer it); what the handler will compute moves
                current = wait.replay_key or wait.key
                replay = self.wait(wait.kind, current, s.executor_id, stamp, len(s.journal))
                wait = replace(wait, replay_key=None if replay == wait.key else replay)
        envelope = self.envelope(s.envelope, s.executor_id)
        return Suspension(self.rename(s.executor_id), envelope, journal, wait)

    def nested(self, nested: Mapping[str, NestedRun]) -> dict[str, NestedRun]:
        out: dict[str, NestedRun] = {}
        for key, run in nested.items():
            new_key = _renamed_key(key, self.rename)
            inner = _Rekeying(_same, self.scopes.inner(key, new_key))
            barrier = run.barrier
            if inner.scopes.moved:
                book = barrier.waits
                barrier = barrier._replace(
                    pending={
                        target: tuple(inner.envelope(e, target) for e in inbox)
                        for target, inbox in barrier.pending.items()
                    },
                    waits=WaitBook(
                        [inner.suspension(s) for s in book.suspended],
                        book.scheduled,
                        book.answered,
                        book.approvals,
                        inner.nested(book.nested),
                        {k: dict(steps) for k, steps in book.saved.items()},
                    ),
                )
            out[new_key] = NestedRun(self.rename(run.path), barrier, run.snapshots)
        return out


def _same(executor_id: str) -> str:
    return executor_id


def rename(parts: CheckpointParts, run_id: str, old: str, new: str) -> CheckpointParts:
    """``parts`` with executor ``old`` called ``new`` everywhere (see the module docstring)."""

    def renaming(executor_id: str) -> str:
        return new if executor_id == old else executor_id

    keys = _Rekeying(renaming, _Scopes((("", ""), (run_id, run_id))))

    def messages(inbox: tuple[Envelope, ...], target: str) -> tuple[Envelope, ...]:
        return tuple(keys.envelope(e, target) for e in inbox)

    return CheckpointParts(
        pending={renaming(t): messages(inbox, t) for t, inbox in parts.pending.items()},
        fan_in=tuple(
            {renaming(source): messages(envs, "") for source, envs in buffer.items()}
            for buffer in parts.fan_in
        ),
        iterations={renaming(e): n for e, n in parts.iterations.items()},
        snapshots={renaming(e): value for e, value in parts.snapshots.items()},
        suspended=tuple(keys.suspension(s) for s in parts.suspended),
        scheduled=tuple(
            ScheduledMessage(m.due_at, renaming(m.target), keys.envelope(m.envelope, ""), m.key)
            for m in parts.scheduled
        ),
        answered=parts.answered,
        approvals=tuple(
            HandoffApproval(
                a.key, renaming(a.source), renaming(a.target), keys.envelope(a.envelope, "")
            )
            for a in parts.approvals
        ),
        nested=keys.nested(parts.nested),
        saved={_renamed_key(k, renaming): steps for k, steps in parts.saved.items()},
        spawned=tuple(SpawnRecord(r.key, renaming(r.executor_id), r.name) for r in parts.spawned),
        outputs=parts.outputs,
        deadline_at=parts.deadline_at,
    )


# -- dropping ---------------------------------------------------------------------------------


def held_waits(parts: CheckpointParts, executor_id: str) -> list[str]:
    """What dropping ``executor_id`` would lose that something outside waits on."""
    found = [
        f"a suspended invocation ({s.wait.kind} {s.wait.key!r})"
        for s in parts.suspended
        if s.executor_id == executor_id
    ]
    found.extend(
        f"a sub-workflow run {key!r}" for key in parts.nested if executor_of(key) == executor_id
    )
    found.extend(
        f"a handoff awaiting approval {a.key!r}"
        for a in parts.approvals
        if executor_id in (a.source, a.target)
    )
    return found


def drop(parts: CheckpointParts, executor_id: str) -> CheckpointParts:
    """``parts`` without anything of ``executor_id``: messages for it, its waits and counters."""

    def kept(other: str) -> bool:
        return other != executor_id

    return CheckpointParts(
        pending={t: inbox for t, inbox in parts.pending.items() if kept(t)},
        fan_in=tuple({s: envs for s, envs in b.items() if kept(s)} for b in parts.fan_in),
        iterations={e: n for e, n in parts.iterations.items() if kept(e)},
        snapshots={e: value for e, value in parts.snapshots.items() if kept(e)},
        suspended=tuple(s for s in parts.suspended if kept(s.executor_id)),
        scheduled=tuple(m for m in parts.scheduled if kept(m.target)),
        answered=parts.answered,
        approvals=tuple(a for a in parts.approvals if kept(a.source) and kept(a.target)),
        nested={k: run for k, run in parts.nested.items() if kept(executor_of(k))},
        saved={k: steps for k, steps in parts.saved.items() if kept(executor_of(k))},
        spawned=tuple(r for r in parts.spawned if kept(r.executor_id)),
        outputs=parts.outputs,
        deadline_at=parts.deadline_at,
    )


# -- messages ---------------------------------------------------------------------------------


def messages_for(parts: CheckpointParts, executor_id: str) -> list[Envelope]:
    """The messages held for ``executor_id``, in ``CheckpointContents.pending``'s order.

    Its inbox, its suspended invocations' messages, the messages scheduled
    for it, then the handoffs to it awaiting approval.
    """
    found = list(parts.pending.get(executor_id, ()))
    found.extend(s.envelope for s in parts.suspended if s.executor_id == executor_id)
    found.extend(m.envelope for m in parts.scheduled if m.target == executor_id)
    found.extend(a.envelope for a in parts.approvals if a.target == executor_id)
    return found


def with_payloads(
    parts: CheckpointParts, executor_id: str, payloads: Sequence[Any]
) -> CheckpointParts:
    """``parts`` with the payloads of :func:`messages_for` replaced, in the same order."""
    given = iter(payloads)

    def swapped(envelope: Envelope) -> Envelope:
        return Envelope(
            envelope.stamp, envelope.source, next(given), envelope.handoff, envelope.journal
        )

    pending = dict(parts.pending)
    if executor_id in pending:
        pending[executor_id] = tuple(swapped(e) for e in pending[executor_id])
    suspended = tuple(
        Suspension(s.executor_id, swapped(s.envelope), s.journal, s.wait)
        if s.executor_id == executor_id
        else s
        for s in parts.suspended
    )
    scheduled = tuple(
        replace(m, envelope=swapped(m.envelope)) if m.target == executor_id else m
        for m in parts.scheduled
    )
    approvals = tuple(
        replace(a, envelope=swapped(a.envelope)) if a.target == executor_id else a
        for a in parts.approvals
    )
    return replace(
        parts, pending=pending, suspended=suspended, scheduled=scheduled, approvals=approvals
    )
