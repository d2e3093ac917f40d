"""The errors of building, running and steering workflows (the durable ones are beside).

See :mod:`treadle._exceptions` for the whole tree.
"""

from __future__ import annotations

import copyreg
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence


class TreadleError(Exception):
    """Root of every error the runtime raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle remakes an exception by calling its class with its ``args``, the
        # message; ours take what the message is made of (a run id, a deadline), so
        # that call failed or made another message, and an error could not cross
        # to another process (a pool's, a task queue's). Remade without the call:
        # the same message, the attributes as they were (see __setstate__).
        return (_NEW_OBJECT, (type(self),), (self.args, self.__dict__))

    def __setstate__(self, state: Any) -> None:
        # ``args`` set here, not given to __new__: an OSError (a TimeoutError, a
        # PermissionError) whose class has an __init__ leaves them to it.
        self.args, attributes = state
        self.__dict__.update(attributes)


# ``cls.__new__(cls)`` by a name pickle knows (protocol 2's own NEWOBJ); typeshed lacks it.
_NEW_OBJECT = copyreg.__newobj__  # type: ignore[attr-defined]


class WorkflowValidationError(TreadleError):
    """The builder found one or more problems; ``problems`` lists every one.

    Reporting all problems at once saves the edit-build-edit cycle of fixing a
    graph one complaint at a time.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"workflow is invalid ({count} {noun}):\n{lines}")


class DefinitionError(TreadleError):
    """A declarative definition has problems; ``problems`` lists every one.

    Each problem reads ``file:line:column: message``, the place in the
    definition's text it comes from, so an editor can jump to it.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"the definition is invalid ({count} {noun}):\n{lines}")


class ExecutorInUseError(TreadleError):
    """An executor instance given directly is already serving another run.

    Executor instances keep fields between messages, so two runs sharing one
    would corrupt each other. Give the builder a factory (a class or a
    zero-argument callable), or declare the executor ``shareable=True``.
    """

    def __init__(self, executor_id: str, other_run_id: str) -> None:
        self.executor_id = executor_id
        self.other_run_id = other_run_id
        super().__init__(
            f"executor {executor_id!r} is an instance shared by every run of this workflow "
            f"and is busy in run {other_run_id!r}; pass a factory to the builder or "
            f"declare it shareable=True"
        )


class RoutingError(TreadleError):
    """A message was sent along no edge that leads to an executor accepting it."""


class SubWorkflowError(TreadleError):
    """A sub-workflow ended in a way its parent cannot go on from.

    It stalled (a fan-in inside it can never fill), or it output a value
    of a class it does not declare.
    """


class AppLoadError(TreadleError, LookupError):
    """An ``--app`` import path does not load, or holds no workflow."""


class CommandError(TreadleError):
    """The command cannot be carried out as asked; nothing was changed."""


class FilterError(TreadleError, ValueError):
    """A filter of runs (``--where``, ``?where=``) cannot be read; names the fault and its column.

    Attributes:
        column: Where in the filter's text the fault is (1 is its first character).
    """

    def __init__(self, message: str, column: int) -> None:
        super().__init__(f"the filter cannot be read: {message}")
        self.column = column


class LinkRefusedError(CommandError):
    """An answer link was refused: tampered, expired, used, or not this principal's.

    Attributes:
        reason: Which: ``invalid`` (tampered, or not made by this store),
            ``expired``, ``used`` or ``not_yours``.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class MigrationError(TreadleError):
    """A migration cannot move a run (or no chain of migrations leads where asked).

    ``reasons`` lists every problem found at once: a migration function that
    raised or returned something else, and everything in the migrated
    checkpoint the new version's graph cannot take (an executor it lacks, a
    message its target refuses, a value it cannot store). ``run_id`` is the
    run, or ``None`` when no run is concerned (no migration path). Nothing
    was written.
    """

    def __init__(self, reasons: Sequence[str], run_id: str | None = None) -> None:
        self.reasons: tuple[str, ...] = tuple(reasons)
        self.run_id = run_id
        what = f"run {run_id!r} cannot be migrated" if run_id is not None else "cannot migrate"
        if len(self.reasons) == 1:
            super().__init__(f"{what}: {self.reasons[0]}")
        else:
            lines = "\n".join(f"  - {reason}" for reason in self.reasons)
            super().__init__(f"{what} ({len(self.reasons)} problems):\n{lines}")


