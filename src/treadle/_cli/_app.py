"""The ``treadle`` command line: argument parsing and printing, nothing else.

Each command parses its arguments, calls the commands layer
(:mod:`treadle._cli._commands`) on the chosen store, and prints the result
with rich (or as JSON with ``--json``). Exit codes:

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
import contextlib
import json
import logging
import signal
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from treadle._cli import _commands as commands
from treadle._cli._live import stream_run
from treadle._durable._ownership import detach_all
from treadle._exceptions import RunCancelledError, TreadleError, WorkflowRunError
from treadle._runtime._result import RunStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._durable._store import RunRecord, Store
    from treadle._runtime._result import RunResult

T = TypeVar("T")

app = typer.Typer(
    name="treadle",
    help="Run, inspect and steer durable treadle workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# soft_wrap: long lines (run ids, the command to answer a request) must stay copyable.
# Piped output is not cut to 80 columns: ids must survive to the next command.
_WIDTH = None if sys.stdout.isatty() else 240
out = Console(highlight=False, soft_wrap=True, width=_WIDTH)
err = Console(stderr=True, highlight=False, soft_wrap=True, width=_WIDTH)

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

EXIT_INTERRUPTED = 130
"""Ctrl-C: the command detached from its run (128 + SIGINT, as shells report it)."""

EXIT_FOR_STATUS = {
    RunStatus.COMPLETED: 0,
    RunStatus.AWAITING_INPUT: 3,
    RunStatus.WAITING: 3,
    RunStatus.FAILED: 1,
    RunStatus.STALLED: 1,
    RunStatus.CANCELLED: 1,
    RunStatus.RUNNING: 0,
    RunStatus.PENDING: 0,
}


def plain(value: Any) -> Any:
    """A value as JSON-ready data (dataclasses, models, datetimes included)."""
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    try:
        return to_jsonable_python(value, fallback=repr)
    except ValueError:  # nested deeper than pydantic serializes (about 255 levels)
        return _plain_deep(value)


def _plain_deep(value: Any) -> Any:
    """:func:`plain` without recursion: lists, tuples and dicts copied level by level."""
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - pydantic only when printing

    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        copied: Any
        if isinstance(item, dict):
            named = [(k if isinstance(k, str) else str(plain(k)), v) for k, v in item.items()]
            copied = dict.fromkeys(k for k, _ in named)
            stack.extend((copied, k, v) for k, v in named)
        elif isinstance(item, list | tuple):
            copied = [None] * len(item)
            stack.extend((copied, index, v) for index, v in enumerate(item))
        else:
            try:
                copied = to_jsonable_python(item, fallback=repr)
            except ValueError:  # a deep model or dataclass: its repr will do
                copied = repr(item)
        parent[key] = copied
    return root[0]


def when(epoch: float | None) -> str:
    """An epoch time as an ISO string (UTC), or an empty string."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds")


def execute(
    store_url: str | None,
    work: Callable[[Store], Awaitable[T]],
    *,
    drives: str | bool = False,
    lease: float | None = None,
) -> T:
    """Run one command against the store, turning errors into one line and an exit code.

    Args:
        store_url: ``--store``.
        work: The command, given the opened store.
        drives: For commands that advance a run (``True``, or the id of the
            run they name): Ctrl-C detaches from the runs this process owns
            instead of cancelling them, says so and exits with 130.
        lease: The store's lease in seconds (``None``: ``TREADLE_LEASE`` or 30).
    """

    async def main() -> T:
        store = commands.open_store(store_url, lease=lease)
        try:
            if drives is False:
                return await work(store)
            return await _detach_on_interrupt(store, work, drives)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except Detached as detached:
        err.print(escape(str(detached)))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except KeyboardInterrupt:  # a second Ctrl-C while detaching (or one before it could)
        err.print("interrupted: stopped at once; nothing was cancelled")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except WorkflowRunError as error:
        err.print(f"[red]run failed:[/red] {escape(str(error))}")
        raise typer.Exit(1) from None
    except RunCancelledError as error:
        if drives is False:  # e.g. fork: a refusal, as any other
            err.print(f"[red]error:[/red] {escape(str(error))}")
            raise typer.Exit(2) from None
        err.print(f"[yellow]cancelled:[/yellow] {escape(str(error))}")  # the run's outcome
        raise typer.Exit(1) from None
    except TreadleError as error:
        err.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None


class Detached(Exception):  # noqa: N818 - an outcome, not a failure
    """Ctrl-C detached the command from its run; the message says where the run stands."""


