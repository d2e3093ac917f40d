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
    caller's context variables (its current span among them). Interrupted
    while it waits (Ctrl-C, a notebook's "interrupt"), the caller cancels
    the run and waits for it to stop before raising: it does not go on,
    unseen, on its thread.
    """
    outcome: list[Any] = []
    context = contextvars.copy_context()
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - asyncio.run runs it as a task
        running.append((asyncio.get_running_loop(), task))
        return await make()

    def target() -> None:
        try:
            outcome.append((True, context.run(lambda: asyncio.run(main()))))
        except BaseException as error:  # noqa: BLE001 - handed over, never swallowed
            outcome.append((False, error))

    thread = threading.Thread(target=target, name="treadle-run", daemon=True)
    thread.start()
    try:
        thread.join()
    except BaseException:
        for loop, task in running:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
        thread.join()
        raise
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


class SyncEventStream:
    """A run's events for synchronous code, driven on a dedicated thread.

    Iterate it; use it in a ``with`` block (or call :meth:`close`) so that
    leaving early cancels the run and joins its thread. A stream dropped
    without either (``for event in workflow.stream_sync(...): ... break``)
    does the same once it is collected: its thread holds what it pumps, not
    the stream, so dropping the stream is enough. Closing a stream whose run
    has finished does nothing. The run sees the context variables (the
    current span among them) of the code that created the stream.
    """

    def __init__(self, make: Callable[[], WorkflowStream]) -> None:
        self._pump = _Pump(make)
        self._done = False

    def __iter__(self) -> Iterator[WorkflowEvent]:
        return self

    def __next__(self) -> WorkflowEvent:
        if self._done:
            raise StopIteration
        pump = self._pump
        pump.start()
        kind, value = pump.queue.get()
        if kind == "event":
            event: WorkflowEvent = value
            return event
        self._done = True
        pump.join()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        """Cancel the run if it is still going, and wait for its thread."""
        self._done = True
        self._pump.stop()

    def __enter__(self) -> SyncEventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A stream dropped without close() must not leave its run going.
        self.close()


class _Pump:
    """The thread and loop behind a :class:`SyncEventStream`, and the queue between them.

    Kept apart from the stream so that the thread, which holds this, does
    not keep the stream alive: the stream's collection is what stops a run
    its caller dropped.
    """

    def __init__(self, make: Callable[[], WorkflowStream]) -> None:
        self.make = make
        # Taken here, not at the first iteration: the stream starts where
        # ``stream_sync`` is called, as an ``async with workflow.stream(...)`` does.
        self.context = contextvars.copy_context()
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[None] | None = None
        self.started = threading.Event()

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.started.set()
        try:
            async with self.make() as events:
                async for event in events:
                    self.queue.put(("event", event))
        except asyncio.CancelledError:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            self.queue.put(("error", error))
            return
        self.queue.put(("end", None))

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(
                target=lambda: self.context.run(lambda: asyncio.run(self.run())),
                name="treadle-stream",
                daemon=True,
            )
            self.thread.start()
            self.started.wait()

    def stop(self) -> None:
        loop, task = self.loop, self.task
        if loop is not None and task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
        self.join()

    def join(self) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()
