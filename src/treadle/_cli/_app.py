"""The ``treadle`` command line: its commands, their arguments and exit codes, nothing else.

Each command parses its arguments, calls the commands layer
(:mod:`treadle._operations._commands`) on the chosen store through
:mod:`treadle._cli._execute` (errors and Ctrl-C), and prints the result
with :mod:`treadle._cli._views` (rich, or JSON with ``--json``); the options
several commands share are :mod:`treadle._cli._flags`'. Exit codes:

* 0 — done (a run that completed, a listing);
* 1 — the run failed, stalled or was cancelled;
* 2 — bad input: unknown run or request, malformed, oversized or too
  deeply nested JSON, an import path that does not load, a refused or
  already given answer, a run another process owns (without ``--wait``), a
  run-id prefix several runs share, a ``delete`` refused or not confirmed;
  nothing was changed;
* 3 — the run rests (it awaits input or waits on a timer) or is paused;
* 130 — interrupted (Ctrl-C): ``run``, ``resume``, ``respond`` and ``send``
  *detach* from their run rather than cancel it. It stays as last committed,
  resumable by ``treadle resume`` or a ``treadle worker``; only ``treadle
  cancel`` cancels.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path  # noqa: TC003 - typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from treadle._cli._event_views import print_settled
from treadle._cli._execute import execute, execute_sync, refuse
from treadle._cli._flags import (
    AppOption,
    FollowOption,
    JsonOption,
    RunIdArgument,
    StoreOption,
    WaitOption,
    with_run_flags,
)
from treadle._cli._follow import continue_run, follow_new
from treadle._cli._graphs import choose_format, draw
from treadle._cli._help import TreadleGroup
from treadle._cli._live import stream_run
from treadle._cli._serve import WorkerSettings, serve
from treadle._cli._serve_http import serve as serve_http
from treadle._cli._starting import prepare_run, refuse_taken_id
from treadle._cli._stopping import guard_output
from treadle._cli._views import (
    log_to_stderr,
    out,
    print_delivered,
    print_forked,
    print_graph,
    print_history,
    print_result,
    print_run_view,
    print_runs,
    print_started,
)
from treadle._engine._result import RunStatus
from treadle._exceptions import CommandError
from treadle._operations import _commands as commands
from treadle._operations import _shapes as shapes
from treadle._operations._inputs import load_workflow
from treadle._operations._requests import requests_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._cli._flags import RunFlags
    from treadle._engine._result import RunResult
    from treadle._stores._store import Store

EXIT_FOR_STATUS = {
    RunStatus.COMPLETED: 0,
    RunStatus.AWAITING_INPUT: 3,
    RunStatus.WAITING: 3,
    RunStatus.FAILED: 1,
    RunStatus.STALLED: 1,
    RunStatus.CANCELLED: 1,
    RunStatus.PAUSED: 3,
    RunStatus.RUNNING: 0,
    RunStatus.PENDING: 0,
}
"""The exit code for a run's status: a run's status *is* a command's outcome."""

app = typer.Typer(
    name="treadle",
    help="Run, inspect and steer durable treadle workflows.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    cls=TreadleGroup,
    rich_markup_mode=None,  # click's plain help: whole at 80 columns (see _help.py)
)


def _print_version(asked: bool) -> None:
    if asked:
        out.print(f"treadle {version('treadle')}", highlight=False)
        raise typer.Exit


@app.callback()
def main_options(
    version_: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print treadle's version and exit.",
        ),
    ] = False,
) -> None:
    """Run, inspect and steer durable treadle workflows."""


SuperstepOption = Annotated[
    int | None,
    typer.Option("--superstep", help="The checkpoint of this superstep (see treadle history)."),
]


