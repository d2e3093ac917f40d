"""What the ``treadle`` command line prints: rich text and tables, or JSON.

Kept apart from the commands (the modules :mod:`treadle._cli._app` names) so that how a run,
a listing or a log line reads can change (and be tested) without touching
argument parsing, and so that the commands stay short. Everything here
takes plain data from the commands layer and writes it to :data:`out` or
:data:`err`; nothing here exits: the exit codes are the app's.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Column

from treadle._cli._answering import request_lines
from treadle._cli._consoles import Out, Shown
from treadle._cli._tables import print_table
from treadle._engine._result import RunStatus
from treadle._operations import _commands as commands
from treadle._operations._limit_waits import listed_run, wait_line, waiting_mark
from treadle._operations._plain import plain
from treadle._operations._shapes import history_json, iso_time, page_json, request_json, run_json

if TYPE_CHECKING:
    from collections.abc import Callable

    from treadle._engine._result import RunResult
    from treadle._operations._run_view import RunView
    from treadle._stores._store import CheckpointInfo, RunRecord

# soft_wrap: long lines (run ids, the command to answer a request) must stay copyable.
# Piped output is not cut to 80 columns: ids must survive to the next command.
_WIDTH = None if sys.stdout.isatty() else 240


out = Out(highlight=False, soft_wrap=True, width=_WIDTH)
err = Shown(stderr=True, highlight=False, soft_wrap=True, width=_WIDTH)


def when(epoch: float | None) -> str:
    """An epoch time as a person reads it: ISO 8601 in UTC to the second, or an empty string."""
    return iso_time(epoch, timespec="seconds") or ""


def print_result(
    result: RunResult, *, as_json: bool, requests: list[dict[str, Any]] | None = None
) -> None:
    """A run's outcome: status, outputs, and how to answer what it waits for.

    ``requests``: its pending requests described with their answer schemas
    (``_operations._requests.requests_of``), shown field by field; without
    them, each is shown by its type's name.
    """
    if as_json:
        data = _result_data(result)
        if requests:
            data["pending_requests"] = requests
        out.print_json(data=plain(data))
    else:
        style = "green" if result.status is RunStatus.COMPLETED else "yellow"
        out.print(f"run [bold]{result.run_id}[/bold]: [{style}]{result.status.value}[/{style}]")
        for value in result.outputs:
            out.print(f"  output: {escape(json.dumps(plain(value)))}")
        for line in (line for r in requests or () for line in request_lines(plain(r))):
            out.print(f"  {line}")
        for request in () if requests else result.pending_requests:
            payload = escape(json.dumps(plain(request.payload)))
            out.print(
                f"  waiting for {request.response_type} on request {request.request_id}: {payload}"
            )
            out.print(f"    answer: treadle respond {result.run_id} {request.request_id} '<json>'")
        if result.status is RunStatus.WAITING:
            out.print(f"  next timer: {when(result.wake_at)}; `treadle worker` wakes it")
        if result.status is RunStatus.PAUSED:
            out.print(f"  {_PAUSED_HINT.format(run=result.run_id)}")


def _result_data(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "status": result.status.value,
        "superstep": result.superstep,
        "outputs": result.outputs,
        "state": dict(result.state),
        "pending_requests": [
            {
                "request_id": r.request_id,
                "executor_id": r.executor_id,
                "payload": r.payload,
                "response_type": r.response_type,
            }
            for r in result.pending_requests
        ],
        "wake_at": result.wake_at,
    }


def print_delivered(run_id: str, *, as_json: bool) -> None:
    """That the run's inbox holds a delivery (an answer, a message) for a worker to apply."""
    if as_json:
        out.print_json(data={"run_id": run_id, "delivered": True})
    else:
        out.print(f"delivered to run {run_id}; a worker applies it when it next claims the run")


def print_started(run_id: str, workflow: str, *, as_json: bool, alone: int | None = None) -> None:
    """``treadle start``: the id of the run queued for the workers.

    ``alone``: how many of the store's newest runs were read, none of them
    another run of the workflow, so perhaps no worker serves its name (a
    typo waits for ever): a note on stderr says so, and says where it
    looked when that was not the whole store.
    """
    if as_json:
        out.print_json(data={"run_id": run_id, "workflow": workflow})
    else:
        out.print(run_id)
    if alone is not None:
        name = escape(repr(workflow))
        where = (
            "is in this store"
            if alone < commands.NEWEST_RUNS_READ
            else f"is among this store's newest {alone:,} runs"
        )
        err.print(
            f"[yellow]note:[/yellow] no other run of workflow {name} {where}: the run waits"
            " until a `treadle worker` serving that name takes it up (is the name right?"
            " `treadle runs` lists the workflows of the others)"
        )


