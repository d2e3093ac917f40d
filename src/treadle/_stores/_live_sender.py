"""The thread that carries a feed's live events to other processes, off the run's path.

A run hands each live event to :meth:`LiveSender.put`, which appends it to
a bounded queue and returns: no I/O, no lock the sender holds while it
writes. The sender's thread drains the queue in batches and writes each
batch where other processes read it (``send``: a side SQLite file, a
PostgreSQL ``NOTIFY``). When it cannot keep up, or cannot reach its
medium, the oldest queued events are dropped: live events are best-effort,
and the run never waits for them.

The thread starts with the first event and is stopped by :meth:`close`
(the store's ``close``), which lets it send what is queued for up to a
few seconds (the last deltas of a run that just ended), then drops the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from treadle._stores._fork_gate import guard
from treadle._stores._live import dropping_queue

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from treadle._stores._events import EventEntry

logger = logging.getLogger("treadle.live")

SENDER_QUEUE = 10_000
"""Live events waiting for the sender before the oldest are dropped."""

_RETRY = 1.0
"""Seconds the sender waits after its medium failed before trying again."""

_GATHER = 0.01
"""Seconds the sender lets events gather after the first of a quiet spell: one write
for a burst of tokens rather than one each (a follower sees them that much later)."""


class LiveSender:
    """A thread writing queued live events in batches with ``send``; see the module.

    Args:
        send: Writes one batch of (run id, entry) pairs; raising drops the
            batch (logged at debug level) and the sender tries again with the
            next one after a pause.
        stop: Called on the sender's thread as it ends (closes its connection).
        name: The thread's name.
    """

    __slots__ = (
        "__weakref__",
        "_lock",
        "_name",
        "_queue",
        "_send",
        "_sending",
        "_stop",
        "_stopping",
        "_thread",
        "_wake",
    )

    def __init__(
        self,
        send: Callable[[Sequence[tuple[str, EventEntry]]], None],
        stop: Callable[[], None],
        name: str,
    ) -> None:
        self._send = send
        self._stop = stop
        self._name = name
        self._queue = dropping_queue(SENDER_QUEUE)
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # held while sending: a fork waits for it
        guard(self, self._sending)

    def put(self, run_id: str, entry: EventEntry) -> None:
        """Queue one live event for the sender (started by the first); never blocks."""
        if self._stopping:  # closed: nobody sends it
            return
        self._queue.append((run_id, entry))
        if self._thread is None:
            self._start()
        if not self._wake.is_set():  # set already: the sender will look (and set costs a lock)
            self._wake.set()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopping:
                thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                thread.start()
                self._thread = thread

    def _serve(self) -> None:
        queue, wake = self._queue, self._wake
        try:
            while not self._stopping or queue:
                if not queue:
                    wake.wait()
                    time.sleep(_GATHER)  # a stream's next events join this batch
                wake.clear()
                while queue:
                    batch = [queue.popleft() for _ in range(min(len(queue), 500))]
                    try:
                        with self._sending:
                            self._send(batch)
                    except Exception as error:  # noqa: BLE001 - best-effort: see the module
                        logger.debug("live events dropped (%d): %s", len(batch), error)
                        if self._stopping:  # closing: what is left goes too
                            queue.clear()
                        else:
                            time.sleep(_RETRY)
        finally:
            with self._sending:
                self._stop()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread once it has sent what is queued; after ``timeout`` s, leave it be.

        A daemon thread: one still sending when the process exits is dropped with it.
        """
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
