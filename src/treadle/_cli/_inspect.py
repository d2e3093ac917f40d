"""Looking at runs from anywhere: runs, show, history, requests, watch, logs, export.

``treadle runs`` lists a store's runs a page at a time, ``show`` one run as
it stands, ``history`` its checkpoints and lineage.

``treadle requests`` is the approver's inbox: every request pending in a run
that awaits input (or waits on a timer while a request is open), newest run
first, each with the fields its answer takes and a ``treadle respond`` line
that fits (:mod:`treadle._cli._answering`); a run whose workflow does not
load here is named on stderr rather than failing the listing.

The others read a run's durable event log, so they work for a run started
anywhere (another process, a worker, the server) and need none of its code:
``watch`` follows it live until it ends or rests (Ctrl-C, SIGTERM, SIGHUP
or a closed output stops watching and leaves the run alone: exit 130, 143,
129, 141); ``logs`` prints it whole, failures with their full tracebacks;
``export`` writes the run, its checkpoints and its events as JSON lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path  # noqa: TC003 - typer reads the annotation
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.markup import escape

from treadle._cli._answering import request_lines
from treadle._cli._event_views import log_lines, print_settled, rest_lines
from treadle._cli._execute import execute, refuse
from treadle._cli._exits import exit_code_of
from treadle._cli._flags import (  # noqa: TC001 - typer reads them
    AppOption,
    JsonOption,
    RunIdArgument,
    StoreOption,
    WhereOption,
)
from treadle._cli._follow import under_way
from treadle._cli._follow import watch as watch_events
from treadle._cli._help import command_set
from treadle._cli._live import LiveView
from treadle._cli._stopping import CLOSED_OUTPUT, Stop
from treadle._cli._views import err, out, print_history, print_run_view, print_runs
from treadle._engine._result import RunStatus
from treadle._exceptions import CommandError, TreadleError
from treadle._operations import _commands as commands
from treadle._operations import _shapes as shapes
from treadle._operations._audit import action_sentence
from treadle._operations._limit_waits import waits_by_run
from treadle._operations._plain import plain
from treadle._operations._requests import Pending, scan_pending
from treadle._operations._run_view import RunView, show_run
from treadle._operations._shapes import (
    checkpoint_json,
    checkpoint_kinds,
    event_json,
    request_json,
    run_json,
)
from treadle._values._actors import Actor
from treadle._workflow._following import RESTING_STATUSES, logged_after

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._stores._store import LoggedEvent, RunRecord, Store
    from treadle._workflow._workflow import Workflow

cli = command_set()


AfterOption = Annotated[
    int, typer.Option("--after", min=0, help="Only events after this one (its seq).")
]


@cli.command()
def runs(
    status: Annotated[str | None, typer.Option("--status", help="e.g. awaiting_input")] = None,
    workflow: Annotated[str | None, typer.Option("--workflow", help="A workflow name.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", help="Go on where a listing left off (its next_cursor)."),
    ] = None,
    outcome: Annotated[
        str | None, typer.Option("--outcome", help="Only runs that ended so, e.g. rejected.")
    ] = None,
    where: WhereOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first, a page at a time, each with its outcome if it has one.

    --where filters by status, outcome, workflow, times and the workflow's
    search fields (docs/search.md), e.g. 'fields.customer == "42"'.
    With --json: {"runs": [...], "next_cursor": ...}, as GET /api/runs.
    """
    if status is not None and status not in {s.value for s in RunStatus}:
        valid = ", ".join(s.value for s in RunStatus)
        refuse(f"unknown status {status!r}; use one of {valid}")
    try:
        before = None if cursor is None else shapes.decode_cursor(cursor)
    except CommandError as error:
        refuse(escape(str(error)))

    async def listing(
        s: Store,
    ) -> tuple[list[RunRecord], str | None, dict[str, list[dict[str, Any]]]]:
        rows, next_cursor = await shapes.runs_page(
            s,
            status=status,
            workflow=workflow,
            limit=limit,
            before=before,
            outcome=outcome,
            where=where,
        )
        return rows, next_cursor, await waits_by_run(s, rows)

    rows, next_cursor, waiting = execute(store, listing)
    print_runs(rows, next_cursor, waiting, as_json=as_json)