def print_forked(view: RunView, run_id: str, checkpoint_id: str, *, as_json: bool) -> None:
    """``treadle fork``: the new run, and what moves it on from the status it was forked in."""
    new_id = view.run.run_id
    if as_json:
        data: dict[str, Any] = {"run_id": new_id, "parent_run_id": run_id}
        data |= {"checkpoint_id": checkpoint_id, "status": view.run.status}
        out.print_json(data=plain({**data, "pending_requests": view.pending_requests}))
        return
    status = view.run.status
    out.print(f"forked run [bold]{new_id}[/bold] ({status}) from checkpoint {checkpoint_id}")
    if view.pending_requests:  # resume would only ask again: answering moves it on
        for line in (line for r in view.pending_requests for line in request_lines(plain(r))):
            out.print(f"  {line}")
    elif status == RunStatus.WAITING.value:
        out.print(f"  next timer: {when(view.wake_at)}; `treadle worker` wakes it")
    elif status == RunStatus.AWAITING_INPUT.value:  # a session: it waits for its next message
        out.print(f"  send it its next message with: treadle send {new_id} '<json>'")
    elif status == RunStatus.PAUSED.value:
        out.print(f"  {_PAUSED_HINT.format(run=new_id)}")
    elif RunStatus(status).is_final:
        out.print(f"  it is {status} as forked: `treadle show {new_id}` shows its outputs")
    else:
        out.print(f"  continue it with: treadle resume {new_id}")


def print_cancelled(run_id: str) -> None:
    """``treadle cancel``: that the run is cancelled."""
    out.print(f"run {run_id} cancelled")


_PAUSED_HINT = "paused: `treadle unpause {run}` or `treadle resume {run}` lets it go on"


def print_paused(row: RunRecord, outcome: str) -> None:
    """``treadle pause``: that the run is paused, or which owner pauses it at its next barrier."""
    if outcome == "paused":
        out.print(f"run {row.run_id} paused at superstep {row.superstep}")
        return
    out.print(
        f"run {row.run_id}: pause requested; its owner {escape(row.owner or '?')} pauses it "
        f"at its next superstep boundary (treadle show {row.run_id} to watch)"
    )


def print_unpaused(row: RunRecord, *, was_paused: bool) -> None:
    """``treadle unpause``: that the run goes on, and who takes it up (or the pause withdrawn)."""
    if not was_paused:
        out.print(f"run {row.run_id}: pause withdrawn before it took effect; it goes on")
        return
    out.print(
        f"run {row.run_id} unpaused ({row.status}); a `treadle worker` takes it up, "
        f"or `treadle resume {row.run_id}` here"
    )


def print_graph(text: str) -> None:
    """``treadle graph``: the drawing as raw text, for piping into ``mmdc`` or ``dot``."""
    print(text)  # noqa: T201 - raw text: rich would wrap or style it


def print_runs(
    rows: list[RunRecord],
    next_cursor: str | None,
    waiting: dict[str, list[dict[str, Any]]],
    *,
    as_json: bool,
) -> None:
    """``treadle runs``: one line a run, and how to list the next page if there is one.

    ``waiting``: the runs' calls waiting for limits, by run
    (``_operations._limit_waits.waits_by_run``), marked after the status.
    With ``as_json``, what ``GET /api/runs`` answers: ``{"runs", "next_cursor"}``.
    """
    now = time.time()
    if as_json:
        shown = listed_run(waiting, lambda r: run_row(r, now))
        out.print_json(data=page_json(rows, next_cursor, shown=shown))
        return
    run = id_column("run", [row.run_id for row in rows])
    cells = []
    for row in rows:
        mark = waiting_mark(waiting.get(row.run_id, ()))
        cells.append(
            (
                row.run_id,
                f"{row.workflow} v{row.version}",
                _status_text(row, now) + (f" ({mark})" if mark else ""),
                row.outcome or "",
                str(row.superstep),
                _owner_text(row, now),
                when(row.updated_at),
            )
        )
    columns = (run, "workflow", "status", "outcome", "superstep", "owner", "updated")
    print_table(out, columns, cells)
    if next_cursor is not None:
        out.print(f"more: treadle runs --cursor {next_cursor} (with the same options)")