@app.command()
@with_run_flags
def run(
    workflow: Annotated[str, typer.Argument(help="pkg.module:workflow")],
    input_: Annotated[
        str | None, typer.Option("--input", "-i", help="The input as JSON, or @file.json.")
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Choose the run id.")] = None,
    *,
    flags: RunFlags,
) -> None:
    """Start a run and watch it live: supersteps, progress, outputs."""
    options = flags.run_options()
    loaded, value = execute_sync(lambda: prepare_run(workflow, input_))

    async def work(chosen: Store) -> tuple[RunResult, list[dict[str, Any]]]:
        streamed = stream_run(
            loaded, value, chosen, run_id, out, quiet=flags.as_json, options=options
        )
        result = await refuse_taken_id(chosen, streamed, run_id)
        return result, await requests_of(chosen, result, loaded=loaded)

    _report(*execute(flags.store, work, drives=run_id or True, creates=True), flags)


@app.command()
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
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first, a page at a time, each with its outcome if it has one.

    With --json: {"runs": [...], "next_cursor": ...}, as GET /api/runs.
    """
    if status is not None and status not in {s.value for s in RunStatus}:
        valid = ", ".join(s.value for s in RunStatus)
        refuse(f"unknown status {status!r}; use one of {valid}")
    try:
        before = None if cursor is None else shapes.decode_cursor(cursor)
    except CommandError as error:
        refuse(escape(str(error)))
    rows, next_cursor = execute(
        store,
        lambda s: shapes.runs_page(
            s, status=status, workflow=workflow, limit=limit, before=before, outcome=outcome
        ),
    )
    print_runs(rows, next_cursor, as_json=as_json)


@app.command()
def show(
    run_id: RunIdArgument,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run: status, pending requests and timers, outputs, state."""
    view = execute(store, lambda s: commands.show_run(s, run_id, app_))
    print_run_view(view, as_json=as_json)


@app.command()
def history(
    run_id: RunIdArgument,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A run's checkpoints (time travel) and its lineage."""
    row, checkpoints, forks = execute(store, lambda s: commands.history(s, run_id))
    print_history(row, checkpoints, forks, as_json=as_json)


@app.command()
@with_run_flags
def resume(
    run_id: RunIdArgument,
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", help="Resume from here (its id, or a prefix of it)."),
    ] = None,
    superstep: SuperstepOption = None,
    app_: AppOption = None,
    wait: WaitOption = False,
    *,
    flags: RunFlags,
) -> None:
    """Continue a run from its latest checkpoint, or from --checkpoint / --superstep."""
    options = flags.run_options(continuing=True)
    _continue(
        run_id,
        flags,
        app_,
        lambda s: commands.resume(
            s, run_id, checkpoint, app_, wait=wait, options=options, superstep=superstep
        ),
    )


@app.command()
@with_run_flags
def respond(
    run_id: RunIdArgument,
    request_id: Annotated[str, typer.Argument(help="The request id (see `treadle show`).")],
    value: Annotated[str, typer.Argument(help="The answer as JSON, or @file.json.")],
    app_: AppOption = None,
    wait: WaitOption = False,
    *,
    flags: RunFlags,
) -> None:
    """Answer a pending request and continue the run (on PostgreSQL: a worker does)."""
    options = flags.run_options(continuing=True) if flags.sets_run_options else None
    _continue(
        run_id,
        flags,
        app_,
        lambda s: commands.respond(s, run_id, request_id, value, app_, wait=wait, options=options),
    )


@app.command()
@with_run_flags
def send(
    run_id: RunIdArgument,
    message: Annotated[str, typer.Argument(help="The message as JSON, or @file.json.")],
    app_: AppOption = None,
    wait: WaitOption = False,
    *,
    flags: RunFlags,
) -> None:
    """Send the next message of a session and continue the run (on PostgreSQL: a worker does)."""
    options = flags.run_options(continuing=True) if flags.sets_run_options else None
    _continue(
        run_id,
        flags,
        app_,
        lambda s: commands.send(s, run_id, message, app_, wait=wait, options=options),
    )


def _continue(
    run_id: str,
    flags: RunFlags,
    app_: str | None,
    work: Callable[[Store], Awaitable[RunResult | None]],
) -> None:
    """Continue a stored run through ``work``; Ctrl-C detaches from it.

    ``work`` returns the run's new state, or ``None`` when the run's inbox
    holds what it delivered for a worker to apply (on PostgreSQL).
    """
    done = execute(flags.store, lambda s: continue_run(s, run_id, work, flags, app_), drives=run_id)
    if done.result is not None:
        _report(done.result, done.requests, flags)
    if done.view is not None:  # --follow, after a worker applied what was delivered
        _settled(done.view, as_json=flags.as_json)
    print_delivered(run_id, as_json=flags.as_json)


def _report(result: RunResult, requests: list[dict[str, Any]], flags: RunFlags) -> NoReturn:
    """Print a run's outcome (with how to answer what it asks) and exit with its status's code."""
    print_result(result, as_json=flags.as_json, requests=requests)
    raise typer.Exit(EXIT_FOR_STATUS[result.status])


def _settled(view: commands.RunView, *, as_json: bool) -> NoReturn:
    """Print where a followed run settled and exit with its status's code."""
    print_settled(view, as_json=as_json)
    raise typer.Exit(EXIT_FOR_STATUS[RunStatus(view.run.status)])


@app.command()
def start(
    workflow: Annotated[str, typer.Argument(help="The workflow's name, as workers serve it.")],
    input_: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="The input as JSON, or @file.json (left out: null).",
            show_default=False,
        ),
    ] = "null",
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Choose the run id (idempotent).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    follow: FollowOption = False,
) -> None:
    """Queue a run for `treadle worker`s on PostgreSQL; print its id (--follow: follow it too)."""
    started = execute(store, lambda s: commands.start(s, workflow, input_, run_id), creates=True)
    if not (follow and as_json):
        print_started(started, workflow, as_json=as_json)
    if follow:
        view = execute(store, lambda s: follow_new(s, started, quiet=as_json), follows=True)
        _settled(view, as_json=as_json)


