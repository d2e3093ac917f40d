"""How a run's event log reads whole (``logs``), and where a followed run settled.

The log (``Store.read_events``) holds plain data, so this prints any run,
whichever process or worker ran it and whether or not its code is here.
``logs`` prints every event, one line each, numbered, and every failure's
full traceback below its line. Live (``run``, ``watch``, ``--follow``), a
run is drawn by :class:`treadle._cli._live.LiveView`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.markup import escape

from treadle._cli._answering import request_lines
from treadle._cli._live import failure_text, short, trace_lines
from treadle._cli._views import out, when
from treadle._operations._audit import action_sentence
from treadle._operations._plain import plain

if TYPE_CHECKING:
    from treadle._operations._run_view import RunView
    from treadle._stores._store import LoggedEvent


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
    return lines + trace_lines(event.data)


def _summary(event: LoggedEvent) -> str:
    """What an event says, on its line of the log (an action: who did it, when and how)."""
    said = action_sentence(event.kind, event.data, event.at)
    if said is not None:
        return escape(said)
    data = dict(event.data)
    if isinstance(data.get("error"), dict):
        flags = [f"{k}={data.pop(k)}" for k in ("attempt", "retrying", "routed_to") if data.get(k)]
        data.pop("position", None)
        text = failure_text(event.data)
        if event.data.get("retrying"):
            text += " (will retry)"
        return text + (f" ({', '.join(flags)})" if flags else "")
    if event.kind == "status_changed" and data.get("error") is None:
        data.pop("error", None)
    return " ".join(f"{escape(str(k))}={short(v)}" for k, v in data.items())


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
    for line in rest_lines(view):
        out.print(f"  {line}")


def rest_lines(view: RunView) -> list[str]:
    """What a resting run asks (each request and how to answer it) and its next timer."""
    lines = [line for r in view.pending_requests for line in request_lines(plain(r))]
    if view.wake_at is not None:
        lines.append(f"next timer: {when(view.wake_at)}")
    return lines