async def _detach_on_interrupt(
    store: Store, work: Callable[[Store], Awaitable[T]], named: str | bool
) -> T:
    """``work``, with Ctrl-C detaching from the runs this process owns rather than cancelling.

    The first Ctrl-C detaches every run this process owns (their writes are
    refused from then on, so nothing, not even ``cancelled``, is recorded)
    and cancels the work; each run's task unwinds and gives its lease up, so
    ``resume`` or a worker can take it over at once. A second Ctrl-C stops
    at once (the lease then runs out by itself).

    Raises:
        Detached: Ctrl-C came before the work finished.
    """
    loop = asyncio.get_running_loop()

    async def command() -> T:
        return await work(store)

    task = asyncio.create_task(command())
    detached: list[str] | None = None

    def interrupted() -> None:
        nonlocal detached
        loop.remove_signal_handler(signal.SIGINT)  # the next Ctrl-C: KeyboardInterrupt
        detached = detach_all("detached by Ctrl-C: the run stays as last committed")
        task.cancel()

    with contextlib.suppress(NotImplementedError):  # a loop without signal handlers: as before
        loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        return await task
    except BaseException:
        if detached is None:
            raise
        # The cancellation, or a write refused while unwinding: the runs stay as committed.
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    rows = [await _row_or_none(store, run_id) for run_id in detached]
    raise Detached(_detached_message(detached, rows, named))


async def _row_or_none(store: Store, run_id: str) -> RunRecord | None:
    try:
        return await store.get_run(run_id)
    except TreadleError:  # never stored (interrupted while being created), or the store failed
        return None


def _detached_message(run_ids: list[str], rows: list[RunRecord | None], named: str | bool) -> str:
    lines = []
    for run_id, row in zip(run_ids, rows, strict=True):
        if row is None:
            lines.append(f"interrupted before run {run_id} was stored; nothing was started")
        elif RunStatus(row.status).is_final:
            lines.append(f"run {run_id} is {row.status}; treadle show {run_id} to look at it")
        else:
            lines.append(
                f"detached from run {run_id} at superstep {row.superstep} (its last checkpoint); "
                f"it stays resumable: treadle resume {run_id} "
                f"(or let `treadle worker` take it over); treadle show {run_id} to look at it"
            )
    if lines:
        return "\n".join(lines)
    if isinstance(named, str):
        return (
            f"interrupted before this command took run {named} over; nothing was cancelled: "
            f"treadle show {named} to look at it"
        )
    return "interrupted before a run was started; nothing was stored"


def report(result: RunResult, *, as_json: bool = False) -> None:
    """Print a run's outcome (and how to answer it) and exit with its status code."""
    if as_json:
        out.print_json(data=plain(_result_data(result)))
    else:
        style = "green" if result.status is RunStatus.COMPLETED else "yellow"
        out.print(f"run [bold]{result.run_id}[/bold]: [{style}]{result.status.value}[/{style}]")
        for value in result.outputs:
            out.print(f"  output: {escape(json.dumps(plain(value)))}")
        for request in result.pending_requests:
            payload = escape(json.dumps(plain(request.payload)))
            out.print(
                f"  waiting for {request.response_type} on request {request.request_id}: {payload}"
            )
            out.print(f"    answer: treadle respond {result.run_id} {request.request_id} '<json>'")
        if result.status is RunStatus.WAITING:
            out.print(f"  next timer: {when(result.wake_at)}; `treadle worker` wakes it")
    raise typer.Exit(EXIT_FOR_STATUS[result.status])


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


def execute_sync(work: Callable[[], T]) -> T:
    """Run a synchronous step of a command, with the same error handling."""
    try:
        return work()
    except TreadleError as error:
        err.print(f"[red]error:[/red] {escape(str(error))}")
        raise typer.Exit(2) from None


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
    now = time.time()
    if as_json:
        out.print_json(data=[_run_data(r, now) for r in rows])
        return
    table = Table("run", "workflow", "status", "superstep", "owner", "updated", box=None)
    for row in rows:
        table.add_row(
            escape(row.run_id),
            escape(row.workflow),
            escape(_status_text(row, now)),
            str(row.superstep),
            escape(_owner_text(row, now)),
            when(row.updated_at),
        )
    out.print(table)


def _status_text(row: RunRecord, now: float) -> str:
    """The status, marked ``(orphaned)`` and with why the run is parked, if it is."""
    marks = ["orphaned"] if commands.is_orphaned(row, now) else []
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