@app.command()
def fork(
    run_id: Annotated[str, typer.Argument(help="The run to branch from.")],
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", help="The checkpoint to branch at (its id, or a prefix)."),
    ] = None,
    superstep: SuperstepOption = None,
    patch: Annotated[
        str | None, typer.Option("--patch", help="State changes as a JSON object.")
    ] = None,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Branch a new run from a checkpoint; say how to move it on (resume, or answer)."""
    view, at, parent = execute(
        store, lambda s: _forked(s, run_id, checkpoint, patch, app_, superstep)
    )
    print_forked(view, parent, at, as_json=as_json)


async def _forked(
    store: Store,
    run_id: str,
    checkpoint: str | None,
    patch: str | None,
    app_: str | None,
    superstep: int | None,
) -> tuple[commands.RunView, str, str]:
    """Fork; the new run's view, and at which checkpoint (prefix resolved) of which run."""
    run_id = (await commands.get_run(store, run_id)).run_id
    at = await commands.resolve_checkpoint(store, run_id, checkpoint, superstep)
    new_id = await commands.fork(store, run_id, at, patch, app_)
    assert at is not None  # noqa: S101 - fork refuses neither
    return await commands.show_run(store, new_id, app_), at, run_id


@app.command()
def graph(
    workflow: Annotated[str, typer.Argument(help="pkg.module:workflow")],
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="mermaid, dot, or png / svg (drawn by Graphviz's dot)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write it to this file.")
    ] = None,
) -> None:
    """Print a workflow's graph for Mermaid or Graphviz, or draw it (-o graph.png)."""
    chosen = execute_sync(lambda: choose_format(fmt, output))
    loaded = execute_sync(lambda: load_workflow(workflow))
    drawn = execute_sync(lambda: draw(loaded, chosen, output))
    if drawn is not None:
        print_graph(drawn)
    else:
        out.print(f"wrote {escape(str(output))} ({chosen})")


@app.command()
def worker(
    apps: Annotated[
        list[str],
        typer.Option(
            "--app",
            help="pkg.module or path/app.py (every workflow in it), or pkg.module:workflow.",
        ),
    ],
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.01)] = 1.0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 8,
    lease: Annotated[
        float | None,
        typer.Option(
            "--lease",
            min=0.01,
            help="Seconds a lease on a run lasts unrenewed (default: TREADLE_LEASE, else 30).",
        ),
    ] = None,
    max_recoveries: Annotated[int, typer.Option("--max-recoveries", min=0)] = 3,
    worker_id: Annotated[str | None, typer.Option("--worker-id")] = None,
    store: StoreOption = None,
) -> None:
    """Serve runs until SIGTERM or Ctrl-C.

    On PostgreSQL: claim runs with leases alongside other workers, run them,
    and on SIGTERM finish each run's current superstep and release it. On
    SQLite: wake runs whose timers fall due, apply deliveries nobody applied
    and take over orphaned runs (one such worker per file); on SIGTERM or
    Ctrl-C, the runs it was advancing are left as last committed (not
    cancelled). Log lines go to stderr, each once, with an ISO time.
    """
    from treadle._scaleout._apps import load_app  # noqa: PLC0415 - only for workers

    workflows = [w for spec in apps for w in execute_sync(lambda spec=spec: load_app(spec))]  # type: ignore[misc]
    settings = WorkerSettings(
        poll_interval=poll_interval,
        concurrency=concurrency,
        lease=lease,
        max_recoveries=max_recoveries,
        worker_id=worker_id,
    )
    log_to_stderr()
    execute(store, lambda chosen: serve(chosen, workflows, settings), lease=lease, creates=True)


app.command("serve")(serve_http)  # the HTTP API and the page: treadle._server


def main() -> None:
    """Entry point of the ``treadle`` console script."""
    guard_output()
    app()


# The commands of these modules add themselves to ``app`` (kept apart to keep this one short).
from treadle._cli import (  # noqa: E402, F401
    _control,
    _definitions,
    _housekeeping,
    _inspect,
    _migrate,
    _tokens,
    _upgrade,
    _webhooks,
)
