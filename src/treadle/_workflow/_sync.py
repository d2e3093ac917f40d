"""Thin adapters for synchronous callers.

The async core does all the work; these run it on a dedicated thread with
its own event loop and hand results and events back to the caller's thread.
That also makes ``run_sync`` safe to call from inside a running event loop
(a notebook, a sync callback in async code), where ``asyncio.run`` is not.

A new thread starts with an empty ``contextvars`` context, so each adapter
copies the caller's context where it is called and runs the loop inside
that copy: the caller's current OpenTelemetry span (and any other context
variable) is then current where the run starts, as for an async caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator

    from treadle._engine._events import WorkflowEvent
    from treadle._workflow._stream import WorkflowStream

T = TypeVar("T")


def run_in_thread(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` to completion on a fresh loop in a dedicated thread.

    The loop runs in a copy of the caller's context, so the run sees the
    caller's context variables (its current span among them).
    """
    outcome: list[Any] = []
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.append((True, context.run(lambda: asyncio.run(make()))))
        except BaseException as error:  # noqa: BLE001 - handed over, never swallowed
            outcome.append((False, error))

    thread = threading.Thread(target=target, name="treadle-run", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


class SyncEventStream:
    """A run's events for synchronous code, driven on a dedicated thread.

    Iterate it; use it in a ``with`` block (or call :meth:`close`) so that
    leaving early cancels the run and joins its thread. Closing a stream
    whose run has finished does nothing. The run sees the context variables
    (the current span among them) of the code that created the stream.
    """

    def __init__(self, make: Callable[[], WorkflowStream]) -> None:
        self._make = make
        # Taken here, not at the first iteration: the stream starts where
        # ``stream_sync`` is called, as an ``async with workflow.stream(...)`` does.
        self._context = contextvars.copy_context()
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._done = False
        self._started = threading.Event()

    async def _pump(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._started.set()
        try:
            async with self._make() as events:
                async for event in events:
                    self._queue.put(("event", event))
        except asyncio.CancelledError:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            self._queue.put(("error", error))
            return
        self._queue.put(("end", None))

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=lambda: self._context.run(lambda: asyncio.run(self._pump())),
                name="treadle-stream",
                daemon=True,
            )
            self._thread.start()
            self._started.wait()

    def __iter__(self) -> Iterator[WorkflowEvent]:
        return self

    def __next__(self) -> WorkflowEvent:
        if self._done:
            raise StopIteration
        self._start()
        kind, value = self._queue.get()
        if kind == "event":
            event: WorkflowEvent = value
            return event
        self._done = True
        self._join()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        """Cancel the run if it is still going, and wait for its thread."""
        self._done = True
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
        self._join()

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> SyncEventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A stream dropped without close() must not leave its run going.
        self.close()
