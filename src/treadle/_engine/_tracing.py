"""The tracing port: spans for runs, supersteps and invocations.

The engine talks to tracing through :class:`Tracing`, three context-manager
hooks, and never imports a tracing library: ``treadle.otel`` implements the
port on OpenTelemetry for those who opt in. A run without tracing holds no
:class:`RunTrace`, and the engine pays two ``None`` checks per superstep and
one per invocation.

Spans nest run → superstep → invocation, each hook receiving its parent
explicitly. Only the invocation span is made current (while the handler
runs, also in a worker thread), so user spans nest under it; the run and
superstep spans are not, because a run may be stepped by its stream's
consumer across many unrelated calls of the consumer's own.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from treadle._engine._result import RunStatus

if TYPE_CHECKING:
    from collections.abc import Mapping


class TraceSpan(Protocol):
    """A span opened through a :class:`Tracing` hook."""

    def set_outcome(self, status: str, error: BaseException | None = None) -> None:
        """Record how the span's work ended, before the span ends.

        ``status`` is ``completed``, ``failed`` (with ``error``),
        ``suspended`` (an invocation that reached a durable wait) or
        ``cancelled``; a run's span gets its final ``RunStatus`` value
        (also ``waiting``, ``awaiting_input`` or ``stalled``).
        """


SpanT = TypeVar("SpanT", bound=TraceSpan)


class Tracing(Protocol[SpanT]):
    """Opens the spans of runs, supersteps and invocations.

    Each hook returns a context manager whose value is the span; the engine
    calls :meth:`TraceSpan.set_outcome` on it before leaving the context.
    """

    def run(self, *, run_id: str, workflow: str) -> AbstractContextManager[SpanT]:
        """A run's span, parented by whatever is current where the run starts."""
        ...

    def superstep(
        self, parent: SpanT, *, run_id: str, superstep: int
    ) -> AbstractContextManager[SpanT]:
        """A superstep's span, child of its run's (invocations and barrier)."""
        ...

    def invocation(
        self,
        parent: SpanT,
        *,
        run_id: str,
        superstep: int,
        executor_id: str,
        position: int,
        attempt: int,
    ) -> AbstractContextManager[SpanT]:
        """One attempt of one handler on one message, child of its superstep's span.

        The span must be current inside the context (the handler runs there).
        """
        ...


_SUPERSTEP_OUTCOME: Final[Mapping[RunStatus, str]] = {
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "cancelled",
}


class RunTrace:
    """The open spans of one traced run: its own, and its current superstep's.

    The run's span opens at its first superstep in this process (or, for a
    run that ends before one, as it ends) and ends when the run's status
    becomes final, so it covers the whole run however it is driven:
    ``run``, either stream mode, or a resume.
    """

    __slots__ = (
        "_ended",
        "_run_scope",
        "_run_span",
        "_superstep_scope",
        "run_id",
        "superstep_span",
        "tracing",
        "workflow",
    )

    def __init__(self, tracing: Tracing[Any], run_id: str, workflow: str) -> None:
        self.tracing = tracing
        self.run_id = run_id
        self.workflow = workflow
        self._run_scope: ExitStack | None = None
        self._run_span: Any = None
        self._ended = False
        self._superstep_scope: ExitStack | None = None
        self.superstep_span: Any = None

    def _open_run(self) -> Any:
        if self._run_scope is None:
            scope = ExitStack()
            self._run_span = scope.enter_context(
                self.tracing.run(run_id=self.run_id, workflow=self.workflow)
            )
            self._run_scope = scope
        return self._run_span

    def start_superstep(self, superstep: int) -> None:
        """Open a superstep's span (and the run's, at its first)."""
        parent = self._open_run()
        scope = ExitStack()
        self.superstep_span = scope.enter_context(
            self.tracing.superstep(parent, run_id=self.run_id, superstep=superstep)
        )
        self._superstep_scope = scope

    def end_superstep(self, status: str = "completed", error: BaseException | None = None) -> None:
        """End the current superstep's span, if one is open."""
        scope = self._superstep_scope
        if scope is not None:
            self.superstep_span.set_outcome(status, error)
            self._superstep_scope = self.superstep_span = None
            scope.close()

    def invocation(
        self, superstep: int, executor_id: str, position: int, attempt: int
    ) -> AbstractContextManager[TraceSpan]:
        """The span of one invocation attempt, in the current superstep's."""
        return self.tracing.invocation(
            self.superstep_span,
            run_id=self.run_id,
            superstep=superstep,
            executor_id=executor_id,
            position=position,
            attempt=attempt,
        )

    def end(self, status: RunStatus, error: BaseException | None = None) -> None:
        """The run's status became final: end the superstep's span, then the run's."""
        if self._ended:
            return
        self._ended = True
        self.end_superstep(_SUPERSTEP_OUTCOME.get(status, "completed"), error)
        self._open_run().set_outcome(status.value, error)  # a run may end before any superstep
        if self._run_scope is not None:  # opened by now; narrows the type
            self._run_scope.close()
