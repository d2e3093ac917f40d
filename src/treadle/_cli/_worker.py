"""``treadle worker``: its options; what it runs is :mod:`treadle._cli._serve`."""

from __future__ import annotations

from typing import Annotated

import typer

from treadle._cli._execute import execute, execute_sync
from treadle._cli._flags import StoreOption  # noqa: TC001 - typer reads the annotation
from treadle._cli._help import command_set
from treadle._cli._serve import WorkerSettings, log_to_stderr, serve

cli = command_set()


@cli.command()
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
    connections: Annotated[
        int | None,
        typer.Option(
            "--connections",
            min=1,
            help="PostgreSQL: connections the worker's pool may open "
            "(default: TREADLE_CONNECTIONS, else 10; one more listens).",
        ),
    ] = None,
    worker_id: Annotated[str | None, typer.Option("--worker-id")] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve Prometheus metrics on GET /metrics at this port (0: any free one).",
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="The address --metrics-port binds.")
    ] = "127.0.0.1",
    store: StoreOption = None,
) -> None:
    """Serve runs until SIGTERM or Ctrl-C.

    On PostgreSQL: claim runs with leases alongside other workers, run them,
    and on SIGTERM finish each run's current superstep and release it. On
    SQLite: wake runs whose timers fall due, apply deliveries nobody applied
    and take over orphaned runs (one such worker per file); on SIGTERM or
    Ctrl-C, the runs it was advancing are left as last committed (not
    cancelled). Log lines go to stderr, each once, with an ISO time. The
    call limits the apps declare at their top level (``CallLimit``) are
    shared by every run the worker serves (docs/flow-control.md).
    """
    from treadle._scaleout._apps import load_app, load_limits  # noqa: PLC0415 - only for workers

    workflows = [w for spec in apps for w in execute_sync(lambda spec=spec: load_app(spec))]  # type: ignore[misc]
    limits = tuple({limit.name: limit for spec in apps for limit in load_limits(spec)}.values())
    settings = WorkerSettings(
        poll_interval=poll_interval,
        concurrency=concurrency,
        lease=lease,
        max_recoveries=max_recoveries,
        worker_id=worker_id,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        limits=limits,
    )
    log_to_stderr()
    execute(
        store,
        lambda chosen: serve(chosen, workflows, settings),
        lease=lease,
        creates=True,
        connections=connections,
    )
