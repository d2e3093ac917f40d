"""How a run reads live on a terminal: ``treadle run``, ``watch`` and ``--follow`` draw alike.

One drawing, :class:`LiveView`, of events in the form the run's log keeps
them (:class:`~treadle._stores._events.LoggedEvent`: plain data). ``treadle
run`` hands it each event of the run it drives, as the log will keep it
(:func:`logged_form`); ``watch`` and ``--follow`` hand it what they read
from the log of a run driven anywhere. So a run reads the same whoever
draws it: a line per superstep with its executors, each retry with its
attempt and the wait before it, a failure that ends an invocation with its
full traceback, each output as it commits, the status the run comes to;
a progress bar per executor that reports progress; a line per agent
whose reply is streaming, showing its last words as they arrive; and below
them, while a superstep is under way, a line naming the executors still
running in it and for how long.

Read from a log, a run's progress and an agent's streaming reply arrive
live (``seq`` 0: raised in whatever process drives the run, before its
superstep commits); the committed events replace them: the streaming line
goes when its executor's invocation ends, and a bar moves on to what
committed.

A bar is finished (100%) when its executor completes: handlers often report
progress before each step, or without a total, so the last report they
make is rarely the end, and a bar stuck at 67% beside a ``✓`` reads as work
left undone. On a terminal the bars and the running line redraw live below
the lines; piped, the bars are printed once, as they ended, when the view
closes, and the running line not at all (it is gone once its superstep is).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
)
from rich.text import Text

from treadle._checkpoints._journal import entry_of
from treadle._engine._events import StatusChanged
from treadle._stores._events import LoggedEvent
from treadle._values._actors import Actor

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console, RenderableType
    from rich.progress import Task

    from treadle._engine._events import WorkflowEvent
    from treadle._engine._options import RunOptions
    from treadle._engine._result import RunResult
    from treadle._graph._policies import RetryPolicy
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow

_SHORT = 200  # characters of a value shown on one line
_ENDS_AN_INVOCATION = frozenset({"executor_completed", "executor_suspended", "executor_failed"})
_STREAMED = 60  # characters of an agent's streaming reply shown on its line


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
    with LiveView(console, workflow, quiet=quiet, as_it_runs=True) as view:
        started = workflow.stream(
            message, store=store, run_id=run_id, options=options, actor=Actor.cli()
        )
        async with started as events:
            if not quiet:
                console.print(
                    f"run [bold]{escape(events.run_id)}[/bold] of {escape(workflow.name)}"
                )
            async for event in events:
                view.draw(logged_form(event))
            return events.result


def logged_form(event: WorkflowEvent) -> LoggedEvent:
    """An event of a run driven here, in the form its log keeps it (``seq`` 0: not read back).

    A run's failure is kept in the log as one line (``Type: message``); its
    traceback is with the invocation that failed.
    """
    entry = entry_of(event, time.time())
    data = json.loads(entry.data)
    if isinstance(event, StatusChanged) and event.error is not None:
        data["error"] = f"{type(event.error).__name__}: {event.error}"
    return LoggedEvent(
        event.run_id, 0, entry.superstep, entry.kind, entry.executor_id, entry.at, data
    )


class LiveView:
    """Draws one run's events as they arrive; a context manager (for its live lines).

    Args:
        console: Where the lines go.
        workflow: The run's workflow, when its code is here: retries then
            say how many attempts their executor has and how long each
            wait is. ``None``: they say what the log says.
        quiet: Draw nothing (``--json``: only the final JSON is printed).
        as_it_runs: The events arrive as they happen (``run``), so a superstep
            that starts is under way: the running line follows it. Read from
            a log, a superstep's events arrive once it has committed, and the
            running line is drawn by :meth:`superstep_running` instead.
    """

    def __init__(
        self,
        console: Console,
        workflow: Workflow | None = None,
        *,
        quiet: bool = False,
        as_it_runs: bool = False,
    ) -> None:
        self.workflow = workflow
        self._as_it_runs = as_it_runs
        """The run's workflow (``None``: its code is not here)."""
        self._quiet = quiet
        self._progress = Progress(
            TextColumn("  {task.description}"),
            _Bar(),
            _Measure(),
            console=console,
            disable=quiet,
        )
        self._started = False
        self._drawn = False
        self._bars: dict[str, TaskID] = {}
        self._running: TaskID | None = None
        self._running_step = -1
        self._running_ids: list[str] | None = None
        self._streams: dict[str, tuple[TaskID, str]] = {}  # executor id: its line, its text
        self.last_seq = 0
        """The ``seq`` of the last event drawn from a log (0: none yet)."""
        self.last_at: float | None = None
        """When the last event drawn happened (epoch seconds)."""
        self.last_superstep = 0
        """The superstep of the last event drawn."""

    def __enter__(self) -> LiveView:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def draw(self, event: LoggedEvent) -> None:
        """Draw one event: a bar moves (or finishes), or its lines print above the bars."""
        if event.seq or self._as_it_runs:  # a live one read from a log tells of no commit
            self.last_seq = event.seq or self.last_seq
            self.last_at, self.last_superstep = event.at, event.superstep
        if self._quiet:
            return
        self._drawn = True
        if event.kind == "progress":
            self._advance(event)
            return
        if event.kind == "agent_delta":
            self._stream(event)
            return
        self._follow_superstep(event)
        if event.kind == "executor_completed":
            self._finish(event.executor_id)
        for line in describe(event, self._retry_of(event.executor_id)):
            self._progress.console.print(line)

    def superstep_running(
        self, superstep: int, executor_ids: list[str] | None, since: float
    ) -> None:
        """Say that ``superstep`` is under way since ``since``, in ``executor_ids`` (if known).

        For a run driven elsewhere, whose log holds a superstep's events only
        once it commits: this is what can be known of it before then.
        """
        if self._quiet or (superstep == self._running_step and self._running is not None):
            return
        self._running_step, self._running_ids = superstep, executor_ids
        self._show_running(since)

    def close(self) -> None:
        """Stop the live lines (piped: print the bars once, as they ended), then a blank line.

        The blank line parts the live view from the run's outcome printed below it.
        """
        self._end_running()
        self._end_streams()
        parted = False
        if self._started:
            if not self._progress.tasks:  # only a running line was shown: nothing to leave
                self._progress.live.transient = True
                # Piped, rich ends even a vanished live view with a line of its own: the
                # blank line that parts it from what follows is there already.
                parted = not self._progress.console.is_terminal
            self._progress.stop()
            self._started = False
        if self._drawn and not parted:
            self._progress.console.print()
        self._drawn = False

    # -- an agent's reply as it streams ----------------------------------------------------
    def _stream(self, event: LoggedEvent) -> None:
        """An agent's delta: its line shows the reply's last words (or the tool it calls)."""
        key = event.executor_id or "run"
        data = event.data
        line, text = self._streams.get(key, (None, ""))
        if data.get("kind") == "tool_call":
            text = f"calling {data.get('tool') or 'a tool'}"
        else:
            text = (text + str(data.get("delta", "")))[-_STREAMED:]
        shown = escape(f"{key}: {text[-_STREAMED:]}".replace("\n", " "))
        self._start()
        if line is None:
            line = self._progress.add_task(shown, total=None, streaming=True)
        else:
            self._progress.update(line, description=shown)
        self._streams[key] = (line, text)

    def _end_streams(self, executor_id: str | None = None) -> None:
        """The committed events have come: the streaming lines they replace go."""
        for key in [executor_id] if executor_id is not None else list(self._streams):
            ended = self._streams.pop(key, None)
            if ended is not None:
                self._progress.remove_task(ended[0])

    # -- the line of the superstep under way ---------------------------------------------
    def _follow_superstep(self, event: LoggedEvent) -> None:
        """Keep the running line to what the event says of its superstep."""
        kind, who = event.kind, event.executor_id
        if self._streams and (kind in _ENDS_AN_INVOCATION or kind == "superstep_completed"):
            self._end_streams(who if kind in _ENDS_AN_INVOCATION else None)
        if kind == "superstep_started":
            self._end_running()
            if self._as_it_runs:
                self._running_step = event.superstep
                self._running_ids = list(event.data.get("executor_ids", ()))
                self._show_running(event.at)
        elif kind in {"superstep_completed", "checkpoint_saved", "status_changed"}:
            self._end_running()
        elif kind in _ENDS_AN_INVOCATION and not event.data.get("retrying"):
            self._done_running(who)

    def _done_running(self, executor_id: str | None) -> None:
        """An invocation ended: its executor leaves the running line."""
        running = self._running_ids
        if running is not None and executor_id in running:
            running.remove(executor_id)
            self._update_running()

    def _running_text(self) -> str:
        step = f"[dim]superstep {self._running_step}[/dim]"
        if self._running_ids is None:
            return f"{step} [yellow]running[/yellow]"
        return f"{step} [yellow]running:[/yellow] {escape(', '.join(self._running_ids))}"

    def _show_running(self, since: float) -> None:
        self._start()
        self._end_running()
        self._running = self._progress.add_task(self._running_text(), total=None, since=since)

    def _update_running(self) -> None:
        if self._running is not None:
            self._progress.update(self._running, description=self._running_text())

    def _end_running(self) -> None:
        if self._running is not None:
            self._progress.remove_task(self._running)
            self._running = None

    # -- bars ------------------------------------------------------------------------------
    def _start(self) -> None:
        if not self._started:  # from now on the live lines redraw below the printed ones
            self._progress.start()
            self._started = True

    def _advance(self, event: LoggedEvent) -> None:
        key = event.executor_id or "run"
        message = event.data.get("message")
        text = escape(f"{key}: {message}" if message else key)
        total = event.data.get("total")
        self._start()
        if key not in self._bars:
            self._bars[key] = self._progress.add_task(text, total=total)
        current = event.data.get("current", 0)
        self._progress.update(self._bars[key], completed=current, total=total, description=text)

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
        workflow = self.workflow
        if workflow is None or executor_id is None or executor_id not in workflow.executor_ids:
            return None  # no code here, an executor of a sub-workflow, or the run itself
        prototype = workflow.prototype(executor_id)
        own = {spec.retry for spec in prototype.handler_specs()}
        if len(own) != 1:  # handlers with policies of their own: it depends on the message
            return None
        (handler_policy,) = own
        return handler_policy or prototype.retry or workflow.defaults.retry


