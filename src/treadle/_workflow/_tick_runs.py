"""How a ``Runtime`` starts a tick's run: opened here, driven in the round that woke it.

A tick's run is opened as any new run is (:func:`open_run`: its row and
first checkpoint written, leased to this process) under the id its
schedule gives it; a store that has a run of that id refuses the second
(``RunExistsError``), which here means another process made it, and
nothing more is done. The opened run is driven beside the runs the same
round woke, so that ``wake_due`` reports it among them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from treadle._engine._errors import RunCancelledError, WorkflowRunError
from treadle._exceptions import RunExistsError, TreadleError
from treadle._workflow._inputs import coerce_input
from treadle._workflow._launch import Launch, open_run
from treadle._workflow._rights import started_by

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._checkpoints._leases import LeaseKeeper
    from treadle._engine._options import RunOptions
    from treadle._engine._result import RunResult
    from treadle._stores._store import Store
    from treadle._workflow._ticker import TickStart
    from treadle._workflow._versions import Hosted

    Drive = Callable[[], Awaitable["RunResult | None"]]

logger = logging.getLogger("treadle.schedules")


class OpeningStarter:
    """A :class:`~treadle._workflow._ticker.Starter` that opens each run in this process.

    Args:
        store: Where the runs go.
        hosted: The workflows (and versions) this process runs.
        options: How the runs run (the runtime's clock and metrics).
        leases: The keeper of the driver that drives them.
    """

    def __init__(
        self, store: Store, hosted: Hosted, options: RunOptions, leases: LeaseKeeper
    ) -> None:
        self.store = store
        self.hosted = hosted
        self.options = options
        self.leases = leases
        self.opened: list[Drive] = []
        """The drives of the runs opened, for the caller to run."""

    async def start_tick(self, tick: TickStart) -> None:
        """Open the tick's run here (nothing if a run of its id exists).

        Raises:
            AppLoadError: The workflow or version is not hosted here, or the
                input does not fit its start executor.
        """
        workflow = self.hosted.find(tick.schedule.workflow, tick.schedule.version)
        message = coerce_input(workflow, tick.input)
        launch = Launch(
            message,
            run_id=tick.run_id,
            options=self.options,
            store=self.store,
            started_by=started_by(tick.actor),
            leases=self.leases,
        )
        try:
            loop, release = await open_run(workflow, launch, None)
        except RunExistsError:
            return  # another process made it: one run per tick
        run_id = tick.run_id

        async def drive_on() -> RunResult | None:
            try:
                await loop.run_to_end()
            except WorkflowRunError:
                logger.info("run %s of schedule %s failed", run_id, tick.schedule.id)
            except RunCancelledError:
                return None
            except asyncio.CancelledError:
                await loop.cancel()
                raise
            except TreadleError as error:  # a lost lease, a store outage: resumable
                logger.warning("run %s: %s", run_id, error)
                return None
            finally:
                await release()
            return loop.result(None)

        self.opened.append(drive_on)
