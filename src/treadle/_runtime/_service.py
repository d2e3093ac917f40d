"""The embedded runtime: one store, one clock, and the timers of every run.

A run that rests on a durable timer lives only in its store; something must
wake it when the timer falls due — also if the process that set the timer
has died since. ``Runtime`` is that something for the embedded set-up: it
knows the workflows by name, asks the store which runs are due (timers and
deadlines), and resumes each. ``treadle worker`` processes play the same
part on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from treadle._exceptions import RunCancelledError, TreadleError, WorkflowRunError
from treadle._runtime._clock import SystemClock

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from types import TracebackType

    from treadle._durable._store import RunRecord, Store
    from treadle._runtime._clock import Clock
    from treadle._runtime._result import RunResult
    from treadle._runtime._workflow import Workflow


class Runtime:
    """Runs workflows on a store and wakes their timers when they fall due.

    Args:
        store: Where runs live (``SqliteStore`` for the embedded set-up).
        workflows: The workflows whose runs it may resume, found by name.
        clock: The time source (``treadle.testing.FakeClock`` in tests).
        poll_interval: How often :meth:`serve` asks the store for due runs.

    Use ``async with Runtime(...) as runtime:`` to run the timer service in
    the background for the block's duration, or call :meth:`wake_due`
    yourself (a cron job, a test).
    """

    def __init__(
        self,
        store: Store,
        workflows: Iterable[Workflow],
        *,
        clock: Clock | None = None,
        poll_interval: float = 1.0,
    ) -> None:
        self.store = store
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.poll_interval = poll_interval
        self._workflows: dict[str, Workflow] = {}
        for workflow in workflows:
            if workflow.name in self._workflows:
                msg = f"two workflows are named {workflow.name!r}; a runtime finds them by name"
                raise ValueError(msg)
            self._workflows[workflow.name] = workflow
        self._service: asyncio.Task[None] | None = None

    def workflow(self, name: str) -> Workflow:
        """The workflow registered under ``name``."""
        try:
            return self._workflows[name]
        except KeyError:
            known = ", ".join(sorted(self._workflows)) or "none"
            msg = f"this runtime has no workflow {name!r} (it has: {known})"
            raise LookupError(msg) from None

    async def start(self, workflow: Workflow | str, message: Any, **options: Any) -> RunResult:
        """Start a run on this runtime's store and clock; return when it rests or ends."""
        chosen = self.workflow(workflow) if isinstance(workflow, str) else workflow
        return await chosen.run(message, store=self.store, clock=self.clock, **options)

    async def wake_due(self, *, limit: int | None = None, concurrency: int = 16) -> list[RunResult]:
        """Resume every run whose timer or deadline is due now; return their results.

        Up to ``concurrency`` runs resume at once (each is its own run, so
        they share nothing but the store), which keeps the store busy rather
        than waiting on each run's round trips in turn. Results come in the
        order the store listed the runs, earliest due first.

        A run that fails (its deadline passed, a handler raised) is recorded
        as ``FAILED`` in the store and reported in the list like any other.
        """
        if concurrency < 1:
            msg = f"concurrency must be at least 1, got {concurrency}"
            raise ValueError(msg)
        due = await self.store.due_runs(self.clock.now(), limit=limit)
        results: list[RunResult | None] = [None] * len(due)
        slots = asyncio.Semaphore(concurrency)

        async def wake(index: int, row: RunRecord) -> None:
            async with slots:
                workflow = self.workflow(row.workflow)
                try:
                    results[index] = await workflow.resume(
                        row.run_id, store=self.store, clock=self.clock, record_events=False
                    )
                except WorkflowRunError as error:
                    results[index] = error.result
                except RunCancelledError:
                    pass  # cancelled between the query and the resume
                except TreadleError as error:
                    # Not raised here: siblings cancelled mid-run would be recorded CANCELLED.
                    problems.append(error)

        problems: list[TreadleError] = []
        async with asyncio.TaskGroup() as group:
            for index, row in enumerate(due):
                group.create_task(wake(index, row))
        if problems:
            raise problems[0]  # the others' runs went on; their results are in the store
        return [result for result in results if result is not None]

    async def serve(self) -> None:
        """Wake due runs forever, every ``poll_interval`` seconds (cancel to stop)."""
        while True:
            # A broken run must not stop the others' timers; its failure is in the store.
            with contextlib.suppress(TreadleError):
                await self.wake_due()
            await self.clock.sleep_until(self.clock.now() + self.poll_interval)

    async def __aenter__(self) -> Runtime:
        self._service = asyncio.create_task(self.serve(), name="treadle-timers")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._service is not None:
            self._service.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._service
            self._service = None

    @property
    def workflows(self) -> Mapping[str, Workflow]:
        """The workflows this runtime serves, by name."""
        return dict(self._workflows)
