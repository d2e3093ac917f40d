"""Background work owned by a run: ``ctx.spawn``.

A handler may start work that outlives its invocation (a long download, a
model call in the background). The work belongs to the run, not to the
handler: it starts once the barrier committing the invocation is durable (so
a failed or suspended invocation starts nothing, and a superstep re-run after
a crash never started it), the run does not complete while it is pending,
and its outcome comes back to the spawning executor as a
:class:`SpawnResult` message. A checkpoint records what is in flight; if the
process dies, the work is gone, and a resumed run tells the executor so with
a ``SpawnResult(lost=True)`` rather than forgetting it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


@dataclass(frozen=True, slots=True)
class SpawnResult:
    """How a piece of spawned background work ended, delivered to its spawner.

    Attributes:
        name: The name given to ``ctx.spawn``.
        key: Unique within the run.
        value: What the work returned (``None`` if it failed or was lost).
        error: ``"ExceptionType: message"`` if it raised.
        lost: ``True`` when the process running it died before it finished.
    """

    name: str
    key: str
    value: Any = None
    error: str | None = None
    lost: bool = False

    @property
    def ok(self) -> bool:
        """Whether the work finished without error."""
        return self.error is None and not self.lost


@dataclass(frozen=True, slots=True)
class SpawnRecord:
    """What a checkpoint keeps of work in flight (the coroutine cannot be kept)."""

    key: str
    executor_id: str
    name: str


class SpawnedWork:
    """The run's background tasks; their results become messages."""

    __slots__ = ("_tasks", "queued")

    def __init__(self) -> None:
        self._tasks: dict[asyncio.Future[Any], SpawnRecord] = {}
        self.queued: tuple[tuple[SpawnRecord, Callable[..., Awaitable[Any]], tuple[Any, ...]], ...]
        self.queued = ()
        """Committed work waiting for its checkpoint to be durable (read at every barrier).

        A tuple, replaced when work queues: nearly every run has none, and an
        empty list per run in flight was one more object for the garbage
        collector to walk at every pass.
        """

    def __bool__(self) -> bool:
        return bool(self._tasks or self.queued)

    def records(self) -> list[SpawnRecord]:
        """The work in flight or about to start, for a checkpoint."""
        records = [*self._tasks.values(), *(record for record, _, _ in self.queued)]
        return sorted(records, key=lambda r: r.key)

    def queue(
        self,
        record: SpawnRecord,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
    ) -> None:
        """Accept work committed at a barrier; it starts with :meth:`start_queued`.

        The loop starts it only once the barrier's checkpoint is durable, so
        a superstep re-run after a crash never started work before.
        """
        self.queued = (*self.queued, (record, fn, args))

    def start_queued(self) -> None:
        """Start every piece of queued work, owned by the run."""
        for record, fn, args in self.queued:
            try:
                self._tasks[asyncio.ensure_future(fn(*args))] = record
            except Exception as error:  # noqa: BLE001 - it could not start: its result says why
                failed = asyncio.get_running_loop().create_future()
                failed.set_exception(error)
                self._tasks[failed] = record
        self.queued = ()

    async def wait_any(self) -> list[tuple[str, SpawnResult]]:
        """Wait until some work finishes; return (executor id, result) for each done."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finished = []
        for task in sorted(done, key=lambda t: self._tasks[t].key):
            record = self._tasks.pop(task)
            if task.cancelled():
                result = SpawnResult(record.name, record.key, error="CancelledError: cancelled")
            elif (error := task.exception()) is not None:
                result = SpawnResult(record.name, record.key, error=error_text(error))
            else:
                result = SpawnResult(record.name, record.key, value=task.result())
            finished.append((record.executor_id, result))
        return finished

    async def cancel_all(self) -> None:
        """Stop everything still running (the run ended, failed or was cancelled)."""
        self.queued = ()
        tasks = list(self._tasks)
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def lost(records: list[SpawnRecord]) -> list[tuple[str, SpawnResult]]:
    """The messages telling executors their work died with its process."""
    return [(r.executor_id, SpawnResult(r.name, r.key, lost=True)) for r in records]