def _run_data(row: RunRecord, now: float) -> dict[str, Any]:
    return {
        "run_id": row.run_id,
        "workflow": row.workflow,
        "status": row.status,
        "superstep": row.superstep,
        "checkpoint_id": row.checkpoint_id,
        "parent_run_id": row.parent_run_id,
        "parent_checkpoint_id": row.parent_checkpoint_id,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "error": row.error,
        "wake_at": row.wake_at,
        "deadline_at": row.deadline_at,
        "owner": row.owner,
        "lease_until": row.lease_until,
        "orphaned": commands.is_orphaned(row, now),
        "parked": row.parked,
    }


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run: status, pending requests and timers, outputs, state."""
    view = execute(store, lambda s: commands.show_run(s, run_id, app_))
    now = time.time()
    data = {
        **_run_data(view.run, now),
        "outputs": view.outputs,
        "state": view.state,
        "pending_requests": view.pending_requests,
        "next_timer": view.wake_at,
    }
    if as_json:
        out.print_json(data=plain(data))
        return
    row = view.run
    shown = escape(row.run_id)
    status = escape(_status_text(row, now))
    out.print(f"run [bold]{shown}[/bold] ({escape(row.workflow)}): {status}")
    out.print(f"  superstep {row.superstep}, checkpoint {row.checkpoint_id}")
    if row.owner is not None:
        out.print(f"  owner: {escape(_owner_text(row, now))}")
    if data["orphaned"] and not row.parked:
        out.print(
            f"  [yellow]orphaned:[/yellow] nobody is advancing it (its process died, was detached "
            f"or stopped renewing its lease); take it over with: treadle resume {shown} "
            f"(or a running `treadle worker` does)"
        )
    if row.parked:
        out.print(
            f"  [yellow]parked:[/yellow] {escape(row.parked)}; `treadle resume {shown}` takes it up"
        )
    if row.error:
        out.print(f"  error: {escape(row.error)}")
    if view.detail:
        out.print(f"  [yellow]{escape(view.detail)}[/yellow]")
        return
    for request in view.pending_requests:
        out.print(
            f"  request {request['request_id']} from {request['executor_id']} "
            f"({request['response_type']}): {escape(json.dumps(plain(request['payload'])))}"
        )
    if view.wake_at is not None:
        out.print(f"  next timer: {when(view.wake_at)}")
    out.print(f"  outputs: {escape(json.dumps(plain(view.outputs)))}")
    out.print(f"  state: {escape(json.dumps(plain(view.state)))}")


@app.command()
def history(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A run's checkpoints (time travel) and its lineage."""
    row, checkpoints, forks = execute(store, lambda s: commands.history(s, run_id))
    if as_json:
        out.print_json(
            data={
                "run": _run_data(row, time.time()),
                "checkpoints": [
                    {
                        "checkpoint_id": c.checkpoint_id,
                        "superstep": c.superstep,
                        "status": c.status,
                        "created_at": c.created_at,
                        "parent_checkpoint_id": c.parent_checkpoint_id,
                    }
                    for c in checkpoints
                ],
                "forks": [_run_data(f, time.time()) for f in forks],
            }
        )
        return
    if row.parent_run_id:
        out.print(f"forked from run {row.parent_run_id} at checkpoint {row.parent_checkpoint_id}")
    table = Table("checkpoint", "superstep", "status", "created", "parent", box=None)
    for c in checkpoints:
        table.add_row(
            c.checkpoint_id,
            str(c.superstep),
            c.status,
            when(c.created_at),
            c.parent_checkpoint_id or "",
        )
    out.print(table)
    for fork_row in forks:
        out.print(f"fork: {fork_row.run_id} (from checkpoint {fork_row.parent_checkpoint_id})")


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


def report_delivery(run_id: str, result: RunResult | None, *, as_json: bool) -> None:
    """The run's new state, or (``None``) that its inbox holds the delivery for a worker."""
    if result is not None:
        report(result, as_json=as_json)
        return
    if as_json:
        out.print_json(data={"run_id": run_id, "delivered": True})
    else:
        out.print(f"delivered to run {run_id}; a worker applies it when it next claims the run")


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
    from treadle._durable._sqlite import SqliteStore  # noqa: PLC0415 - only for workers
    from treadle._runtime._service import Runtime  # noqa: PLC0415
    from treadle._scaleout._apps import load_app  # noqa: PLC0415
    from treadle._scaleout._worker import Worker  # noqa: PLC0415

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


class IsoTimeFormatter(logging.Formatter):
    """Log records stamped with their ISO time (UTC, to the millisecond)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """``2026-11-21T08:20:30.123+00:00``."""
        del datefmt
        return datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")


LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
"""A worker's log line: ISO time, logger, level, message."""


def log_to_stderr() -> None:
    """Print log records (INFO and up) on stderr, each once, with an ISO time.

    Unless the application imported by ``--app`` configured logging itself,
    in which case its set-up stands.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(IsoTimeFormatter(LOG_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def main() -> None:
    """Entry point of the ``treadle`` console script."""
    app()