@cli.command()
def show(
    run_id: RunIdArgument,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run: status, pending requests and timers, outputs, state."""
    view = execute(store, lambda s: show_run(s, run_id, app_))
    print_run_view(view, as_json=as_json)


@cli.command()
def history(
    run_id: RunIdArgument,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A run's checkpoints (time travel) and its lineage."""
    row, checkpoints, forks = execute(store, lambda s: commands.history(s, run_id))
    print_history(row, checkpoints, forks, as_json=as_json)


@cli.command()
def requests(
    workflow: Annotated[str | None, typer.Option("--workflow", help="A workflow name.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1)] = None,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    every: Annotated[
        bool,
        typer.Option("--all", help="Also the requests others must answer (named, or four eyes)."),
    ] = False,
) -> None:
    """Your inbox: pending requests you may answer, who asks what, and how to answer each.

    You are cli:USER@HOST; a request naming its approvers, or refusing the
    run's starter (four eyes), is someone else's: --all lists those too.
    """
    actor = None if every else Actor.cli()
    found = execute(
        store, lambda s: scan_pending(s, workflow=workflow, limit=limit, app=app_, actor=actor)
    )
    print_requests(found, as_json=as_json)
    if found.others:
        err.print(f"{found.others} more wait on others (treadle requests --all lists them)")


def print_requests(found: Pending, *, as_json: bool) -> None:
    """Each pending request with its answer's fields; runs that could not be read on stderr."""
    for line in found.unread:
        err.print(f"[yellow]could not read run[/yellow] {escape(line)}")
    if as_json:
        requests = [request_json(r) for r in found.requests]  # as GET /api/requests, and unread
        out.print_json(data=plain({"requests": requests, "unread": found.unread}))
        return
    if not found.requests:
        out.print("no pending requests")
        return
    shown_run = None
    for request in found.requests:
        if request["run_id"] != shown_run:
            shown_run = request["run_id"]
            out.print(f"run [bold]{escape(shown_run)}[/bold]:")
        for line in request_lines(plain(request)):
            out.print(f"  {line}")


@cli.command()
def watch(
    run_id: RunIdArgument,
    after: AfterOption = 0,
    until_end: Annotated[
        bool,
        typer.Option(
            "--until-end",
            help="Follow on through its rests (awaiting input, waiting, paused) until it ends.",
        ),
    ] = False,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Follow a run live, wherever it runs, until it ends or rests (Ctrl-C stops watching only).

    Draws its supersteps, executors, outputs and failures from its event
    log, and the superstep under way (which executors, for how long, their
    progress and an agent's reply as it streams, wherever the run runs)
    while its events are not yet committed; with --until-end, on through each
    rest, saying what it asks, until it ends (completed, failed, cancelled,
    stalled). Ends with where it stands and what it asks. Exit code: the run's
    (0 completed, 1 failed or cancelled, 3 resting or paused); 130 when
    Ctrl-C stopped watching (143 SIGTERM, 129 SIGHUP, 141 a closed
    output), which leaves the run as it was.
    With --json: its events as JSON lines, live ones (token deltas,
    progress before its superstep commits) with "seq": null.
    """

    async def work(s: Store) -> tuple[str, RunView | Stop]:
        full = (await commands.get_run(s, run_id)).run_id
        workflow = await _code_of(s, full, app_)
        with LiveView(out, workflow, quiet=as_json) as drawer:
            shown = _print_json_line if as_json else drawer.draw
            idle = None if as_json else _watching(s, full, app_, drawer, until_end=until_end)
            stopped = await watch_events(
                s, full, shown, after=after, until_end=until_end, idle=idle
            )
            if stopped is not None:
                return full, stopped
        return full, await show_run(s, full, app_)

    full, view = execute(store, work)
    if isinstance(view, Stop):
        if view is not CLOSED_OUTPUT:  # a reader that went away wants no more
            err.print(
                f"stopped watching run {escape(full)}; the run was not touched "
                f"(treadle watch {escape(full)} to watch it again)"
            )
        raise typer.Exit(view.exit_code)
    if not as_json:
        print_settled(view, as_json=False)
    raise typer.Exit(exit_code_of(view))


async def _code_of(store: Store, run_id: str, app: str | None) -> Workflow | None:
    """The run's workflow when its code loads here (``None``: the log alone is drawn)."""
    try:
        return await commands.workflow_of(store, run_id, app)
    except TreadleError:
        return None


def _watching(
    store: Store, run_id: str, app: str | None, drawer: LiveView, *, until_end: bool
) -> Callable[[RunRecord], Awaitable[None]]:
    """What ``watch`` says while the log is silent: the superstep under way, and each rest.

    At each rest a run followed ``--until-end`` comes to, what it asks and
    how to answer it, once: so the person watching knows what moves it on.
    """
    running = under_way(store, run_id, drawer, drawer.workflow)
    told: set[tuple[int, str]] = set()

    async def idle(run: RunRecord) -> None:
        await running(run)
        rest = (run.superstep, run.status)
        if until_end and run.status in RESTING_STATUSES and rest not in told:
            told.add(rest)
            for line in rest_lines(await show_run(store, run_id, app)):
                out.print(f"  {line}")

    return idle


@cli.command()
def logs(
    run_id: RunIdArgument,
    after: AfterOption = 0,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A run's event log: every event, numbered; each failure with its full traceback.

    With --json: one JSON object a line (seq, run_id, superstep, type,
    executor_id, at, data), as GET /api/runs/RUN/events sends them.
    """

    async def work(s: Store) -> int:
        row = await commands.get_run(s, run_id)
        if not as_json:
            out.print(
                f"run [bold]{escape(row.run_id)}[/bold] ({escape(row.workflow)}): {row.status}"
            )
        count = 0
        async for event in logged_after(s, row.run_id, after):
            count += 1
            if as_json:
                _print_json_line(event)
            else:
                for line in log_lines(event):
                    out.print(line)
        return count

    if execute(store, work) == 0 and not as_json:
        out.print("  (no events logged)")


@cli.command()
def export(
    run_id: RunIdArgument,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
    ] = None,
    store: StoreOption = None,
) -> None:
    """A run as JSON lines: its row, each checkpoint's info, each event.

    Each line is an object whose "record" says which: "run" (the run's
    fields), "checkpoint" (checkpoint_id, superstep, status, created_at,
    parent_checkpoint_id, kind, ...) or "event" (as treadle logs --json);
    times in ISO 8601 with their offset.
    """
    if output is not None and output.is_dir():
        refuse(f"{escape(str(output))} is a directory; give a file to write")

    async def work(s: Store) -> tuple[str, int]:
        row = await commands.get_run(s, run_id)
        checkpoints = await s.list_checkpoints(row.run_id)
        target = sys.stdout if output is None else output.open("w", encoding="utf-8")
        try:
            _write_line(target, {"record": "run", **run_json(row)})
            for info, kind in zip(checkpoints, checkpoint_kinds(row, checkpoints), strict=True):
                _write_line(target, {"record": "checkpoint", **checkpoint_json(info, kind)})
            count = 0
            async for event in logged_after(s, row.run_id, 0):
                _write_line(target, {"record": "event", **_event_line(event)})
                count += 1
        finally:
            if output is not None:
                target.close()
        return row.run_id, 1 + len(checkpoints) + count

    full, lines = execute(store, work)
    if output is not None:
        err.print(f"exported run {escape(full)} to {escape(str(output))}: {lines} lines")


def _print_json_line(event: LoggedEvent) -> None:
    _write_line(sys.stdout, _event_line(event))
    sys.stdout.flush()


def _event_line(event: LoggedEvent) -> dict[str, Any]:
    """An event as ``logs --json`` and ``export`` write it: an action with its ``said`` sentence."""
    said = action_sentence(event.kind, event.data, event.at)
    line = event_json(event)
    if not event.seq:  # a live event (watch): not in the log, nothing to resume from
        line["seq"] = None
    return line if said is None else {**line, "said": said}


def _write_line(target: TextIO, record: dict[str, Any]) -> None:
    target.write(json.dumps(record, default=repr) + "\n")