def id_column(header: str, ids: list[str]) -> Column:
    """A table's column of ids, kept whole when the terminal is narrow: the other columns give.

    An id is what a reader types next, and a UUID version 7 cut short shows
    only the time it was made, alike for every id of the same minute. One
    longer than a terminal's share folds onto a second line.
    """
    widest = max(map(len, ids), default=len(header))
    return Column(header, min_width=min(widest, _ID_WIDTH), overflow="fold")


_ID_WIDTH = 36
"""The most an id column claims of a narrow terminal (a 32-digit id and room)."""


def _status_text(row: RunRecord, now: float) -> str:
    """The status, marked ``(orphaned)``, ``(pause requested)`` and why the run is parked."""
    marks = []
    if commands.is_orphaned(row, now):
        marks.append("forked, not started" if commands.is_unstarted_fork(row) else "orphaned")
    if row.pause_requested is not None:
        marks.append("pause requested")
    if row.parked:
        marks.append(f"parked: {row.parked}")
    return f"{row.status} ({'; '.join(marks)})" if marks else row.status


def _owner_text(row: RunRecord, now: float) -> str:
    """Who holds the run's lease and until when; empty when nobody does."""
    if row.owner is None:
        return ""
    if row.lease_until is None:
        return row.owner
    if row.owned(now):
        return f"{row.owner} until {when(row.lease_until)}"
    return f"{row.owner} (lease ended {when(row.lease_until)})"


def run_row(row: RunRecord, now: float) -> dict[str, Any]:
    """A run as the API's ``<run>`` (times in ISO 8601), and whether it is orphaned."""
    return run_json(row) | {"orphaned": commands.is_orphaned(row, now)}


def print_run_view(view: RunView, *, as_json: bool) -> None:
    """``treadle show``: status, ownership, pending requests and timers, outputs, state."""
    now = time.time()
    data = {
        **run_row(view.run, now),
        "outputs": view.outputs,
        "state": view.state,
        "pending_requests": [request_json(r) for r in view.pending_requests],
        "next_timer": iso_time(view.wake_at),
        "read_from": "event log" if view.detail else "checkpoint",
        "conversations": view.conversations,
        "waiting_for": view.waiting_for,
    }
    if as_json:
        out.print_json(data=plain(data))
        return
    row = view.run
    shown = escape(row.run_id)
    status = escape(_status_text(row, now))
    workflow = escape(f"{row.workflow} v{row.version}")
    out.print(f"run [bold]{shown}[/bold] ({workflow}): {status}")
    if row.outcome is not None:
        summary = f": {row.outcome_summary}" if row.outcome_summary else ""
        out.print(f"  outcome: [bold]{escape(row.outcome)}[/bold]{escape(summary)}")
    out.print(f"  superstep {row.superstep}, checkpoint {row.checkpoint_id or 'none yet'}")
    if row.owner is not None:
        out.print(f"  owner: {escape(_owner_text(row, now))}")
    for line in _standing_lines(row, orphaned=bool(data["orphaned"]), shown=shown):
        out.print(f"  {line}")
    if row.error:
        out.print(f"  error: {escape(row.error)}")
    if view.detail:
        out.print(f"  [yellow]{escape(view.detail)}[/yellow]")
    for line in (line for r in view.pending_requests for line in request_lines(plain(r))):
        out.print(f"  {line}")
    for line in _waiting_lines(view):
        out.print(f"  {line}")
    width = max(shutil.get_terminal_size(_PIPED).columns - 6, 20)  # less the indent
    for line in value_lines("outputs", plain(view.outputs), width, "outputs"):
        out.print(f"  {escape(line)}")
    if not view.detail:  # the state needs the run's code to decode its checkpoint
        out.print("  state:" if view.state else "  state: {}")
        transcripts = {c["key"]: c["messages"] for c in plain(view.conversations)}
        for key, value in plain(view.state).items():
            if key in transcripts:
                lines = value_lines(key, transcripts[key], width, "messages", _entry_texts)
            else:
                lines = [_cut(f"{key}: {json.dumps(brief_state({key: value})[key])}", width)]
            out.print("\n".join(f"    {escape(line)}" for line in lines))


