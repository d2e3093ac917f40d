"""The durable half of a handler's context: journaled steps and the waits that suspend.

A handler that reaches a durable wait raises :class:`Suspend` out of it;
re-executed once the wait is satisfied, it meets its recorded steps and
waits again in the same order and gets their recorded values back (see
``_engine/_waits.py``). A wait given a ``timeout=`` raises
``RequestTimeoutError`` there instead, once its deadline passed
(``_engine/_deadlines.py``). Scheduled messages (and cancelling them) and
``continue_later`` leave work for after the invocation's barrier
(``_engine/_later.py``). :class:`DurableWaits` is the base of
``WorkflowContext`` that holds these methods, so the context's own module
keeps to messages, state and events.
"""

from __future__ import annotations

import datetime as dt
import inspect
import math
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from treadle._engine._journal import Journal
from treadle._engine._later import ContinueLater, ScheduledHandle
from treadle._engine._polling import poll_until_complete
from treadle._engine._replaying import REPLAYING, StepNotReplayed
from treadle._engine._waits import (
    Suspend,
    Wait,
    WaitKind,
    invocation_key,
    off_branch,
    on_branch,
    wait_key,
)
from treadle._exceptions import RoutingError
from treadle._graph._executor import Executor
from treadle._values._actors import check_approvers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from treadle._engine._context import WorkflowContext
    from treadle._engine._env import RunEnv
    from treadle._engine._invocation import Invocation, LaterWork
    from treadle._graph._policies import ExponentialBackoff

ResponseT = TypeVar("ResponseT")


def _seconds(
    name: str, delay: dt.timedelta | float, *, zero: bool = False, past: bool = False
) -> float:
    """``delay`` in seconds: a wait's ``timeout=`` (positive), a continuation's ``after=``.

    ``past``: any finite duration, a negative one read as none (a sleep's).

    Raises:
        TypeError, ValueError: ``delay`` is not a duration, not a finite one
            (its time is stored, as JSON), or not a positive one (nor zero,
            if ``zero`` allows it).
    """
    if isinstance(delay, dt.timedelta):
        seconds = delay.total_seconds()
    else:
        seconds = _finite(delay, f"{name} must be seconds or a datetime.timedelta")
    if past:
        return max(seconds, 0.0)
    if not (seconds > 0 or (zero and seconds == 0)):
        msg = f"{name} must be a positive duration, got {delay!r}"
        raise ValueError(msg)
    return seconds


def _epoch(when: dt.datetime | float, name: str = "at") -> float:
    if isinstance(when, dt.datetime):
        if when.tzinfo is None:
            msg = f"{when!r} has no time zone: give an aware datetime (or epoch seconds)"
            raise ValueError(msg)
        return when.timestamp()
    return _finite(when, f"{name} must be an aware datetime or epoch seconds")


def _finite(number: object, must: str) -> float:
    """``number`` as a float, if it is a real, finite number (``must`` says what it must be).

    Raises:
        TypeError: it is not a number (a ``bool`` is not one here).
        ValueError: it is not finite, or past what a float holds.
    """
    if isinstance(number, bool) or not isinstance(number, int | float):
        msg = f"{must}, got {number!r}"
        raise TypeError(msg)
    try:
        seconds = float(number)
    except OverflowError:  # an int past any float (its digits may be too many to print)
        msg = f"{must}; an integer of {int(number).bit_length()} bits is past any float"
        raise ValueError(msg) from None
    if not math.isfinite(seconds):
        msg = f"{must}; {number!r} is not a finite number"
        raise ValueError(msg)
    return seconds


