"""The ``treadle`` command line: its commands and their arguments, nothing else.

Each command parses its arguments, calls the commands layer
(:mod:`treadle._cli._commands`) on the chosen store through
:mod:`treadle._cli._execute` (errors and Ctrl-C), and prints the result
with :mod:`treadle._cli._views` (rich, or JSON with ``--json``). Exit codes:

* 0 — done (a run that completed, a listing);
* 1 — the run failed, stalled or was cancelled;
* 2 — bad input: unknown run or request, malformed, oversized or too
  deeply nested JSON, an import path that does not load, a refused or
  already given answer, a run another process owns (without ``--wait``);
  nothing was changed;
* 3 — the run rests: it awaits input or waits on a timer;
* 130 — interrupted (Ctrl-C): ``run``, ``resume``, ``respond`` and ``send``
  *detach* from their run rather than cancel it. It stays as last committed,
  resumable by ``treadle resume`` or a ``treadle worker``; only ``treadle
  cancel`` cancels.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from treadle._checkpoints._ownership import detach_all
from treadle._cli import _commands as commands
from treadle._cli._execute import execute, execute_sync
from treadle._cli._live import stream_run
from treadle._cli._views import (
    err,
    log_to_stderr,
    out,
    print_history,
    print_run_view,
    print_runs,
    report,
    report_delivery,
)
from treadle._engine._result import RunStatus

if TYPE_CHECKING:
    from treadle._engine._result import RunResult
    from treadle._stores._store import Store

app = typer.Typer(
    name="treadle",
    help="Run, inspect and steer durable treadle workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="TREADLE_STORE",
        help="A SQLite file (default: treadle.sqlite here) or a postgresql:// URL.",
    ),
]
AppOption = Annotated[
    str | None,
    typer.Option("--app", help="pkg.module:workflow, when the run does not record it."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
WaitOption = Annotated[
    bool,
    typer.Option("--wait", help="If another process owns the run, wait for it rather than refuse."),
]


@app.command()
def run(
    workflow: Annotated[str, typer.Argument(help="pkg.module:workflow")],
    input_: Annotated[
        str, typer.Option("--input", "-i", help="The input as JSON, or @file.json.")
    ] = "null",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Choose the run id.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a run and watch it live: supersteps, progress, outputs."""
    loaded, value = execute_sync(lambda: commands.prepare_run(workflow, input_))

    async def work(chosen: Store) -> RunResult:
        return await stream_run(loaded, value, chosen, run_id, out, quiet=as_json)

    report(execute(store, work, drives=run_id or True), as_json=as_json)


