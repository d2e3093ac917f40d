"""Where the server runs runs: in tasks its lifespan owns, on SQLite; on workers, on PostgreSQL.

On SQLite nothing but the server itself advances the file's runs (there
is one timer service per file, and while ``treadle serve`` runs, it is
that): a :class:`Driver` runs the timer service (it wakes due runs,
applies deliveries nobody applied, takes orphans over) and drives what the
API started, resumed or answered, each in a task of one task group. On
PostgreSQL, ``treadle worker`` processes do all of that; the server only
queues and delivers (a resume, which names the checkpoint to go on from,
is driven here as ``treadle resume`` would).

Stopping the server detaches every run it is driving before cancelling
its task: nothing, not even ``cancelled``, is recorded, so each run stays
as last committed, resumable by the next server, worker or ``resume``.
Those are the runs its :class:`LeaseKeeper` holds: anything else driving
runs in the same process (another server, a ``Runtime``) is left alone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from treadle._checkpoints._leases import LeaseKeeper
from treadle._engine._errors import RunCancelledError, WorkflowRunError
from treadle._engine._options import RunOptions
from treadle._exceptions import TreadleError
from treadle._tasks import close_group

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from treadle._engine._metrics import Metrics
    from treadle._operations._background import DriveOn
    from treadle._stores._store import Store
    from treadle._workflow._service import Runtime
    from treadle._workflow._workflow import Workflow

logger = logging.getLogger("treadle.server")


class Driver:
    """The tasks that advance runs for the server, owned by its lifespan.

    Args:
        store: The server's store.
        workflows: The workflows it serves.
        poll_interval: Seconds between the SQLite timer service's looks for due runs.
        metrics: Where the runs it drives report (``GET /metrics``).
    """

    def __init__(
        self,
        store: Store,
        workflows: Sequence[Workflow],
        poll_interval: float,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.run_options = RunOptions(record_events=False, metrics=metrics)
        """How the runs it drives run: nobody waits for their events; its metrics count them."""
        self._workflows = list(workflows)
        self._poll_interval = poll_interval
        self._runtime: Runtime | None = None
        self._group: asyncio.TaskGroup | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.leases = LeaseKeeper()  # replaced by one in the task group while serving

    @property
    def runs_here(self) -> bool:
        """Whether this process runs the store's runs (SQLite), rather than workers (PostgreSQL)."""
        from treadle._stores._sqlite import SqliteStore  # noqa: PLC0415 - a light import

        return isinstance(self.store, SqliteStore)

    def spawn(self, run_id: str, drive_on: DriveOn) -> None:
        """Drive a run in the background; what becomes of it is in the store and the log."""
        if self._group is None:
            msg = "the server is not running: no run can be driven"
            raise RuntimeError(msg)
        task = self._group.create_task(self._drive(run_id, drive_on), name=f"treadle-run-{run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, run_id: str, drive_on: DriveOn) -> None:
        try:
            with self.leases.driving():
                await drive_on()
        except WorkflowRunError as error:  # recorded in the store; the API shows it
            logger.info("run %s failed: %s", run_id, error)
        except RunCancelledError:
            logger.info("run %s was cancelled", run_id)
        except TreadleError as error:  # a lost lease, a store outage: the run stays resumable
            logger.warning("run %s stopped: %s", run_id, error)
        except Exception:  # a bug: it must not take the other runs down with it
            logger.exception("run %s stopped by an unexpected error", run_id)

    async def __aenter__(self) -> Driver:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self.leases = LeaseKeeper(group)
        if self.runs_here:
            from treadle._workflow._service import Runtime  # noqa: PLC0415 - SQLite only

            runtime = Runtime(
                self.store, self._workflows, poll_interval=self._poll_interval, metrics=self.metrics
            )
            await runtime.__aenter__()
            self._runtime = runtime
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Detach first: a run whose task is then cancelled records nothing.
        left = self.leases.detach("the server stopped: the run stays as last committed")
        for run_id in left:
            logger.info("left run %s as last committed", run_id)
        if self._runtime is not None:
            await self._runtime.__aexit__(None, None, None)
            self._runtime = None
        for task in list(self._tasks):
            task.cancel()
        await self.leases.close()
        group, self._group = self._group, None
        if group is not None:
            await close_group(group)
