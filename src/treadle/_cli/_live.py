"""``treadle run``'s live view: supersteps, running executors, progress bars.

The run streams off the consumer's path (``OFF_THREAD``); this view draws
what arrives: a line per superstep with its executors, a progress bar per
executor that reports progress, each output as it commits, and the final
status. On a terminal the bars animate; piped, the same lines print plainly.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

from treadle._engine._events import (
    CheckpointSaved,
    CustomEvent,
    ExecutorCompleted,
    ExecutorFailed,
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
    progress = Progress(
        TextColumn("  {task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        console=console,
        disable=quiet,
    )
    bars: dict[str, TaskID] = {}
    with progress:
        async with workflow.stream(message, store=store, run_id=run_id, options=options) as events:
            if not quiet:
                progress.console.print(f"run [bold]{events.run_id}[/bold] of {workflow.name}")
            async for event in events:
                if quiet:
                    continue
                if isinstance(event, ProgressEvent):
                    _advance(progress, bars, event)
                    continue
                line = describe(event)
                if line is not None:
                    progress.console.print(line)
            return events.result


def _advance(progress: Progress, bars: dict[str, TaskID], event: ProgressEvent) -> None:
    key = event.executor_id or "run"
    text = f"{key}: {event.message}" if event.message else key
    if key not in bars:
        bars[key] = progress.add_task(text, total=event.total)
    progress.update(bars[key], completed=event.current, total=event.total, description=text)


def describe(event: WorkflowEvent) -> str | None:  # noqa: PLR0911 - one return per kind
    """One line for the events worth a line; ``None`` for the rest."""
    if isinstance(event, SuperstepStarted):
        return f"[dim]superstep {event.superstep}:[/dim] {', '.join(event.executor_ids)}"
    if isinstance(event, ExecutorCompleted):
        return f"  [green]✓[/green] {event.executor_id}"
    if isinstance(event, ExecutorFailed):
        retry = " (will retry)" if event.retrying else ""
        if event.routed_to is not None:
            retry = f" (to its error route, {event.routed_to})"
        return f"  [red]✗[/red] {event.executor_id}: {event.error!r}{retry}"
    if isinstance(event, ExecutorSuspended):
        return f"  [yellow]…[/yellow] {event.executor_id} waits ({event.wait})"
    if isinstance(event, CustomEvent):
        return f"  {event.executor_id}: {event.data}"
    if isinstance(event, OutputEvent):
        return f"  [bold]output[/bold] from {event.executor_id}: {_short(event.value)}"
    if isinstance(event, CheckpointSaved):
        return None
    if isinstance(event, StatusChanged) and event.status.is_stopped:
        return f"[bold]{event.status.value}[/bold] after superstep {event.superstep}"
    return None


def _short(value: Any) -> str:
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    text = json.dumps(to_jsonable_python(value, fallback=repr))
    return text if len(text) <= 200 else text[:197] + "..."  # noqa: PLR2004 - one screen line