@app.command()
def runs(
    status: Annotated[str | None, typer.Option("--status", help="e.g. awaiting_input")] = None,
    workflow: Annotated[str | None, typer.Option("--workflow", help="A workflow name.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first."""
    if status is not None and status not in {s.value for s in RunStatus}:
        valid = ", ".join(s.value for s in RunStatus)
        err.print(f"[red]error:[/red] unknown status {status!r}; use one of {valid}")
        raise typer.Exit(2)
    rows = execute(store, lambda s: s.list_runs(status=status, workflow=workflow, limit=limit))
    print_runs(rows, as_json=as_json)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run: status, pending requests and timers, outputs, state."""
    view = execute(store, lambda s: commands.show_run(s, run_id, app_))
    print_run_view(view, as_json=as_json)


@app.command()
def history(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A run's checkpoints (time travel) and its lineage."""
    row, checkpoints, forks = execute(store, lambda s: commands.history(s, run_id))
    print_history(row, checkpoints, forks, as_json=as_json)


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    checkpoint: Annotated[
        str | None, typer.Option("--checkpoint", help="Resume from here.")
    ] = None,
    app_: AppOption = None,
    wait: WaitOption = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a run from its latest checkpoint, or from --checkpoint."""
    result = execute(
        store,
        lambda s: commands.resume(s, run_id, checkpoint, app_, wait=wait),
        drives=run_id,
    )
    report(result, as_json=as_json)


@app.command()
def respond(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    request_id: Annotated[str, typer.Argument(help="The request id (see `treadle show`).")],
    value: Annotated[str, typer.Argument(help="The answer as JSON, or @file.json.")],
    app_: AppOption = None,
    wait: WaitOption = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a pending request and continue the run (on PostgreSQL: a worker does)."""
    result = execute(
        store,
        lambda s: commands.respond(s, run_id, request_id, value, app_, wait=wait),
        drives=run_id,
    )
    report_delivery(run_id, result, as_json=as_json)


@app.command()
def send(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    message: Annotated[str, typer.Argument(help="The message as JSON, or @file.json.")],
    app_: AppOption = None,
    wait: WaitOption = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send the next message of a session and continue the run (on PostgreSQL: a worker does)."""
    result = execute(
        store, lambda s: commands.send(s, run_id, message, app_, wait=wait), drives=run_id
    )
    report_delivery(run_id, result, as_json=as_json)


@app.command()
def start(
    workflow: Annotated[str, typer.Argument(help="The workflow's name, as workers serve it.")],
    input_: Annotated[
        str, typer.Option("--input", "-i", help="The input as JSON, or @file.json.")
    ] = "null",
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Choose the run id (idempotent).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue a run for `treadle worker`s on PostgreSQL; print its id."""
    started = execute(store, lambda s: commands.start(s, workflow, input_, run_id))
    if as_json:
        out.print_json(data={"run_id": started, "workflow": workflow})
    else:
        out.print(started)


@app.command()
def fork(
    run_id: Annotated[str, typer.Argument(help="The run to branch from.")],
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="The checkpoint to branch at.")],
    patch: Annotated[
        str | None, typer.Option("--patch", help="State changes as a JSON object.")
    ] = None,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Branch a new run from a checkpoint (continue it with `treadle resume`)."""
    new_id = execute(store, lambda s: commands.fork(s, run_id, checkpoint, patch, app_))
    if as_json:
        out.print_json(
            data={"run_id": new_id, "parent_run_id": run_id, "checkpoint_id": checkpoint}
        )
    else:
        out.print(f"forked run [bold]{new_id}[/bold]; continue it with: treadle resume {new_id}")


@app.command()
def cancel(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    store: StoreOption = None,
) -> None:
    """Cancel a run wherever it is; its last checkpoint stays intact.

    A process advancing it right now commits nothing more. (Ctrl-C on
    ``run``, ``resume``, ``respond`` or ``send`` only detaches.)
    """
    execute(store, lambda s: commands.cancel(s, run_id))
    out.print(f"run {run_id} cancelled")


@app.command()
def graph(
    workflow: Annotated[str, typer.Argument(help="pkg.module:workflow")],
    fmt: Annotated[str, typer.Option("--format", help="mermaid or dot")] = "mermaid",
) -> None:
    """Print a workflow's graph for Mermaid or Graphviz."""
    loaded = execute_sync(lambda: commands.load_workflow(workflow))
    if fmt not in ("mermaid", "dot"):
        err.print(f"[red]error:[/red] unknown format {fmt!r}; use mermaid or dot")
        raise typer.Exit(2)
    render = getattr(loaded, "to_mermaid" if fmt == "mermaid" else "to_dot", None)
    if render is None:
        err.print("[red]error:[/red] this version of treadle cannot draw graphs yet")
        raise typer.Exit(2)
    print(render())  # noqa: T201 - raw text for piping into mmdc or dot


@app.command()
def worker(
    apps: Annotated[
        list[str],
        typer.Option("--app", help="pkg.module (every workflow in it) or pkg.module:workflow."),
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
    from treadle._scaleout._apps import load_app  # noqa: PLC0415
    from treadle._scaleout._worker import Worker  # noqa: PLC0415
    from treadle._stores._sqlite import SqliteStore  # noqa: PLC0415 - only for workers
    from treadle._workflow._service import Runtime  # noqa: PLC0415

    workflows = [w for spec in apps for w in execute_sync(lambda spec=spec: load_app(spec))]  # type: ignore[misc]
    log_to_stderr()
    logger = logging.getLogger("treadle.worker")

    async def work(chosen: Store) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        names = ", ".join(w.name for w in workflows)
        if isinstance(chosen, SqliteStore):  # embedded: the timer service of one file
            logger.info("worker serving %s", names)
            async with Runtime(chosen, workflows, poll_interval=poll_interval):
                await stop.wait()
                # Stopping must not cancel the runs it was advancing: they stay resumable.
                left = detach_all("the worker stopped: the run stays as last committed")
            for run_id in left:
                logger.info(
                    "left run %s as last committed; `treadle resume %s` or a worker takes it up",
                    run_id,
                    run_id,
                )
            logger.info("worker stopped")
            return
        serving = Worker(  # it logs its own start and stop
            chosen,  # type: ignore[arg-type]
            workflows,
            worker_id=worker_id,
            concurrency=concurrency,
            lease=lease if lease is not None else commands.lease_from_environment(),
            poll_interval=poll_interval,
            max_recoveries=max_recoveries,
        )
        async with asyncio.TaskGroup() as group:
            group.create_task(serving.serve())
            await stop.wait()
            serving.stop()

    execute(store, work, lease=lease)


def main() -> None:
    """Entry point of the ``treadle`` console script."""
    app()