class _Bar(ProgressColumn):
    """A progress bar; nothing on the running line."""

    def __init__(self) -> None:
        super().__init__()
        self._bar = BarColumn()

    def render(self, task: Task) -> RenderableType:
        """The bar of a task that reports progress."""
        if task.fields.get("since") is not None or task.fields.get("streaming"):
            return Text("")
        return self._bar.render(task)


class _Measure(ProgressColumn):
    """A bar's percentage; on the running line, how long its superstep has been running."""

    def __init__(self) -> None:
        super().__init__()
        self._percentage = TaskProgressColumn()

    def render(self, task: Task) -> RenderableType:
        """The percentage done, or the time its superstep has been running."""
        since = task.fields.get("since")
        if task.fields.get("streaming"):
            return Text("")
        if since is None:
            return self._percentage.render(task)
        return Text(elapsed(time.time() - since), style="dim")


def elapsed(seconds: float) -> str:
    """``4 s``, ``2 min 05 s``, ``1 h 02 min``: how long, at a glance."""
    whole = max(0, int(seconds))
    if whole < 60:  # noqa: PLR2004 - a minute
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:  # noqa: PLR2004 - an hour
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def describe(event: LoggedEvent, retry: RetryPolicy | None = None) -> list[str]:  # noqa: PLR0911 - one return per kind
    """The lines one event is worth while following a run (rich markup); often none.

    ``retry``: the policy the event's executor retries by, to say how many
    attempts it has and how long it waits before the next one.
    """
    data, who = event.data, escape(event.executor_id or "")
    kind = event.kind
    if kind == "superstep_started":
        executors = ", ".join(escape(e) for e in data.get("executor_ids", ()))
        return [f"[dim]superstep {event.superstep}:[/dim] {executors}"]
    if kind == "executor_invoked" and data.get("attempt", 1) > 1:
        of = f" of {retry.max_attempts}" if retry is not None else ""
        return [f"  [yellow]↻[/yellow] {who}: attempt {data['attempt']}{of}"]
    if kind == "executor_completed":
        return [f"  [green]✓[/green] {who}"]
    if kind == "executor_failed":
        final = not data.get("retrying") and not data.get("routed_to")
        line = f"  [red]✗[/red] {who}: {failure_text(data)}{_failure_note(data, retry)}"
        return [line, *(trace_lines(data) if final else [])]
    if kind == "executor_suspended":
        return [f"  [yellow]…[/yellow] {who} waits ({escape(str(data.get('wait', '?')))})"]
    if kind == "output":
        return [f"  [bold]output[/bold] from {who}: {short(data.get('value'))}"]
    if kind == "custom":
        return [f"  {who}: {short(data.get('data'))}"]
    if kind == "status_changed" and data.get("status") != "running":
        status = escape(str(data.get("status")))
        # Its error is said once, where the run is shown at the end; a traceback only here.
        # A failure is logged with the superstep that failed; any other status, after one.
        where = "in" if data.get("status") == "failed" else "after"
        return [f"[bold]{status}[/bold] {where} superstep {event.superstep}", *trace_lines(data)]
    return []


