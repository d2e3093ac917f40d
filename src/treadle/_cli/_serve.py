"""What ``treadle worker`` runs until SIGTERM or Ctrl-C, on either kind of store.

Kept apart from the command (:mod:`treadle._cli._worker`), which only parses
the worker's options, because serving differs by store: on SQLite the
process is the file's timer service (it wakes due runs, applies deliveries
nobody applied, takes orphans over) and leaves the runs it was advancing
as last committed when stopped; on PostgreSQL it is one of many workers
claiming runs under leases, which finish their current superstep and
release them when stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._exceptions import CommandError, DurabilityError
from treadle._operations._inputs import lease_from_environment
from treadle._operations._shapes import iso_time
from treadle._operations._webhooks import sending

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from treadle._engine._metrics import Metrics
    from treadle._graph._limits import CallLimit
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow

_logger = logging.getLogger("treadle.worker")


class IsoTimeFormatter(logging.Formatter):
    """Log records stamped with their ISO time (UTC, to the millisecond)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """``2026-11-21T08:20:30.123+00:00``."""
        del datefmt
        return iso_time(record.created, timespec="milliseconds") or ""


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


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How ``treadle worker`` serves, as its options set it.

    Attributes:
        poll_interval: Seconds between looks for work when nothing signals any.
        concurrency: Runs served at once (PostgreSQL).
        lease: Seconds a lease on a run lasts unrenewed (PostgreSQL;
            ``None``: ``TREADLE_LEASE``, else 30).
        max_recoveries: How often a run whose worker died is taken over
            before it is parked (PostgreSQL).
        worker_id: This worker's name in leases (``None``: one is made up).
        metrics_port: Serve Prometheus' ``GET /metrics`` on this port
            (``None``: no metrics; 0: a free port, logged).
        metrics_host: The address that port is bound on.
        limits: The call limits its runs share (the apps' top-level ``CallLimit``s).
    """

    poll_interval: float
    concurrency: int
    lease: float | None
    max_recoveries: int
    worker_id: str | None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    limits: tuple[CallLimit, ...] = ()


async def serve(store: Store, workflows: list[Workflow], settings: WorkerSettings) -> None:
    """Serve ``workflows`` on ``store`` until SIGTERM, SIGINT or SIGHUP arrives.

    SIGHUP (the terminal it runs in closed) stops it as the others do, as it
    detaches every other ``treadle`` command: it used to kill it on the spot.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await first_contact(store)
    # The worker delivers the store's webhooks too, in a task of its own group.
    async with (
        _exposing(store, workflows, settings) as metrics,
        asyncio.TaskGroup() as group,
        sending(store, group, settings.poll_interval, metrics),
    ):
        if _is_postgres(store):
            await _serve_queue(store, workflows, settings, stop, metrics)
        else:
            await _serve_file(store, workflows, settings, stop, metrics)


# What a server says as it turns a connection away for now: it is starting, stopping or full.
_PASSING = (
    "starting up",
    "shutting down",
    "in recovery",
    "too many clients",
    "too many connections",
)


async def first_contact(store: Store) -> None:
    """Reach the store once before serving, refusing what no retry mends.

    On PostgreSQL: a database that does not exist, a role the server
    refuses, a password it rejects: the server answered, and every round
    would log the same warnings forever. On SQLite: a file that cannot be
    opened or made (its folder does not exist, or may not be written). A
    PostgreSQL server not reachable yet (not started, restarting) and a
    SQLite file busy are retried as an outage is, and said once.
    ``treadle worker`` and ``treadle serve`` both call it before serving.

    Raises:
        CommandError: The store cannot be used, and retrying will not change that.
    """
    try:
        await store.list_runs(limit=1)
    except DurabilityError as error:
        said = str(error)
        if _is_postgres(store):
            for_good = "FATAL:" in said and not any(passing in said for passing in _PASSING)
        else:
            for_good = _SQLITE_NEVER in said
        if for_good:
            raise CommandError(f"cannot use the store: {said}") from None
        _logger.warning("cannot reach the store yet (trying again each round): %s", said)


_SQLITE_NEVER = "unable to open database file"
"""SQLite's word for a file it cannot open or create: no folder, or no right to it."""


def _is_postgres(store: Store) -> bool:
    """Whether ``store`` is a ``PostgresStore``, asked without importing a store's module.

    There is no ``PostgresStore`` before its module is imported, so a module
    not imported answers no. Importing it to ask would cost a SQLite worker
    psycopg (or fail, without the extra); asking ``isinstance(store,
    SqliteStore)`` instead cost a PostgreSQL worker the SQLite store's
    modules at start-up.
    """
    postgres = sys.modules.get("treadle._stores._postgres")
    return postgres is not None and isinstance(store, postgres.PostgresStore)


@contextlib.asynccontextmanager
async def _exposing(
    store: Store, workflows: list[Workflow], settings: WorkerSettings
) -> AsyncIterator[Metrics | None]:
    """The worker's metrics, served on ``--metrics-port`` while the block runs (else ``None``)."""
    if settings.metrics_port is None:
        yield None
        return
    # Only with --metrics-port: the SDK and the exporter are the metrics extra.
    from treadle._operations._metrics_http import metrics_endpoint  # noqa: PLC0415
    from treadle._operations._prometheus import PrometheusMetrics  # noqa: PLC0415
    from treadle._workflow._versions import Hosted  # noqa: PLC0415

    exposed = PrometheusMetrics(store, Hosted(workflows))
    try:
        async with metrics_endpoint(exposed, settings.metrics_host, settings.metrics_port):
            yield exposed.metrics
    finally:
        exposed.close()


async def _serve_file(
    store: Store,
    workflows: list[Workflow],
    settings: WorkerSettings,
    stop: asyncio.Event,
    metrics: Metrics | None,
) -> None:
    """The timer service of one SQLite file; stopping leaves its runs as last committed."""
    from treadle._workflow._service import Runtime  # noqa: PLC0415

    _logger.info("worker serving %s", ", ".join(w.name for w in workflows))
    path = getattr(store, "path", None)
    # Leaving the runtime detaches the runs it was advancing (it logs each):
    # stopping must not cancel them, they stay resumable.
    async with Runtime(
        store,
        workflows,
        poll_interval=settings.poll_interval,
        metrics=metrics,
        limits=settings.limits,
    ):
        with contextlib.ExitStack() as held:
            if isinstance(path, str):
                held.enter_context(_said_if_not_alone(path))
            await stop.wait()
    _logger.info("worker stopped")


@contextlib.contextmanager
def _said_if_not_alone(path: str) -> Iterator[None]:
    """Warn when another worker serves the SQLite file at ``path`` already.

    A second worker is safe (leases keep each run to one owner) but does
    nothing a first does not: a SQLite file takes one writer at a time, so
    it only adds waiting for the file, and it is easy to start by mistake
    (a second shell, a unit started twice). Each worker holds an advisory
    lock on ``<file>-worker``, beside SQLite's own ``-wal`` and ``-shm``,
    holding its process id; the system lets go of it when the process ends,
    however it ends. Never the database file itself: closing any descriptor
    of that file drops SQLite's own locks on it. Where the lock cannot be
    had (a read-only directory, no ``fcntl``), nothing is said.
    """
    try:
        import fcntl  # noqa: PLC0415 - POSIX only

        marker = open(f"{path}-worker", "a+", encoding="utf-8")  # noqa: PTH123, SIM115
    except (ImportError, OSError):
        yield
        return
    with marker:
        try:
            fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            marker.seek(0)
            other = marker.read().strip() or "unknown"
            _logger.warning(
                "another treadle worker (pid %s) serves %s already: a SQLite file takes one "
                "writer at a time, so a second worker adds waiting, not throughput "
                "(docs/deploy.md: one worker per file)",
                other,
                path,
            )
            yield
            return
        marker.seek(0)
        marker.truncate()
        marker.write(str(os.getpid()))
        marker.flush()
        yield


async def _serve_queue(
    store: Store,
    workflows: list[Workflow],
    settings: WorkerSettings,
    stop: asyncio.Event,
    metrics: Metrics | None,
) -> None:
    """One of PostgreSQL's workers; stopping finishes each run's superstep and releases it."""
    from treadle._scaleout._worker import Worker  # noqa: PLC0415

    serving = Worker(  # it logs its own start and stop
        store,  # type: ignore[arg-type]
        workflows,
        worker_id=settings.worker_id,
        concurrency=settings.concurrency,
        lease=settings.lease if settings.lease is not None else lease_from_environment(),
        poll_interval=settings.poll_interval,
        max_recoveries=settings.max_recoveries,
        metrics=metrics,
        limits=settings.limits,
    )
    async with asyncio.TaskGroup() as group:
        group.create_task(serving.serve())
        await stop.wait()
        serving.stop()
