"""Durable waits: what a suspended invocation is waiting for, and its journal.

An invocation that reaches a durable wait (a request, session input, a
timer) *suspends*: it ends for this superstep, what it sent or wrote is
discarded, and a :class:`Suspension` — the message it was handling, the
wait, and its journal — is committed at the barrier instead. When the wait is
satisfied, the same message is delivered to the same executor again with the
journal, and the handler re-executes from the top: each ``ctx.step`` it
reaches returns the recorded result instead of running again, and the wait
that suspended it now returns its value.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from treadle._engine._delivery import Envelope, HandoffContext, HandoffRefused
from treadle._engine._slots import blank as _blank
from treadle._exceptions import UnknownRequestError

APPROVAL_SOURCE = "__approval__"
"""The ``source`` of a ``HandoffRefused`` message."""

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from treadle._engine._barrier import BarrierState
    from treadle._engine._delivery import Stamp
    from treadle._engine._journal import JournalEntry

WaitKind: TypeAlias = Literal["request", "input", "timer", "workflow"]

_Item = TypeVar("_Item")
_NONE_ANSWERED: frozenset[str] = frozenset()  # what a book that answered nothing shares


@dataclass(frozen=True, slots=True)
class Wait:
    """What a suspended invocation waits for.

    Attributes:
        kind: ``"request"`` (answered by ``respond``), ``"input"`` (by
            ``send_message``) or ``"timer"`` (by the clock).
        key: Unique within the run: the request id for requests.
        due_at: For timers, when they fire (epoch seconds); for requests
            and input given a ``timeout=``, their deadline (see
            ``_engine/_deadlines.py``).
        payload: For requests, what was asked.
        response_type: For requests, the name of the type the answer must
            have (validated when it arrives).
        replay_key: The key a re-executed handler computes, when not ``key``
            (a migration renamed the executor but kept the request's id).
        approvers: For requests, who may answer (user names, ``role:R``,
            ``group:G``; empty: anyone with the approver role).
        four_eyes: For requests, whether the run's starter is refused.
    """

    kind: WaitKind
    key: str
    due_at: float | None = None
    payload: Any = None
    response_type: str | None = None
    replay_key: str | None = None
    approvers: tuple[str, ...] = ()
    four_eyes: bool = False


@dataclass(slots=True)
class Suspension:
    """A suspended invocation: re-delivered, with its journal, once satisfied."""

    executor_id: str
    envelope: Envelope
    journal: list[JournalEntry]
    wait: Wait


@dataclass(frozen=True, slots=True)
class NestedRun:
    """A sub-workflow's run inside one invocation of its parent: where it stands.

    Kept by the parent's :class:`WaitBook` under the invocation's key while
    the invocation is under way (each of the sub-workflow's barriers is
    checkpointed with the parent) or suspended (the sub-workflow rests), so
    a crash, a restart or an answer continues it from its last barrier.

    Attributes:
        path: The sub-workflow's executor id in the parent: the prefix of
            the executor ids its requests and events are reported under.
        barrier: Its last committed barrier.
        snapshots: Its executors' snapshots at that barrier.
    """

    path: str
    barrier: BarrierState
    snapshots: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class NestedRequest:
    """A request asked inside a sub-workflow, as its parent finds it (``find_request``).

    Attributes:
        key: The parent invocation's key in ``WaitBook.nested``.
        waiting: What waits inside the sub-workflow (itself nested, deeper down).
    """

    key: str
    waiting: Suspension | HandoffApproval | NestedRequest


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """A message to deliver at ``due_at`` (``ctx.schedule_message``, ``ctx.continue_later``).

    ``key`` names it for ``ctx.cancel_scheduled`` (``None``: it cannot be
    cancelled: a continuation, or scheduled before keys existed).
    """

    due_at: float
    target: str
    envelope: Envelope
    key: str | None = None


@dataclass(frozen=True, slots=True)
class HandoffApproval:
    """A handoff waiting for a human to approve (``True``) or refuse it."""

    key: str
    source: str
    target: str
    envelope: Envelope

    @property
    def question(self) -> dict[str, Any]:
        """What a person deciding on it needs to see."""
        handoff = self.envelope.handoff
        return {
            "handoff_from": self.source,
            "handoff_to": self.target,
            "reason": handoff.reason if handoff else None,
            "payload": self.envelope.payload,
        }


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A question a run is waiting on; answer it with ``Workflow.respond``.

    Attributes:
        request_id: Pass it to ``respond(run_id, {request_id: answer})``.
        executor_id: The executor that asked.
        payload: What it asked.
        response_type: The name of the type the answer must have.
        deadline_at: When its ``timeout=`` runs out (seconds since the
            epoch), if it was given one.
        approvers: Who may answer it (``ctx.request(..., approvers=)``);
            empty: anyone with the approver role.
        four_eyes: Whether the run's starter may not answer it.
    """

    request_id: str
    executor_id: str
    payload: Any
    response_type: str | None
    deadline_at: float | None = None
    approvers: tuple[str, ...] = ()
    four_eyes: bool = False


class Suspend(BaseException):
    """Raised inside a handler to suspend it at a durable wait.

    A ``BaseException`` so that a handler's ``except Exception`` cannot
    swallow it; never exported.
    """

    def __init__(self, wait: Wait) -> None:
        super().__init__(wait.kind)
        self.wait = wait


Waiting: TypeAlias = Suspension | HandoffApproval | NestedRequest
"""Whatever an answer to a request goes to."""


def invocation_key(executor_id: str, stamp: Stamp) -> str:
    """An invocation's key among a run's waits: its executor and its message's stamp.

    The same whenever the invocation runs again (a crash re-plans it, a
    retry or a durable wait re-executes it), since a message keeps its stamp.
    """
    return f"{executor_id}@{'.'.join(map(str, stamp))}"


def wait_key(kind: str, scope: str, executor_id: str, stamp: tuple[int, ...], index: int) -> str:
    """A stable key for the ``index``-th wait of one invocation.

    Stable across re-executions (the same message, executor and position in
    the journal give the same key), so a request keeps its id across
    restarts, and short enough to type into a command line. ``scope`` is
    where the run's keys are unique (``RunLoop.wait_scope``): a run's own
    waits are keyed without its id, so a fork, which is a copy of its
    parent under a new id, re-executes a copied wait under the key it was
    recorded with. Request ids are unique within a run, not across runs.
    """
    seed = f"{scope}|{executor_id}|{stamp}|{index}".encode()
    return f"{kind[:3]}-{hashlib.blake2b(seed, digest_size=6).hexdigest()}"


def on_branch(key: str, branch: int) -> str:
    """``key`` as a wait on ``branch`` of its run has it (see ``BarrierState.branch``).

    A session's rollback delivers its message where the abandoned turn's
    went, so the waits there are made at the same places: ``~N`` after the
    key keeps an answer to the abandoned turn's request from being taken
    for the branch's. On the run's own line (``0``) the key is as it was.
    """
    return f"{key}~{branch}" if branch else key


def off_branch(key: str) -> tuple[str, str]:
    """``key`` without its branch, and the branch's ``~N`` (``""``: made on no branch)."""
    base, mark, branch = key.partition("~")
    return base, mark + branch


class WaitBook:
    """A run's durable waits: suspended invocations and scheduled messages.

    Pure bookkeeping, no asyncio: the loop asks it what is due, what status
    the run rests in, and hands it answers; it returns the envelopes to
    deliver, each carrying its journal with the wait's value appended.

    Its suspensions, scheduled messages, approvals and answered ids are
    immutable (tuples, a frozenset), replaced whole when they change, so a
    copy shares them: a run nearly always has none, and as lists and sets
    each point and each checkpointed copy of its waits held four empty
    containers that the garbage collector walked at every pass, thousands
    of them with many runs in flight. ``nested`` and ``saved`` are written
    by the invocations under way, and copied.
    """

    __slots__ = ("answered", "approvals", "nested", "saved", "scheduled", "suspended")

    def __init__(
        self,
        suspended: Iterable[Suspension] = (),
        scheduled: Iterable[ScheduledMessage] = (),
        answered: Iterable[str] = (),
        approvals: Iterable[HandoffApproval] = (),
        nested: dict[str, NestedRun] | None = None,
        saved: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.suspended: tuple[Suspension, ...] = tuple(suspended)
        self.scheduled: tuple[ScheduledMessage, ...] = tuple(scheduled)
        self.answered: frozenset[str] = frozenset(answered) if answered else _NONE_ANSWERED
        self.approvals: tuple[HandoffApproval, ...] = tuple(approvals)
        # Sub-workflow runs by their parent invocation's key (see NestedRun).
        self.nested: dict[str, NestedRun] = nested or {}
        # The saved steps of invocations under way, by invocation key, then step key
        # (``WorkflowContext.saved_step``): kept until the invocation completes.
        self.saved: dict[str, dict[str, Any]] = saved or {}

    def __bool__(self) -> bool:
        return bool(self.suspended or self.scheduled or self.approvals or self.nested)

    def copy(self) -> WaitBook:
        """An independent copy: the immutable parts shared, ``nested`` and ``saved`` copied.

        Made slot by slot (see ``_engine/_slots.py``): every checkpoint copies one.
        """
        book: Any = _blank(WaitBook)
        book.suspended = self.suspended
        book.scheduled = self.scheduled
        book.answered = self.answered
        book.approvals = self.approvals
        book.nested = dict(self.nested)
        saved = self.saved
        book.saved = {key: dict(steps) for key, steps in saved.items()} if saved else {}
        made: WaitBook = book
        return made

    @property
    def awaits_input(self) -> bool:
        """Whether something waits for an answer, an approval or session input."""
        if self.approvals:
            return True
        for suspension in self.suspended:
            kind = suspension.wait.kind
            if kind == "workflow":
                nested = self.nested.get(suspension.wait.key)
                if nested is not None and nested.barrier.waits.awaits_input:
                    return True
            elif kind != "timer":
                return True
        return False

    def commit_later(
        self,
        run_id: str,
        source: str,
        stamp: tuple[int, int, int, int],
        scheduled: Sequence[tuple[float, str, Any, str]],
        approvals: Sequence[tuple[str, Any, HandoffContext]],
        branch: int = 0,
    ) -> None:
        """Take what a committed invocation left for later.

        ``scheduled``: (due, target, payload, key) messages for ``schedule_message``;
        ``approvals``: (target, payload, handoff) handoffs awaiting approval.
        ``stamp`` is the invocation's next free stamp; each item takes the
        next sequence number, so delivery order stays deterministic.
        ``branch``: the run's (see :func:`on_branch`), which marks an
        approval's id apart from an abandoned turn's at the same place.
        """
        superstep, rank, position, seq = stamp
        messages = list(self.scheduled)
        for due, target, payload, key in scheduled:
            envelope = Envelope((superstep, rank, position, seq), source, payload)
            messages.append(ScheduledMessage(due, target, envelope, key))
            seq += 1
        self.scheduled = tuple(messages)
        handoffs = list(self.approvals)
        for target, payload, handoff in approvals:
            item_stamp = (superstep, rank, position, seq)
            key = on_branch(wait_key("handoff", run_id, source, item_stamp, 0), branch)
            envelope = Envelope(item_stamp, source, payload, handoff)
            handoffs.append(HandoffApproval(key, source, target, envelope))
            seq += 1
        self.approvals = tuple(handoffs)

    def next_wake_at(self) -> float | None:
        """When the earliest timer or scheduled message falls due."""
        times = [s.wait.due_at for s in self.suspended if s.wait.due_at is not None]
        times.extend(m.due_at for m in self.scheduled)
        return min(times) if times else None

    def take_due(self, now: float) -> list[tuple[str, Envelope]]:
        """Remove and return every timer and scheduled message due by ``now``."""
        due: list[tuple[str, Envelope]] = []
        keep: list[Suspension] = []
        for suspension in self.suspended:
            wait = suspension.wait
            # A sub-workflow's timer re-delivers its invocation, which wakes the timer inside.
            ripe = wait.due_at is not None and wait.due_at <= now
            if ripe and wait.kind in ("timer", "workflow"):
                due.append(_resumed(suspension, None))
            else:
                keep.append(suspension)
        if len(keep) != len(self.suspended):
            self.suspended = tuple(keep)
        if self.scheduled:
            due.extend((m.target, m.envelope) for m in self.scheduled if m.due_at <= now)
            self.scheduled = tuple(m for m in self.scheduled if m.due_at > now)
        return due

    def pending_requests(self) -> list[PendingRequest]:
        """The questions waiting for an answer, in the order they were asked."""
        asked = [
            PendingRequest(
                w.key, s.executor_id, w.payload, w.response_type, w.due_at, w.approvers, w.four_eyes
            )
            for s in self.suspended
            if (w := s.wait).kind == "request"
        ]
        asked.extend(PendingRequest(a.key, a.source, a.question, "bool") for a in self.approvals)
        for nested in self.nested.values():  # named by their path: "review/legal/approve"
            asked.extend(
                replace(r, executor_id=f"{nested.path}/{r.executor_id}", deadline_at=None)
                for r in nested.barrier.waits.pending_requests()
            )
        return asked

    def find_request(self, request_id: str) -> Waiting:
        """The suspension, handoff approval or sub-workflow's request waiting on ``request_id``.

        Raises:
            UnknownRequestError: no such request is waiting (or it was
                answered already).
        """
        for suspension in self.suspended:
            if suspension.wait.kind == "request" and suspension.wait.key == request_id:
                return suspension
        for approval in self.approvals:
            if approval.key == request_id:
                return approval
        for key, nested in self.nested.items():
            try:
                return NestedRequest(key, nested.barrier.waits.find_request(request_id))
            except UnknownRequestError:
                continue  # not this sub-workflow's
        if request_id in self.answered:
            msg = f"request {request_id!r} was answered already"
            raise UnknownRequestError(msg)
        waiting = [r.request_id for r in self.pending_requests()]
        msg = f"no request {request_id!r} is waiting; waiting: {waiting or 'none'}"
        raise UnknownRequestError(msg)

    def answer(self, waiting: Waiting, value: Any) -> tuple[str, Envelope] | None:
        """Satisfy a request, approval or input wait; return the delivery it causes.

        A suspended invocation is re-delivered with the value in its journal;
        an approved handoff goes to its target; a refused one comes back to
        its source as a ``HandoffRefused`` message. An answer to a
        sub-workflow's request is applied inside it, and its parent
        invocation is re-delivered (``None`` once it was, by an earlier answer).
        """
        if isinstance(waiting, NestedRequest):
            return self._answer_nested(waiting, value)
        if isinstance(waiting, HandoffApproval):
            self.approvals = _without(self.approvals, waiting)
            self.answered = self.answered | {waiting.key}
            if value:
                return waiting.target, waiting.envelope
            envelope = waiting.envelope
            reason = envelope.handoff.reason if envelope.handoff else None
            refusal = HandoffRefused(waiting.target, envelope.payload, reason)
            return waiting.source, type(envelope)(envelope.stamp, APPROVAL_SOURCE, refusal)
        self.suspended = _without(self.suspended, waiting)
        if waiting.wait.kind == "request":
            self.answered = self.answered | {waiting.wait.key}
        return _resumed(waiting, value)

    def _answer_nested(self, request: NestedRequest, value: Any) -> tuple[str, Envelope] | None:
        nested = self.nested[request.key]
        barrier = nested.barrier
        inner = barrier.waits.copy()
        delivery = inner.answer(request.waiting, value)
        pending = dict(barrier.pending)
        if delivery is not None:
            target, envelope = delivery
            inbox = (*pending.get(target, ()), envelope)
            pending[target] = tuple(sorted(inbox, key=lambda e: e.stamp))
        self.nested[request.key] = NestedRun(
            nested.path, barrier._replace(waits=inner, pending=pending), nested.snapshots
        )
        self.answered = self.answered | inner.answered
        for suspension in self.suspended:
            if suspension.wait.kind == "workflow" and suspension.wait.key == request.key:
                self.suspended = _without(self.suspended, suspension)
                return _resumed(suspension, None)
        return None

    def input_waiter(
        self, target: str | None, taken: Sequence[Suspension] = ()
    ) -> Suspension | NestedRequest | None:
        """The first invocation (in stamp order) waiting for session input.

        Then one inside a sub-workflow, named by its path (``chat/reply``),
        or any there when no ``target`` is given. ``taken``: waits that
        messages read before this one take (each wait takes one message),
        passed over as the engine will find them answered.
        """
        waiting = [
            s
            for s in self.suspended
            if s.wait.kind == "input"
            and (target is None or s.executor_id == target)
            and not any(s is other for other in taken)
        ]
        if waiting:
            return min(waiting, key=lambda s: s.envelope.stamp)
        for key, nested in self.nested.items():
            prefix = f"{nested.path}/"
            if target is not None and not target.startswith(prefix):
                continue
            inner = nested.barrier.waits.input_waiter(target and target.removeprefix(prefix), taken)
            if inner is not None:
                return NestedRequest(key, inner)
        return None


def _without(items: tuple[_Item, ...], item: _Item) -> tuple[_Item, ...]:
    """``items`` less the first one equal to ``item`` (as ``list.remove``; it must be there).

    Raises:
        ValueError: ``item`` is not among them.
    """
    at = items.index(item)
    return items[:at] + items[at + 1 :]


def _resumed(suspension: Suspension, value: Any) -> tuple[str, Envelope]:
    envelope, wait = suspension.envelope, suspension.wait
    journal = [*suspension.journal, ("wait", wait.replay_key or wait.key, value)]
    return suspension.executor_id, type(envelope)(
        envelope.stamp, envelope.source, envelope.payload, envelope.handoff, journal
    )
