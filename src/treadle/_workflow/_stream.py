"""Streaming a run: the two execution modes and the event channel.

``OFF_THREAD`` (the default): the supersteps run on a background task that
the stream owns; events go to a channel the moment they are raised, so a
slow consumer never delays the run unless ``max_buffered_events`` asks for
backpressure. ``LOCKSTEP``: the consumer's iteration drives the run; each
superstep runs to completion, its events are yielded as one batch in
canonical order, and the next superstep starts only once the consumer asks
for more after the batch.

Use the stream as ``async with workflow.stream(x) as events:``; leaving the
block early cancels the run, so no task outlives its owner.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from typing import TYPE_CHECKING, Final

from treadle._engine._errors import WorkflowRunError
from treadle._engine._inputs import TurnRolledBack
from treadle._tasks import cancel_and_wait, wait_cancelled

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from treadle._engine._events import WorkflowEvent
    from treadle._engine._opening import DrivenRun
    from treadle._engine._result import RunResult


class ExecutionMode(enum.Enum):
    """How a streamed run is scheduled relative to its consumer."""

    OFF_THREAD = "off_thread"
    LOCKSTEP = "lockstep"


class _End:
    __slots__ = ()


_END: Final = _End()


class EventChannel:
    """An asyncio channel of events, optionally bounded (backpressure).

    ``publish`` never blocks, because handlers raise events synchronously;
    instead the runtime awaits :meth:`wait_writable` before each invocation
    and barrier, so with a bound of ``n`` the run pauses while ``n`` events
    wait. Events raised by invocations already running are still accepted,
    so the channel may briefly exceed the bound by those; none is dropped.
    """

    live = True

    def __init__(self, bound: int | None) -> None:
        if bound is not None and bound < 1:
            msg = f"max_buffered_events must be at least 1, got {bound}"
            raise ValueError(msg)
        self._items: deque[WorkflowEvent] = deque()
        self._bound = bound
        self._sequence = 0
        self._closed = False
        self._has_items = asyncio.Event()
        self._has_space = asyncio.Event()
        self.backpressure: Callable[[], Awaitable[None]] | None = (
            self.wait_writable if bound is not None else None
        )

    def publish(self, event: WorkflowEvent) -> None:
        """Append an event, numbering it, and wake the consumer."""
        event.sequence = self._sequence
        self._sequence += 1
        self._items.append(event)
        self._has_items.set()

    def close(self) -> None:
        """No more events will come; the consumer ends after the last."""
        self._closed = True
        self._has_items.set()

    async def wait_writable(self) -> None:
        """Return once the channel holds fewer events than its bound."""
        bound = self._bound
        while bound is not None and len(self._items) >= bound:
            self._has_space.clear()
            await self._has_space.wait()

    async def get(self) -> WorkflowEvent | _End:
        """The next event, or the end marker once closed and drained."""
        while not self._items:
            if self._closed:
                return _END
            self._has_items.clear()
            await self._has_items.wait()
        event = self._items.popleft()
        if self._bound is not None and len(self._items) < self._bound:
            self._has_space.set()
        return event


class EventBatch:
    """Collects events in canonical order, for lockstep batches and results.

    An event's ``sequence`` is its index in ``events``, so it is written when
    the event is handed out (:meth:`numbered`) rather than when published:
    a run publishes several events per superstep, and on that path
    ``publish`` is nothing but the list's own ``append``.
    """

    live = False
    backpressure: Callable[[], Awaitable[None]] | None = None

    def __init__(self) -> None:
        self.events: list[WorkflowEvent] = []
        self.publish: Callable[[WorkflowEvent], None] = self.events.append
        self._numbered = 0

    def numbered(self) -> list[WorkflowEvent]:
        """Every event so far, each with its ``sequence`` set."""
        events = self.events
        for index in range(self._numbered, len(events)):
            events[index].sequence = index
        self._numbered = len(events)
        return events


class WorkflowStream:
    """An async iterator over a run's events, and the owner of that run.

    Created by :meth:`Workflow.stream`. ``result`` gives the run as of its
    last barrier; ``cancel()`` stops it (status ``CANCELLED``). A run that
    fails raises its :class:`WorkflowRunError` from the iteration after the
    final ``StatusChanged`` event has been yielded.
    """

    def __init__(
        self,
        open_run: Callable[
            [EventChannel | EventBatch],
            Awaitable[tuple[DrivenRun, Callable[[], Awaitable[None]]]],
        ],
        mode: ExecutionMode,
        max_buffered_events: int | None,
    ) -> None:
        if not isinstance(mode, ExecutionMode):
            msg = f"mode must be an ExecutionMode, got {mode!r}"
            raise TypeError(msg)
        self._open_run = open_run
        self._mode = mode
        self._bound = max_buffered_events
        self._loop: DrivenRun | None = None
        self._release: Callable[[], Awaitable[None]] | None = None
        self._channel: EventChannel | None = None
        self._batch: EventBatch | None = None
        self._cursor = 0
        self._task: asyncio.Task[None] | None = None
        self._error: WorkflowRunError | None = None
        if mode is ExecutionMode.LOCKSTEP and max_buffered_events is not None:
            msg = "max_buffered_events applies to OFF_THREAD streams; LOCKSTEP never buffers ahead"
            raise ValueError(msg)

    @property
    def run_id(self) -> str:
        """The run's id (once the stream has started)."""
        return self._opened().run_id

    @property
    def result(self) -> RunResult:
        """The run as of its last committed barrier."""
        loop = self._opened()
        return loop.result(self._batch.numbered() if self._batch is not None else None)

    def _opened(self) -> DrivenRun:
        if self._loop is None:
            msg = "the stream has not started: use `async with workflow.stream(...) as events`"
            raise RuntimeError(msg)
        return self._loop

    async def _started(self) -> DrivenRun:
        if self._loop is None:
            if self._mode is ExecutionMode.OFF_THREAD:
                channel = self._channel = EventChannel(self._bound)
                self._loop, self._release = await self._open_run(channel)
                self._task = asyncio.create_task(self._drive(self._loop, channel))
            else:
                self._batch = EventBatch()
                self._loop, self._release = await self._open_run(self._batch)
        return self._loop

    async def _drive(self, loop: DrivenRun, channel: EventChannel) -> None:
        try:
            await loop.run_to_end()
        except WorkflowRunError as error:
            self._error = error
        except TurnRolledBack:
            pass  # the stream ends; the run branches with whoever takes it up next
        except asyncio.CancelledError:
            await loop.cancel()
        finally:
            await self._finish()
            channel.close()

    async def _finish(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            await release()

    # -- iteration ------------------------------------------------------------
    async def __aenter__(self) -> WorkflowStream:
        await self._started()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> WorkflowStream:
        return self

    async def __anext__(self) -> WorkflowEvent:
        loop = await self._started()
        if self._channel is not None:
            event = await self._channel.get()
            if isinstance(event, _End):
                if self._task is not None:
                    await self._task
                self._raise_if_failed()
                raise StopAsyncIteration
            return event
        batch = self._batch
        assert batch is not None  # noqa: S101 - an invariant, narrows the type for mypy
        while self._cursor >= len(batch.events):
            if loop.status.is_stopped and not await loop.sleep_through_timer():
                await self._finish()
                self._raise_if_failed()
                raise StopAsyncIteration
            try:
                await loop.step()
            except WorkflowRunError as error:
                self._error = error
            except TurnRolledBack:  # the stream ends; the run branches with whoever takes it up
                await self._finish()
                raise StopAsyncIteration from None
            except asyncio.CancelledError:
                await self._finish()
                raise
        event = batch.numbered()[self._cursor]
        self._cursor += 1
        return event

    def _raise_if_failed(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    async def cancel(self) -> None:
        """Stop the run: status ``CANCELLED``, nothing further is invoked."""
        loop = await self._started()
        if self._task is not None and not self._task.done():
            await cancel_and_wait(self._task)
        elif self._task is None:
            await loop.cancel()
            await self._finish()

    async def aclose(self) -> None:
        """Cancel the run if it is still going and release its executors."""
        if self._loop is None:
            return
        if not self._loop.status.is_stopped:
            await self.cancel()
        elif self._task is not None:
            await wait_cancelled(self._task)
        await self._finish()
