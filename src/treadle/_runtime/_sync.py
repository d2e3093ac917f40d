"""Thin adapters for synchronous callers.

The async core does all the work; these run it on a dedicated thread with
its own event loop and hand results and events back to the caller's thread.
That also makes ``run_sync`` safe to call from inside a running event loop
(a notebook, a sync callback in async code), where ``asyncio.run`` is not.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator

    from treadle._runtime._events import WorkflowEvent
    from treadle._runtime._stream import WorkflowStream

T = TypeVar("T")


def run_in_thread(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` to completion on a fresh loop in a dedicated thread."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(make())))
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


def stream_in_thread(make: Callable[[], WorkflowStream]) -> Iterator[WorkflowEvent]:
    """Iterate a stream made by ``make()`` that runs on a dedicated thread.

    Events cross through a queue. Closing the iterator early (``break``)
    cancels the run on its thread and waits for that thread to end.
    """
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue()
    control: dict[str, Any] = {}
    ready = threading.Event()

    async def pump() -> None:
        control["loop"] = asyncio.get_running_loop()
        control["task"] = asyncio.current_task()
        ready.set()
        try:
            async with make() as events:
                async for event in events:
                    handoff.put(("event", event))
        except asyncio.CancelledError:
            handoff.put(("end", None))
            return
        except BaseException as error:  # noqa: BLE001 - handed over, never swallowed
            handoff.put(("error", error))
            return
        handoff.put(("end", None))

    thread = threading.Thread(target=lambda: asyncio.run(pump()), name="treadle-stream")
    thread.start()
    ready.wait()
    finished = False
    try:
        while True:
            kind, value = handoff.get()
            if kind == "event":
                yield value
                continue
            finished = True
            if kind == "error":
                raise value
            return
    finally:
        if not finished:
            control["loop"].call_soon_threadsafe(control["task"].cancel)
        thread.join()
