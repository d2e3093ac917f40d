"""Worker threads for plain ``def`` handlers that may be abandoned.

Python cannot stop a thread. A plain ``def`` handler that overruns its
``timeout`` fails on time all the same: the runner stops waiting for it and
*abandons* its thread, which runs on until the handler returns, in a
context that is discarded, so nothing it does late is ever committed (see
``_engine/_context.py`` for its events).

Such a thread must be one nobody waits for. The event loop's default
executor is joined by ``asyncio.run`` on its way out (``run_sync`` and
``stream_sync`` end that way) and by the interpreter at exit, so a hung
handler there would hold up the caller until it returned: the timeout would
only be reported then. A handler with a timeout therefore runs on a daemon
thread of its own, started per attempt and never joined.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


def in_daemon_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """Call ``fn`` on a new daemon thread, in a copy of the current context.

    Returns a future of the running loop with its result or exception.
    Cancelling the future abandons the thread: it runs on, and its outcome
    is dropped (also once the loop has closed).
    """
    outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def work() -> None:
        if not outcome.set_running_or_notify_cancel():
            return
        try:
            result = context.run(fn)
        except BaseException as error:  # noqa: BLE001 - handed to whoever awaits the future
            outcome.set_exception(error)
        else:
            outcome.set_result(result)

    threading.Thread(target=work, name="treadle-handler", daemon=True).start()
    return asyncio.wrap_future(outcome)
