"""How a run's event log reads on a terminal: live (``watch``, ``--follow``) or whole (``logs``).

The log (``Store.read_events``) holds plain data, so this draws any run,
whichever process or worker ran it and whether or not its code is here.
Live, a line is drawn for what a person follows: each superstep and its
executors, retries, waits, outputs, failures (a failure that ends the
invocation with its traceback), and the status the run comes to; progress
reports move a bar. ``logs`` prints every event, one line each, numbered,
and every failure's full traceback below its line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

from treadle._cli._answering import request_lines
from treadle._cli._views import out, when
from treadle._operations._plain import plain

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console

    from treadle._operations._commands import RunView
    from treadle._stores._store import LoggedEvent

_SHORT = 200  # characters of a value shown on one line


class EventDrawer:
    """Draws logged events as they arrive, on ``console``; a context manager (for its bars).

    Args:
        console: Where the lines go.
        quiet: Draw nothing (``--json``: only the final JSON is printed).
    """

    def __init__(self, console: Console, *, quiet: bool = False) -> None:
        self._quiet = quiet
        self._progress = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            console=console,
            disable=quiet,
        )
        self._bars: dict[str, TaskID] = {}
        self.last_seq = 0
        """The ``seq`` of the last event drawn (0: none yet)."""

    def __enter__(self) -> EventDrawer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bars:  # the bars were drawn live: end that
            self._progress.__exit__(kind, error, trace)

    def draw(self, event: LoggedEvent) -> None:
        """Draw one event: a bar moves, or its lines print above the bars."""
        self.last_seq = event.seq
        if self._quiet:
            return
        if event.kind == "progress":
            self._advance(event)
            return
        for line in live_lines(event):
            self._progress.console.print(line)

    def _advance(self, event: LoggedEvent) -> None:
        key = event.executor_id or "run"
        message = event.data.get("message")
        text = escape(f"{key}: {message}" if message else key)
        total = event.data.get("total")
        if not self._bars:  # the first bar: from now on the bars redraw live, below the lines
            self._progress.start()
        if key not in self._bars:
            self._bars[key] = self._progress.add_task(text, total=total)
        current = event.data.get("current", 0)
        self._progress.update(self._bars[key], completed=current, total=total, description=text)


def live_lines(event: LoggedEvent) -> list[str]:  # noqa: PLR0911 - one return per kind
    """The lines one event is worth while following a run (rich markup); often none."""
    data, who = event.data, escape(event.executor_id or "")
    if event.kind == "superstep_started":
        executors = ", ".join(escape(e) for e in data.get("executor_ids", ()))
        return [f"[dim]superstep {event.superstep}:[/dim] {executors}"]
    if event.kind == "executor_invoked" and data.get("attempt", 1) > 1:
        return [f"  [yellow]↻[/yellow] {who}: attempt {data['attempt']}"]
    if event.kind == "executor_completed":
        return [f"  [green]✓[/green] {who}"]
    if event.kind == "executor_failed":
        final = not data.get("retrying") and not data.get("routed_to")
        return [f"  [red]✗[/red] {who}: {failure_text(data)}", *(_trace(data) if final else [])]
    if event.kind == "executor_suspended":
        return [f"  [yellow]…[/yellow] {who} waits ({escape(str(data.get('wait', '?')))})"]
    if event.kind == "output":
        return [f"  [bold]output[/bold] from {who}: {short(data.get('value'))}"]
    if event.kind == "custom":
        return [f"  {who}: {short(data.get('data'))}"]
    if event.kind == "status_changed" and data.get("status") != "running":
        status = escape(str(data.get("status")))
        # Its error is said once, where the run is shown at the end; a traceback only here.
        # A failure is logged with the superstep that failed; any other status, after one.
        where = "in" if data.get("status") == "failed" else "after"
        return [f"[bold]{status}[/bold] {where} superstep {event.superstep}", *_trace(data)]
    return []


def log_lines(event: LoggedEvent) -> list[str]:
    """``treadle logs``: one numbered line per event; a failure's full traceback below it."""
    head = (
        f"[dim]#{event.seq} {when(event.at)} s{event.superstep}[/dim] "
        f"[bold]{escape(event.kind)}[/bold]"
    )
    if event.executor_id:
        head += f" {escape(event.executor_id)}"
    summary = _summary(event)
    lines = [f"{head}: {summary}" if summary else head]
    return lines + _trace(event.data)


def _summary(event: LoggedEvent) -> str:
    """What an event says, on its line of the log."""
    data = dict(event.data)
    if isinstance(data.get("error"), dict):
        flags = [f"{k}={data.pop(k)}" for k in ("attempt", "retrying", "routed_to") if data.get(k)]
        data.pop("position", None)
        return failure_text(event.data) + (f" ({', '.join(flags)})" if flags else "")
    if event.kind == "status_changed" and data.get("error") is None:
        data.pop("error", None)
    return " ".join(f"{escape(str(k))}={short(v)}" for k, v in data.items())


def failure_text(data: dict[str, Any]) -> str:
    """An event's error in one line: ``ValueError: bad input`` (and where it went, live)."""
    error = data.get("error")
    if not isinstance(error, dict):
        return escape(str(error))
    text = escape(f"{error.get('type', 'Error')}: {error.get('message', '')}")
    if data.get("retrying"):
        text += " (will retry)"
    elif data.get("routed_to"):
        text += f" (to its error route, {escape(str(data['routed_to']))})"
    return text


def _trace(data: dict[str, Any]) -> list[str]:
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


def print_settled(view: RunView, *, as_json: bool) -> None:
    """Where a followed run came to rest or ended: status, outputs, error, what it asks."""
    row = view.run
    if as_json:
        data = {
            "run_id": row.run_id,
            "status": row.status,
            "superstep": row.superstep,
            "outputs": view.outputs,
            "pending_requests": view.pending_requests,
            "wake_at": view.wake_at,
            "error": row.error,
        }
        out.print_json(data=plain(data))
        return
    style = "green" if row.status == "completed" else "yellow"
    out.print(f"run [bold]{escape(row.run_id)}[/bold]: [{style}]{row.status}[/{style}]")
    for value in view.outputs:
        out.print(f"  output: {escape(json.dumps(plain(value)))}")
    if row.error:
        out.print(f"  error: {escape(row.error)}")
    if view.detail:
        out.print(f"  [dim]{escape(view.detail)}[/dim]")
    for line in (line for r in view.pending_requests for line in request_lines(plain(r))):
        out.print(f"  {line}")
    if view.wake_at is not None:
        out.print(f"  next timer: {when(view.wake_at)}")
