"""This process's ephemeral events, handed to whoever follows their run live.

Ephemeral events (an agent's token deltas: a ``WorkflowEvent`` class with
``ephemeral = True``) are never logged, so a follower that reads the log
(the server's event stream) gets them only from here, and only from the
process that runs the run: the handler's context hands each one to
:data:`LIVE` the moment it is raised, whatever the run's streaming mode.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from treadle._engine._events import WorkflowEvent


class LiveEvents:
    """Where this process's ephemeral events go to whoever follows their run live.

    Ephemeral events (an agent's token deltas) are never logged, so a
    follower that reads the log (the server's event stream) sees them only
    from the process that runs the run: every stored run's journal hands
    its run's ephemeral events here, and each subscriber of that run gets
    them in a queue of its own. A run nobody subscribed to costs a lookup.
    A subscriber that falls behind loses the oldest deltas, never blocks
    the run.
    """

    __slots__ = ("_queues",)

    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[WorkflowEvent]]] = {}

    def publish(self, event: WorkflowEvent) -> None:
        """Hand ``event`` to each subscriber of its run (from the loop that runs it)."""
        queues = self._queues
        if not queues:
            return
        for queue in queues.get(event.run_id, ()):
            if queue.full():
                queue.get_nowait()  # the oldest delta goes: the final message is what counts
            queue.put_nowait(event)

    @contextlib.contextmanager
    def subscribe(self, run_id: str, size: int = 1000) -> Iterator[asyncio.Queue[WorkflowEvent]]:
        """A queue of the run's ephemeral events from now on, until the block ends."""
        queue: asyncio.Queue[WorkflowEvent] = asyncio.Queue(size)
        self._queues.setdefault(run_id, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self._queues[run_id]
            queues.discard(queue)
            if not queues:
                del self._queues[run_id]


LIVE = LiveEvents()
"""This process's hub of ephemeral events (see :class:`LiveEvents`)."""