def failure_text(data: dict[str, Any]) -> str:
    """An event's error in one line: ``ValueError: bad input``."""
    error = data.get("error")
    if not isinstance(error, dict):
        return escape(str(error))
    return escape(f"{error.get('type', 'Error')}: {error.get('message', '')}")


def _failure_note(data: dict[str, Any], retry: RetryPolicy | None) -> str:
    """`` (attempt 1 of 3 failed; retrying in 1.0 s)``, or where the failure went."""
    attempt = data.get("attempt", 1)
    of = f" of {retry.max_attempts}" if retry is not None else ""
    if data.get("retrying"):
        wait = f"retrying in {_backoff(retry, attempt)}" if retry else "will retry"
        return f" (attempt {attempt}{of} failed; {wait})"
    if data.get("routed_to") is not None:
        return f" (to its error route, {escape(str(data['routed_to']))})"
    if attempt > 1:
        return f" (attempt {attempt}{of}; no retry left)"
    return ""


def _backoff(retry: RetryPolicy, attempt: int) -> str:
    """The wait before the attempt after ``attempt``: ``1.0 s``, or its range with jitter."""
    low, high = retry.backoff.bounds(attempt)
    if high - low < 0.05:  # noqa: PLR2004 - closer than the precision shown
        return f"{(low + high) / 2:.2g} s"
    return f"{low:.2g} to {high:.2g} s"


def trace_lines(data: dict[str, Any]) -> list[str]:
    """The full traceback of an event's error, indented, as plain text (never markup)."""
    error = data.get("error")
    trace = error.get("traceback") if isinstance(error, dict) else data.get("traceback")
    if not trace:
        return []
    return [f"    [dim]{escape(line)}[/dim]" for line in str(trace).rstrip("\n").splitlines()]


def short(value: Any) -> str:
    """A JSON value on one line, cut to a screen's width."""
    text = json.dumps(value, default=repr)
    return escape(text if len(text) <= _SHORT else text[: _SHORT - 3] + "...")
