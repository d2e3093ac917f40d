"""How a tick's run starts on PostgreSQL: queued for the workers, as a client starts one.

A worker serving schedules (and a client or command that triggers or
backfills one) queues the tick's run under its id with its input, as
``Client.start`` does: the store creates a pending run once, whoever asks
first, and a worker claims it like any other. The run is pinned to the
schedule's version, or left to the newest the claiming worker hosts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._values._serialization import JsonSerializer
from treadle._workflow import _actions as door
from treadle._workflow._inputs import coerce_input

if TYPE_CHECKING:
    from treadle._stores._postgres import PostgresStore
    from treadle._values._search_fields import FieldValue
    from treadle._workflow._ticker import TickStart
    from treadle._workflow._versions import Hosted


class QueueStarter:
    """A :class:`~treadle._workflow._ticker.Starter` that queues each run for the workers.

    Args:
        store: The PostgreSQL store the workers serve.
        hosted: Workflows whose serializer and input types encode the input
            (a worker's); without one, the input goes as plain JSON and the
            worker that starts the run turns it into the type its handler takes.
    """

    def __init__(self, store: PostgresStore, hosted: Hosted | None = None) -> None:
        self.store = store
        self.hosted = hosted
        self._plain = JsonSerializer()

    async def start_tick(self, tick: TickStart) -> None:
        """Queue the tick's run (nothing if a run of its id exists).

        Raises:
            AppLoadError: The input does not fit the hosted workflow's start executor.
            RunExistsError: Its id belongs to a run of another workflow.
        """
        name, version = tick.schedule.workflow, tick.schedule.version
        workflow = self.hosted.get(name, version) if self.hosted is not None else None
        fields: tuple[FieldValue, ...] = ()
        if workflow is None:
            payload = self._plain.dumps(tick.input)
        else:
            message = coerce_input(workflow, tick.input)
            payload = workflow.serializer.dumps(message)
            fields = tuple(workflow.search_fields.of_input(message, tick.run_id))
        await door.start_queued(
            self.store,
            tick.run_id,
            name,
            payload,
            actor=tick.actor,
            version=version or 0,
            fields=fields,
        )
