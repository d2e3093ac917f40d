"""Driving a run this process holds: open it, step it until it rests or ends, let it go.

Every entry point that continues or starts a run here ends in :func:`drive`
(``Workflow.run``, ``resume``, ``respond``, ``send_message``, a
``Runtime``, a worker, the server), so a run behaves the same whoever
opened it. A session may go on once its loop stops (``_sessions.py``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from treadle._engine._errors import WorkflowRunError
from treadle._engine._inputs import TurnRolledBack
from treadle._exceptions import TreadleError
from treadle._workflow._launch import Launch, open_run
from treadle._workflow._sessions import next_launch
from treadle._workflow._stream import EventBatch

if TYPE_CHECKING:
    from treadle._engine._options import RunOptions
    from treadle._engine._result import RunResult
    from treadle._stores._store import Store
    from treadle._workflow._runs import TakenOver
    from treadle._workflow._workflow import Workflow


async def drive(workflow: Workflow, launch: Launch) -> RunResult:
    """Open a run, step it until it rests or ends, and return its result.

    A session may go on here once its loop stops: rolled back to where its
    turn began, or taking a message that came as it rested (``_sessions.py``).
    """
    while True:
        batch = EventBatch() if launch.options.record_events else None
        loop, release = await open_run(workflow, launch, batch)
        try:
            await loop.run_to_end()
        except TurnRolledBack:
            pass  # stopped at a boundary: it goes on from where the turn began (next_launch)
        except TreadleError as error:
            if isinstance(error, WorkflowRunError):
                error.result = loop.result(batch.numbered() if batch is not None else None)
            raise
        except asyncio.CancelledError:
            await loop.cancel()
            raise
        finally:
            await release()
        result = loop.result(batch.numbered() if batch is not None else None)
        if loop.env.inputs is None:
            return result
        following = await next_launch(workflow, loop, launch)
        if following is None:
            return result
        launch = following


async def continue_taken(
    workflow: Workflow, taken: TakenOver, store: Store, options: RunOptions
) -> RunResult:
    """Drive a run this process has taken over, applying what its inbox held."""
    launch = Launch(
        restored=taken.restored,
        store=store,
        options=options,
        answers=taken.answers,
        inputs=taken.inputs,
        ownership=taken.ownership,
        expired=taken.expired,
    )
    return await drive(workflow, launch)
