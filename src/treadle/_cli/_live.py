"""``treadle run``'s live view: supersteps, running executors, progress bars, retries.

The run streams off the consumer's path (``OFF_THREAD``); this view draws
what arrives: a line per superstep with its executors, a progress bar per
executor that reports progress, each output as it commits, each retry with
its attempt and the wait before it, and the final status.

A bar is finished (100%) when its executor completes: handlers often report
progress before each step, or without a total, so the last report they
make is rarely the end, and a bar stuck at 67% beside a ``✓`` reads as work
left undone. On a terminal the bars animate below the lines; piped, they are
printed once, as they ended, when the run stops.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

from treadle._engine._events import (
    CheckpointSaved,
    CustomEvent,
    ExecutorCompleted,
    ExecutorFailed,
    ExecutorInvoked,
    ExecutorSuspended,
    OutputEvent,
    ProgressEvent,
    StatusChanged,
    SuperstepStarted,
    WorkflowEvent,
)

if TYPE_CHECKING:
    from rich.console import Console

    from treadle._engine._options import RunOptions
    from treadle._engine._result import RunResult
    from treadle._graph._policies import RetryPolicy
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow


async def stream_run(
    workflow: Workflow,
    message: Any,
    store: Store,
    run_id: str | None,
    console: Console,
    *,
    quiet: bool = False,
    options: RunOptions | None = None,
) -> RunResult:
    """Run ``workflow`` on ``store``, drawing its events; return the result."""
    view = LiveView(workflow, console, quiet=quiet)
    try:
        async with workflow.stream(message, store=store, run_id=run_id, options=options) as events:
            if not quiet:
                console.print(
                    f"run [bold]{escape(events.run_id)}[/bold] of {escape(workflow.name)}"
                )
            async for event in events:
                view.draw(event)
            return events.result
    finally:
        view.close()


class LiveView:
    """Draws one run's events as they arrive; its bars start with the first progress report.

    Args:
        workflow: The workflow running (for the retry policies of its executors).
        console: Where the lines go.
        quiet: Draw nothing (``--json``: only the final JSON is printed).
    """

    def __init__(self, workflow: Workflow, console: Console, *, quiet: bool = False) -> None:
        self._workflow = workflow
        self._quiet = quiet
        self._progress = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            console=console,
            disable=quiet,
        )
        self._bars: dict[str, TaskID] = {}
        self._drawn = False

    def draw(self, event: WorkflowEvent) -> None:
        """Draw one event: a bar moves (or finishes), or a line prints above the bars."""
        if self._quiet:
            return
        self._drawn = True
        if isinstance(event, ProgressEvent):
            self._advance(event)
            return
        if isinstance(event, ExecutorCompleted):
            self._finish(event.executor_id)
        line = describe(event, self._retry_of(event.executor_id))
        if line is not None:
            self._progress.console.print(line)

    def close(self) -> None:
        """Stop drawing the bars (piped: print them once, as they ended), then a blank line.

        The blank line parts the live view from the run's outcome printed below it.
        """
        if self._bars:
            self._progress.stop()
        if self._drawn:
            self._progress.console.print()

    def _advance(self, event: ProgressEvent) -> None:
        key = event.executor_id or "run"
        text = escape(f"{key}: {event.message}" if event.message else key)
        if not self._bars:  # the first bar: from now on the bars redraw live, below the lines
            self._progress.start()
        if key not in self._bars:
            self._bars[key] = self._progress.add_task(text, total=event.total)
        self._progress.update(
            self._bars[key], completed=event.current, total=event.total, description=text
        )

    def _finish(self, executor_id: str | None) -> None:
        """Fill the executor's bar: it completed, whatever it last reported."""
        bar = self._bars.get(executor_id or "run")
        if bar is None:
            return
        task = next(t for t in self._progress.tasks if t.id == bar)
        total = task.total or 1  # no total reported: done is one of one
        self._progress.update(bar, total=total, completed=total)

    def _retry_of(self, executor_id: str | None) -> RetryPolicy | None:
        """The retry policy a top-level executor's failures follow (``None``: cannot tell)."""
        if executor_id is None or executor_id not in self._workflow.executor_ids:
            return None  # an executor of a sub-workflow, or the run itself
        prototype = self._workflow.prototype(executor_id)
        own = {spec.retry for spec in prototype.handler_specs()}
        if len(own) != 1:  # handlers with policies of their own: it depends on the message
            return None
        (handler_policy,) = own
        return handler_policy or prototype.retry or self._workflow.defaults.retry


def describe(event: WorkflowEvent, retry: RetryPolicy | None = None) -> str | None:  # noqa: PLR0911 - one return per kind
    """One line for the events worth a line; ``None`` for the rest.

    ``retry``: the policy the event's executor retries by, to say how many
    attempts it has and how long it waits before the next one.
    """
    if isinstance(event, SuperstepStarted):
        return f"[dim]superstep {event.superstep}:[/dim] {escape(', '.join(event.executor_ids))}"
    who = escape(event.executor_id or "")
    if isinstance(event, ExecutorInvoked):
        if event.attempt == 1:
            return None
        of = f" of {retry.max_attempts}" if retry is not None else ""
        return f"  [yellow]↻[/yellow] {who}: attempt {event.attempt}{of}"
    if isinstance(event, ExecutorCompleted):
        return f"  [green]✓[/green] {who}"
    if isinstance(event, ExecutorFailed):
        return f"  [red]✗[/red] {who}: {escape(repr(event.error))}{_failure_note(event, retry)}"
    if isinstance(event, ExecutorSuspended):
        return f"  [yellow]…[/yellow] {who} waits ({escape(event.wait)})"
    if isinstance(event, CustomEvent):
        return f"  {who}: {escape(str(event.data))}"
    if isinstance(event, OutputEvent):
        return f"  [bold]output[/bold] from {who}: {_short(event.value)}"
    if isinstance(event, CheckpointSaved):
        return None
    if isinstance(event, StatusChanged) and event.status.is_stopped:
        return f"[bold]{event.status.value}[/bold] after superstep {event.superstep}"
    return None


def _failure_note(event: ExecutorFailed, retry: RetryPolicy | None) -> str:
    """`` (attempt 1 of 3 failed; retrying in 1.0 s)``, or where the failure went."""
    of = f" of {retry.max_attempts}" if retry is not None else ""
    if event.retrying:
        wait = f"retrying in {_backoff(retry, event.attempt)}" if retry else "will retry"
        return f" (attempt {event.attempt}{of} failed; {wait})"
    if event.routed_to is not None:
        return f" (to its error route, {escape(event.routed_to)})"
    if event.attempt > 1:
        return f" (attempt {event.attempt}{of}; no retry left)"
    return ""


def _backoff(retry: RetryPolicy, attempt: int) -> str:
    """The wait before the attempt after ``attempt``: ``1.0 s``, or its range with jitter."""
    low, high = retry.backoff.bounds(attempt)
    if high - low < 0.05:  # noqa: PLR2004 - closer than the precision shown
        return f"{(low + high) / 2:.2g} s"
    return f"{low:.2g} to {high:.2g} s"


def _short(value: Any) -> str:
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    text = json.dumps(to_jsonable_python(value, fallback=repr))
    return escape(text if len(text) <= 200 else text[:197] + "...")  # noqa: PLR2004 - one screen line