class HandlerTimeoutError(TreadleError, TimeoutError):
    """A handler ran past its ``timeout``; its late result never commits.

    It fails the invocation like any exception the handler raised, so a
    retry policy may try again.
    """

    def __init__(self, executor_id: str, timeout: float) -> None:
        self.executor_id = executor_id
        self.timeout = timeout
        super().__init__(f"executor {executor_id!r} ran past its timeout of {timeout:g}s")


class RemoteHandlerError(TreadleError):
    """A handler running on an executor pool raised; its exception stayed on the worker.

    Rebuilding the exception here would mean unpickling what a worker
    wrote, so it comes back as text instead: the qualified names of its
    class and bases, its message and its traceback. It fails the invocation
    like any exception; a retry policy whose ``retry_on`` names classes
    matches them against ``remote_types`` (see ``docs/cluster.md``).

    Attributes:
        executor_id: The executor whose handler raised.
        remote_type: The exception's class, as ``module.QualName``.
        remote_types: That class and its bases, most specific first.
        remote_message: ``str()`` of the exception.
        remote_traceback: The traceback, formatted on the worker.
    """

    def __init__(
        self,
        executor_id: str,
        remote_types: Sequence[str],
        remote_message: str,
        remote_traceback: str,
    ) -> None:
        self.executor_id = executor_id
        self.remote_types = tuple(remote_types)
        self.remote_type = self.remote_types[0] if self.remote_types else "builtins.Exception"
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        super().__init__(
            f"{self.remote_type}: {remote_message} (raised on a pool by executor {executor_id!r})"
        )
        if remote_traceback:  # printed with the error, where a local traceback would be
            self.add_note(f"On the worker:\n{remote_traceback.rstrip()}")


class PoolError(TreadleError):
    """An executor pool could not run an invocation: it fails like a handler error.

    For example the cluster is unreachable, or a worker cannot import the
    handler's module. A retry policy may try again. ``executor_id`` is
    ``None`` when no invocation asked for the pool: ``DaskPool.connect``
    called directly could not reach its cluster.
    """

    def __init__(self, executor_id: str | None, reason: str) -> None:
        self.executor_id = executor_id
        self.reason = reason
        if executor_id is None:
            super().__init__(f"the executor pool cannot be used: {reason}")
        else:
            super().__init__(f"the pool of executor {executor_id!r} could not run it: {reason}")


class WorkerLostError(PoolError):
    """The worker running an invocation died or left before it returned.

    Nothing the invocation did commits; a retry policy may run it again on
    another worker.
    """


class PollTimeout(TreadleError, TimeoutError):  # noqa: N818 - the contract's name
    """``ctx.poll_until_complete`` ran past its ``max_duration``."""


class RequestTimeoutError(TreadleError, TimeoutError):
    """A ``ctx.request`` or ``ctx.wait_for_input`` given ``timeout=`` was not answered in time.

    Raised inside the handler, where it awaited, once the deadline has
    passed; catch it to remind, escalate or fall back to a default. It is
    journaled like an answer, so a re-execution raises it again at the same
    point instead of waiting anew, and it happens once across restarts.

    Attributes:
        executor_id: The executor that waited.
        request_id: The request's id (an input wait's key, for ``wait_for_input``).
        deadline_at: When it ran out (seconds since the epoch).
    """

    def __init__(self, executor_id: str, request_id: str, deadline_at: float) -> None:
        self.executor_id = executor_id
        self.request_id = request_id
        self.deadline_at = deadline_at
        super().__init__(
            f"request {request_id!r} of executor {executor_id!r} was not answered by its "
            f"deadline, {_iso(deadline_at)}"
        )


