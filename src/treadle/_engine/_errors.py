"""The errors that end a run, defined beside the result they carry.

``WorkflowRunError`` and ``RunCancelledError`` hold the run's committed
``RunResult``, an engine value, so they live in the engine rather than in
``_exceptions.py`` (which imports nothing of treadle). They are still
branches of the one tree rooted at ``TreadleError``; ``treadle.errors``
draws it whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._exceptions import TreadleError
from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._engine._result import RunResult


class WorkflowRunError(TreadleError):
    """The run ended as ``FAILED``; ``result`` holds what had been committed.

    Nothing of the superstep that failed is in ``result``: its state writes,
    messages and outputs were discarded together.
    """

    result: RunResult
    """Set before the error reaches you: the run as of its last barrier."""


class ExecutorFailedError(WorkflowRunError):
    """A handler raised; the original exception is chained as ``__cause__``."""

    def __init__(self, executor_id: str, superstep: int, error: BaseException) -> None:
        self.executor_id = executor_id
        self.superstep = superstep
        self.error = error
        self.attempt = 1
        """Which attempt failed last (a retry policy may have tried several)."""
        self.events: list[Any] = []
        """The events the failed invocation raised (for runs reporting in batches)."""
        super().__init__(
            f"executor {executor_id!r} failed in superstep {superstep}: {error_text(error)}"
        )


def infrastructure(error: BaseException) -> bool:
    """Whether ``error`` is the machine's or a database driver's, not the run's code at fault.

    A connection refused, a timeout, a driver's error a store let through:
    the run may go on once it passes (a worker or a resume takes it up), so
    it must not fail the run.
    """
    module = type(error).__module__.partition(".")[0]
    return isinstance(error, OSError | TimeoutError) or module in _DRIVERS


_DRIVERS = frozenset({"psycopg", "psycopg_pool", "sqlite3"})


def outside_handlers(run_id: str, superstep: int, error: BaseException) -> WorkflowRunError:
    """The run's failure when code outside every handler raised ``error``.

    An executor's ``snapshot``, its factory, treadle's own machinery:
    whatever it was, the run fails on the record rather than stay
    ``running`` with nobody to take it on.
    """
    return WorkflowRunError(
        f"run {run_id!r} failed in superstep {superstep} outside its handlers: {error_text(error)}"
    )


class StateConflictError(WorkflowRunError):
    """Two executors ``set`` the same key in one superstep without a reducer.

    Neither write can win without the result depending on timing, so the
    superstep is refused. Declare the key with a reducer, or use
    ``state.update`` for read-modify-write.
    """

    def __init__(self, key: str, executor_ids: Sequence[str], superstep: int) -> None:
        self.key = key
        self.executor_ids = tuple(executor_ids)
        self.superstep = superstep
        names = " and ".join(repr(e) for e in self.executor_ids)
        super().__init__(
            f"state key {key!r} was set by {names} in superstep {superstep}; "
            f"declare it with a reducer or use state.update()"
        )


class OutcomeConflictError(WorkflowRunError):
    """Two executors set different outcomes for the run in one superstep.

    A run has one outcome; which of two set at once should win would depend
    on nothing the workflow says, so the superstep is refused (as two ``set``
    writes of one state key are). Executors that agree on the name and the
    summary do not conflict; a later superstep may set another.
    """

    def __init__(
        self, executor_ids: Sequence[str], outcomes: Sequence[str], superstep: int
    ) -> None:
        self.executor_ids = tuple(executor_ids)
        self.outcomes = tuple(outcomes)
        self.superstep = superstep
        said = " and ".join(
            f"{executor!r} set {outcome!r}"
            for executor, outcome in zip(executor_ids, outcomes, strict=True)
        )
        super().__init__(
            f"the run's outcome conflicts in superstep {superstep}: {said}; "
            f"let one executor decide it"
        )


class IterationLimitExceeded(WorkflowRunError):  # noqa: N818 - the contract's name
    """A loop ran past ``max_supersteps`` or an executor past ``max_node_iterations``."""

    def __init__(self, message: str, executor_ids: Sequence[str], superstep: int) -> None:
        self.executor_ids = tuple(executor_ids)
        self.superstep = superstep
        super().__init__(message)


class RunTimeoutError(WorkflowRunError, TimeoutError):
    """The run passed its wall-clock deadline (its ``timeout=``).

    The deadline is stored with the run, so it holds across restarts: a run
    resting on a timer that would fire after it fails at the deadline.
    """

    def __init__(self, run_id: str, deadline_at: float, superstep: int) -> None:
        self.run_id = run_id
        self.deadline_at = deadline_at
        self.superstep = superstep
        super().__init__(f"run {run_id!r} passed its deadline at {deadline_at:.3f} (epoch seconds)")


class UnanswerableWaitError(WorkflowRunError):
    """A run with no store came to rest waiting for what only a store lets anyone give.

    Requests, handoff approvals and session input are answered through the
    store (``respond``, ``send_message``), so without one the run could
    never go on: it fails here, naming what it waits for, instead of
    returning a resting result nobody can continue. Give the workflow a
    store, or ask for the resting result with ``rest_without_store=True``.

    Attributes:
        run_id: The run.
        waiting: (executor id, request id) of each wait, in the order asked.
    """

    def __init__(self, run_id: str, waiting: Sequence[tuple[str, str]]) -> None:
        self.run_id = run_id
        self.waiting = tuple(waiting)
        what = ", ".join(f"{key!r} of executor {executor!r}" for executor, key in self.waiting)
        super().__init__(
            f"run {run_id!r} has no store, so nothing can answer what it waits for ({what}); "
            f"give it a store (WorkflowBuilder(store=...) or store=...) so respond() or "
            f"send_message() can continue it, or pass rest_without_store=True to get the "
            f"resting result instead"
        )


class RunCancelledError(TreadleError):
    """The run was cancelled; ``result`` holds what had been committed."""

    def __init__(self, run_id: str, result: RunResult | None = None) -> None:
        self.run_id = run_id
        self.result = result
        super().__init__(f"run {run_id!r} was cancelled")