def _standing_lines(row: RunRecord, *, orphaned: bool, shown: str) -> list[str]:
    """What stops the run, or who moves it on: orphaned, a fork not started, parked, paused."""
    lines = []
    if orphaned and not row.parked and commands.is_unstarted_fork(row):
        lines.append(
            f"[yellow]forked[/yellow] from {escape(str(row.parent_run_id))}; nobody has taken "
            f"it up yet: treadle resume {shown} (or a running `treadle worker` does)"
        )
    elif orphaned and not row.parked:
        lines.append(
            f"[yellow]orphaned:[/yellow] nobody is advancing it (its process died, was detached "
            f"or stopped renewing its lease); take it over with: treadle resume {shown} "
            f"(or a running `treadle worker` does)"
        )
    if row.parked:
        lines.append(
            f"[yellow]parked:[/yellow] {escape(row.parked)}; `treadle resume {shown}` takes it up"
        )
    if row.status == RunStatus.PAUSED.value:
        lines.append(f"[yellow]{_PAUSED_HINT.format(run=shown)}[/yellow]")
    elif row.pause_requested is not None:
        lines.append("[yellow]pause requested:[/yellow] its owner pauses it at its next barrier")
    return lines


def _waiting_lines(view: RunView) -> list[str]:
    """What the run waits for besides requests: its next timer, its calls' places in line."""
    lines = [f"next timer: {when(view.wake_at)}"] if view.wake_at is not None else []
    return lines + [escape(wait_line(wait)) for wait in view.waiting_for]


def print_history(
    row: RunRecord, checkpoints: list[CheckpointInfo], forks: list[RunRecord], *, as_json: bool
) -> None:
    """``treadle history``: a run's checkpoints, where it was forked from, and its forks."""
    if as_json:  # what GET /api/runs/{id}/history answers
        now = time.time()
        out.print_json(
            data=plain(history_json(row, checkpoints, forks, shown=lambda r: run_row(r, now)))
        )
        return
    if row.parent_run_id:
        out.print(f"forked from run {row.parent_run_id} at checkpoint {row.parent_checkpoint_id}")
    checkpoint = id_column("checkpoint", [c.checkpoint_id for c in checkpoints])
    parent = Column("parent", overflow="fold")
    cells = [
        (
            c.checkpoint_id,
            str(c.superstep),
            c.status,
            when(c.created_at),
            c.parent_checkpoint_id or "",
        )
        for c in checkpoints
    ]
    print_table(out, (checkpoint, "superstep", "status", "created", parent), cells)
    for fork_row in forks:
        out.print(f"fork: {fork_row.run_id} (from checkpoint {fork_row.parent_checkpoint_id})")


_PIPED = (120, 24)
"""The width ``show`` trims to when its output is no terminal and COLUMNS is not set."""

_LAST_SHOWN = 8
"""How many of a run's outputs, or a conversation's messages, ``show`` prints (the last)."""


def _cut(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else f"{line[: width - 1]}…"


def value_lines(
    name: str,
    items: list[Any],
    width: int,
    noun: str,
    texts: Callable[[Any], list[str]] = lambda item: [json.dumps(item)],
) -> list[str]:
    """A list (outputs, a conversation's transcript) as ``show`` prints it: an item a line.

    ``NAME: N NOUN``, then the last :data:`_LAST_SHOWN` items, each cut to
    ``width``, after a line saying how many are left out. ``texts`` says an
    item (as JSON, unless told). ``--json`` gives every item whole.
    """
    if not items:
        return [f"{name}: []"]
    left_out = max(len(items) - _LAST_SHOWN, 0)
    lines = [f"{name}: {len(items)} {noun if len(items) > 1 else noun.removesuffix('s')}"]
    if left_out:
        lines.append(f"  ({left_out} earlier {noun} left out; --json shows them all)")
    for item in items[left_out:]:
        lines += [f"  {_cut(text, width - 2)}" for text in texts(item)]
    return lines


def _entry_texts(item: dict[str, Any]) -> list[str]:
    """A transcript entry: ``role: text``, then its tool calls and results in short."""
    texts = [f"{item['role']}: {item['text']}"] if item.get("text") else []
    texts += [f"{item['role']} calls {c['tool']}({c['args']})" for c in item["tool_calls"]]
    for result in item["tool_results"]:
        said = "asks to retry" if result.get("retry") else "returned"
        texts.append(f"tool {result['tool']} {said}: {result['content']}")
    return texts or [f"{item['role']}: (nothing)"]


_LONG_LIST = 10
"""A state list longer than this is shown by ``show`` as its length and last item."""


def brief_state(state: dict[str, Any]) -> dict[str, Any]:
    """State as ``treadle show`` prints it: a long list (a conversation) as its size and tail.

    ``--json`` gives it whole; a terminal gets what fits a glance.
    """
    shown: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, list) and len(value) > _LONG_LIST:
            shown[key] = f"<{len(value)} items, the last: {json.dumps(value[-1])[:200]}>"
        else:
            shown[key] = value
    return shown