class JournalMismatchError(TreadleError):
    """A re-executed handler called its steps in another order than recorded.

    Handlers that suspend are re-executed from the top; their ``ctx.step``
    calls must come in the same order with the same names each time, or the
    recorded results would be handed to the wrong step.
    """

    def __init__(self, executor_id: str, position: int, recorded: str, called: str) -> None:
        self.executor_id = executor_id
        self.position = position
        super().__init__(
            f"executor {executor_id!r} re-executed differently: its journal has {recorded} at "
            f"position {position}, but the handler now called {called}; keep ctx.step calls "
            f"and waits in the same order on every execution"
        )


class RequestError(TreadleError):
    """An answer or message for a waiting run cannot be applied; nothing changed."""


class UnknownRequestError(RequestError, LookupError):
    """No request with this id is waiting (never asked, or already answered)."""


class InvalidResponseError(RequestError, TypeError):
    """The answer to a request does not have the type the request asked for."""


class RequestAlreadyAnsweredError(UnknownRequestError):
    """Another answer to this request was accepted first; this one changed nothing.

    The first valid answer to a request wins, decided once by the store
    (``docs/semantics.md``, "One owner per run"). The error names the answer
    that won and when it arrived, so a caller can tell a lost race from a
    mistake.

    Attributes:
        run_id: The run.
        request_id: The request.
        answer: The winning answer as plain JSON, as it was typed (cut to 200 characters).
        answered_at: When it was accepted (seconds since the epoch).
        answered_by: Who sent it and through which door, as the run's log
            records it (``maria (page)``), when the one door named it.
    """

    def __init__(
        self,
        run_id: str,
        request_id: str,
        answer: str,
        answered_at: float,
        *,
        answered_by: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.answer = answer
        self.answered_at = answered_at
        self.answered_by = answered_by
        by = f" by {answered_by}" if answered_by else ""
        super().__init__(
            f"request {request_id!r} of run {run_id!r} was already answered{by} "
            f"at {_iso(answered_at)} with {answer}; this answer changed nothing"
        )


class RequestExpiredError(UnknownRequestError):
    """The request's ``timeout=`` passed before this answer reached the run; it changed nothing.

    A deadline is decided like an answer, once, by the store: the process
    that processes it records the timeout as the request's first answer, so
    of an answer and a deadline, whichever reaches the store first wins
    (``docs/semantics.md``, "Deadlines on waits").

    Attributes:
        run_id: The run.
        request_id: The request.
        deadline_at: When it ran out (seconds since the epoch).
    """

    def __init__(self, run_id: str, request_id: str, deadline_at: float) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.deadline_at = deadline_at
        super().__init__(
            f"request {request_id!r} of run {run_id!r} timed out at {_iso(deadline_at)}, "
            f"before this answer arrived; this answer changed nothing"
        )


class RunBusyError(RequestError):
    """Another process owns the run: it holds the run's lease and may be advancing it.

    Nothing was changed. Wait for the owner (``wait=True``, ``--wait``), or
    try again once the lease ends; a lease that ends without being renewed
    means the owner died, and the run can then be taken over.

    Attributes:
        run_id: The run.
        owner: Who holds the lease (``host:pid:tag``).
        lease_until: When the lease ends unless renewed (seconds since the epoch).
    """

    def __init__(self, run_id: str, owner: str, lease_until: float) -> None:
        self.run_id = run_id
        self.owner = owner
        self.lease_until = lease_until
        super().__init__(
            f"run {run_id!r} is owned by {owner} (lease until {_iso(lease_until)}); "
            f"nothing was changed: wait for it, or try again later"
        )


class SessionBusyError(RunBusyError):
    """A session's turn is running and its input policy is ``reject``: nothing was delivered.

    The turn holds the run (``owner`` says who drives it, if anyone holds
    its lease), or rests on a wait of its own (a timer, a request) rather
    than on the session's next message. Send again once the session waits
    for input, or give the workflow another ``InputPolicy`` (``enqueue``,
    ``merge``, ...).

    Attributes:
        run_id: The run.
        why: What the turn is doing.
        owner: Who holds the run's lease (``""``: nobody now).
        lease_until: When that lease ends unless renewed (0: no lease).
    """

    def __init__(self, run_id: str, why: str, owner: str = "", lease_until: float = 0.0) -> None:
        self.run_id = run_id
        self.why = why
        self.owner = owner
        self.lease_until = lease_until
        RequestError.__init__(
            self,
            f"session {run_id!r} is in a turn ({why}) and its input policy is reject: nothing "
            f"was delivered; send again once it waits for input, or build the workflow with "
            f"input_policy=InputPolicy.ENQUEUE (or MERGE, INTERRUPT, ...)",
        )


class RunPausedError(RequestError):
    """The run is paused: nothing advances it until it is unpaused; nothing was changed.

    Raised to whoever would take the run over to advance it (``send_message``,
    a ``resume`` that could not unpause it). ``unpause`` (or ``resume``) lets
    it go on; answers given to a paused run are kept and applied then.

    Attributes:
        run_id: The run.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"run {run_id!r} is paused; nothing was changed: unpause or resume it to let it go on"
        )


class ActionRefusedError(TreadleError, PermissionError):
    """The actor may not take this action on the run; nothing was changed.

    Every action on a run is checked against the actor's rights first
    (DESIGN §17): a role for control actions, the request's approvers and
    four eyes for an answer. The message names who may.

    Attributes:
        actor: The label of the actor refused (``bob``, ``token:ci``).
        action: What it tried (``"answer"``, ``"cancel"``, ...).
        run_id: The run, or ``None`` for an action on the store.
        reason: Why, naming who may.
    """

    def __init__(self, actor: str, action: str, run_id: str | None, reason: str) -> None:
        self.actor = actor
        self.action = action
        self.run_id = run_id
        self.reason = reason
        where = f" on run {run_id!r}" if run_id else ""
        super().__init__(f"{action}{where} refused: {reason}; nothing was changed")


class StartRefusedError(TreadleError):
    """A start policy refused the start: no room for its key or in the workflow's queue.

    Raised by a start whose policy says ``when_busy="refuse"`` when the runs
    holding its key (a singleton's one) or the workflow's ``concurrency`` are
    all taken. Nothing was started or queued; start again once they end, or
    let the policy queue instead.

    Attributes:
        workflow: The workflow started.
        key: The policy's key for the input (``""``: the policy has none).
        holding: Ids of the runs holding the slots, as the store decided.
        cap: What is full: ``"key"`` (its runs per key) or ``"concurrency"``.
    """

    def __init__(self, workflow: str, key: str, holding: Sequence[str], cap: str) -> None:
        self.workflow = workflow
        self.key = key
        self.holding = tuple(holding)
        self.cap = cap
        shown = ", ".join(repr(run_id) for run_id in self.holding[:3])
        more = f" and {len(self.holding) - 3} more" if len(self.holding) > 3 else ""  # noqa: PLR2004
        where = (
            f"key {key!r} of workflow {workflow!r}"
            if cap == "key"
            else f"workflow {workflow!r} (its concurrency)"
        )
        super().__init__(
            f"start refused: {where} is taken by run {shown}{more}; nothing was started "
            f"(its start policy says when_busy='refuse'; start again when that run ends, "
            f"or queue with when_busy='queue')"
        )


def _iso(epoch: float) -> str:
    import datetime as dt  # noqa: PLC0415 - only when an error is built

    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).isoformat(timespec="seconds")