class DurableWaits:
    """Journaled steps, durable waits and scheduled messages, for ``WorkflowContext``.

    Its one slot is the journal, made on first use; the context's own
    (``_invocation``, ``_env``, ``executor_id``) are what these methods use.
    """

    __slots__ = ("_journal",)

    _journal: Journal | None
    _later: LaterWork | None
    _invocation: Invocation
    _env: RunEnv
    executor_id: str

    def _later_work(self) -> LaterWork:
        raise NotImplementedError

    # -- durable steps and waits ----------------------------------------------------------
    def _recorded(self) -> Journal | None:
        """The journal, made from the message's on first use; ``None`` while there is none."""
        journal = self._journal
        if journal is None:
            recorded = self._invocation.envelope.journal
            replaying = REPLAYING.get()
            if replaying is not None:  # a replay check: the journal the run ended up with
                stamp = self._invocation.envelope.stamp
                recorded = replaying.journal(self.executor_id, stamp, recorded)
            if recorded:
                journal = self._journal = Journal(recorded)
        return journal

    def _replayed(self, kind: str, name: str) -> tuple[bool, Any]:
        """The recorded result of the next journal entry, if re-executing."""
        journal = self._recorded()
        if journal is None:
            return False, None
        return journal.replay(self.executor_id, kind, name)

    @property
    def replaying(self) -> bool:
        """Whether the handler is re-executing recorded steps after a wait."""
        journal = self._recorded()
        return journal is not None and journal.replaying

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` once per invocation, however often it re-executes.

        The result is recorded in the invocation's journal (it must be
        serializable); when the handler re-executes after a durable wait,
        the recorded result is returned and ``fn`` is not called again — so
        an external job submitted in a step is submitted once.

        Raises:
            JournalMismatchError: re-executing, the handler reached a step
                other than the one recorded at this point.
        """
        replayed, value = self._replayed("step", name)
        if replayed:
            return value
        if REPLAYING.get() is not None:  # it happened when the run was recorded, or never did
            journal = self._recorded()
            raise StepNotReplayed(
                self.executor_id, "step", name, journal.cursor if journal is not None else 0
            )
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
        journal = self._recorded()
        if journal is None:
            journal = self._journal = Journal()
        journal.record("step", name, value)
        return value

    async def saved_step(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` once for this invocation, its result checkpointed as it returns.

        Unlike :meth:`step`, whose results become durable with the
        invocation's next durable wait or its barrier, a saved step is made
        durable before this returns: the run's last barrier is checkpointed
        again, with the saved steps of invocations under way. So after a
        crash mid-invocation (or a retry, or a durable wait) the invocation
        runs again and each saved step returns its recorded result instead
        of calling ``fn``: a model request paid for, a payment made, happens
        once. A step a crash interrupts before it returns runs again: pass
        ``f"{ctx.idempotency_key}/{key}"`` to a service that deduplicates.

        ``key`` names the step within the invocation ("model:0",
        "tool:<call id>"); steps with different keys may run concurrently,
        in any order. The result must be serializable by the workflow's
        serializer. The saved steps are dropped once the invocation
        completes. Without a store the result is kept in memory only.

        Each saved step costs a checkpoint write: use it for what must not
        run twice, and :meth:`step` for the rest.
        """
        invocation = self._invocation
        saved = invocation.point.waits.saved  # the in-flight part of the run's waits
        slot = invocation_key(invocation.executor.id, invocation.envelope.stamp)
        steps = saved.get(slot)
        if steps is not None and key in steps:
            return steps[key]
        if REPLAYING.get() is not None:  # as for step: never performed again by a replay
            raise StepNotReplayed(self.executor_id, "saved step", key, len(steps or ()))
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
        saved.setdefault(slot, {})[key] = value
        await self._env.save_progress(durable=True)
        return value

    def _wait(self, kind: WaitKind, **fields: Any) -> Any:
        journal = self._recorded()
        cursor = journal.cursor if journal is not None else 0
        stamp = self._invocation.envelope.stamp
        run = self._env
        made = wait_key(kind, run.wait_scope, self.executor_id, stamp, cursor)
        key = on_branch(made, run.branch)
        if journal is None or not journal.replaying:
            raise Suspend(Wait(kind, key, **fields))  # reached for the first time
        # The same wait replays where it was recorded on another branch of the run (a
        # rollback's branch goes on from where the turn began), or before keys were
        # scoped (made from the run's id).
        recorded = journal.entries[journal.cursor][1]
        legacy = wait_key(kind, run.run_id, self.executor_id, stamp, cursor)
        alias = recorded if off_branch(recorded)[0] in (made, legacy) else None
        _, value = journal.replay(self.executor_id, "wait", key, alias)
        return value

    async def request(
        self,
        payload: Any,
        response_type: type[ResponseT],
        *,
        timeout: dt.timedelta | float | None = None,  # noqa: ASYNC109 - a durable deadline
        approvers: Iterable[str] | None = None,
        four_eyes: bool | None = None,
    ) -> ResponseT:
        """Ask a human (or any outside party) and wait durably for the answer.

        The run surfaces a ``RequestEvent`` and a ``PendingRequest``, and
        rests as ``AWAITING_INPUT`` — for as long as it takes, across
        restarts. ``Workflow.respond(run_id, {request_id: answer})`` checks
        the answer against ``response_type`` and resumes the handler, which
        re-executes from the top; this call then returns the answer.

        With ``timeout`` (a ``timedelta`` or seconds, counted from when the
        request is first asked) the request has a deadline, stored with it:
        the run's ``wake_at`` says it, and a timer service wakes the run then.
        Unanswered by the deadline, this call raises ``RequestTimeoutError``
        instead, once (the timeout is journaled like an answer); catch it to
        remind, escalate or decide by default. An answer arriving after the
        timeout is refused with ``RequestExpiredError``.

        ``approvers`` names who may answer: user names (``"maria"``),
        ``"role:R"`` (anyone holding role R's rights) or ``"group:G"`` (a
        group the identity provider puts people in); empty, anyone with the
        approver role. Not given, the executor's ``approvers`` (a
        definition's node or an agent's ``approvers=`` set them).
        ``four_eyes=True`` refuses the person who started the run (not
        given: the executor's, else the workflow's ``four_eyes``). Both are
        kept with the request, in its checkpoint and in the run's log, and
        every door checks them (a refusal names who may answer).

        Raises:
            RequestTimeoutError: the deadline passed first.
            ValueError: an approver names no one (empty, or an unknown role).
        """
        name = self._env.workflow.response_type_name(response_type)
        due = self._deadline(timeout)
        executor = self._invocation.executor
        named = check_approvers(executor.approvers if approvers is None else approvers)
        if four_eyes is None:
            four_eyes = executor.four_eyes
        if four_eyes is None:
            four_eyes = self._env.options.four_eyes
        answer: ResponseT = self._wait(
            "request",
            due_at=due,
            payload=payload,
            response_type=name,
            approvers=named,
            four_eyes=bool(four_eyes),
        )
        return answer

    async def wait_for_input(
        self,
        *,
        timeout: dt.timedelta | float | None = None,  # noqa: ASYNC109 - a durable deadline
    ) -> Any:
        """Wait durably for the next message of a session.

        The run rests as ``AWAITING_INPUT`` until
        ``Workflow.send_message(run_id, message)``; this call then returns it.
        With ``timeout``, as :meth:`request`: a message that has not arrived
        by the deadline makes this call raise ``RequestTimeoutError``.

        Raises:
            RequestTimeoutError: the deadline passed first.
        """
        return self._wait("input", due_at=self._deadline(timeout))

    def _deadline(self, timeout: dt.timedelta | float | None) -> float | None:
        """The deadline of a wait given ``timeout``, from now (kept only if it suspends)."""
        if timeout is None:
            return None
        return self._env.clock.now() + _seconds("timeout", timeout)

    async def sleep(self, delay: dt.timedelta | float) -> None:
        """Wait durably for ``delay`` (a ``timedelta`` or seconds).

        The invocation suspends; the run rests as ``WAITING`` (its result
        says when it wakes) and may be resumed by another process.
        """
        seconds = _seconds("ctx.sleep's delay", delay, past=True)
        if self.replaying:
            self._wait("timer")  # returns the recorded wake-up, computes no new time
            return
        self._wait("timer", due_at=self._env.clock.now() + seconds)

    async def sleep_until(self, when: dt.datetime | float) -> None:
        """Wait durably until ``when`` (an aware ``datetime`` or epoch seconds)."""
        self._wait("timer", due_at=_epoch(when, "ctx.sleep_until's when"))

    async def poll_until_complete(
        self,
        check: Callable[[], Any],
        is_complete: Callable[[Any], bool],
        *,
        backoff: ExponentialBackoff | None = None,
        max_duration: dt.timedelta | float | None = None,
    ) -> Any:
        """Poll an external job until ``is_complete(check())``, durably.

        Each poll is a journaled step and each pause a durable timer, so the
        run is checkpointed between polls, holds no thread while waiting,
        and survives restarts; a progress event is raised per poll.

        Raises:
            PollTimeout: the job was still incomplete after ``max_duration``.
        """
        ctx = cast("WorkflowContext[Any]", self)  # the one class this is a base of
        return await poll_until_complete(ctx, check, is_complete, backoff, max_duration)

    def schedule_message(
        self,
        message: Any,
        *,
        after: dt.timedelta | float | None = None,
        at: dt.datetime | float | None = None,
        target: str | Executor | None = None,
    ) -> ScheduledHandle:
        """Send ``message`` later: a durable timer that does not suspend the sender.

        Routed like ``send_message`` (now, so routing errors surface here),
        delivered in the first superstep after it falls due. Returns a handle
        (keep it, or its ``key``, in state) that :meth:`cancel_scheduled`
        takes, in this invocation or any later one, until it is delivered.
        """
        if (after is None) == (at is None):
            msg = "schedule_message takes exactly one of after= or at="
            raise TypeError(msg)
        if after is not None:
            due = self._env.clock.now() + _seconds("after", after, past=True)
        else:
            assert at is not None  # noqa: S101 - an invariant, narrows the type for mypy
            due = _epoch(at)
        target_id = target.id if isinstance(target, Executor) else target
        routes = self._env.router.route(self.executor_id, message, target_id)
        if any(fan_in >= 0 for _, fan_in in routes):
            msg = f"executor {self.executor_id!r}: a scheduled message cannot feed a fan-in"
            raise RoutingError(msg)
        later = self._later_work()
        stamp = self._invocation.envelope.stamp
        made = wait_key("schedule", self._env.run_id, self.executor_id, stamp, later.schedule_calls)
        key = on_branch(made, self._env.branch)  # never an abandoned turn's (see on_branch)
        later.schedule_calls += 1
        later.scheduled.extend((due, delivered, message, key) for delivered, _ in routes)
        return ScheduledHandle(key, due, tuple(delivered for delivered, _ in routes))

    def cancel_scheduled(self, scheduled: ScheduledHandle | str) -> bool:
        """Cancel a message scheduled with :meth:`schedule_message` (its handle or key).

        Takes effect when this invocation commits, with everything else it
        did (not if it fails or suspends). Returns whether the message was
        still to be delivered; cancelling one that was delivered already,
        or cancelled, is a no-op returning ``False``, as there is nothing
        left to stop: a reminder that fell due as its answer arrived has
        simply gone.

        Raises:
            TypeError: ``scheduled`` is neither a handle nor a key.
        """
        key = scheduled.key if isinstance(scheduled, ScheduledHandle) else scheduled
        if not isinstance(key, str):
            msg = f"cancel_scheduled takes a ScheduledHandle or its key, got {scheduled!r}"
            raise TypeError(msg)
        later = self._later
        if later is not None and any(item[3] == key for item in later.scheduled):
            later.scheduled = [item for item in later.scheduled if item[3] != key]
            return True  # scheduled by this very invocation: it never reaches the barrier
        if not any(m.key == key for m in self._invocation.point.waits.scheduled):
            return False
        later = self._later_work()
        if key not in later.cancelled:
            later.cancelled.append(key)
        return True

    def continue_later(self, after: dt.timedelta | float | None = None) -> NoReturn:
        """End this invocation now, and handle the same message again later.

        What the invocation did so far commits at its barrier as if the
        handler had returned (messages, state writes, outputs, scheduled
        messages). Then the same message is delivered to this executor
        again, as a new invocation with a fresh journal and its own
        idempotency key: next superstep, or ``after`` from now (a
        ``timedelta`` or seconds) as a durable timer, the run resting as
        ``WAITING`` in between. Keep progress in ``ctx.state``. Iteration
        limits count every continuation.

        It raises a ``BaseException`` that ends the handler; a handler's
        ``except Exception`` does not catch it.
        """
        later = self._later_work()
        later.continuing = True
        if after is not None:
            later.continue_at = self._env.clock.now() + _seconds("after", after, zero=True)
        raise ContinueLater
