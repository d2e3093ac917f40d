"""What ``treadle serve`` holds for a client that connects and does not ask: a bounded wait.

uvicorn keeps a connection that sends no request, or half a request line,
for as long as the client keeps it open, and takes every connection
offered: a client holding a few thousand open used up the process's file
descriptors, every other request then timing out, and the accept loop
logging ``Too many open files`` several hundred thousand times a minute.
So ``treadle serve`` speaks HTTP/1.1 through :func:`guarded_protocol`,
uvicorn's own h11 protocol with two limits:

* a connection gets ``--headers-timeout`` seconds (:data:`HEADERS_TIMEOUT`)
  to send a request's line and headers (each request of a kept-alive
  connection too; a body has the server's own body timeout), and is
  closed otherwise;
* past ``--max-connections`` open connections, a new one is closed at
  once: those already open are served, and the file descriptors never run
  out. By default the limit is half of what the process may open
  (``RLIMIT_NOFILE``), at most :data:`MOST_CONNECTIONS`, so the store's
  files and connections always have room.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import asyncio

HEADERS_TIMEOUT = 10.0
"""Seconds a connection has to send a request's line and headers."""

MOST_CONNECTIONS = 10_000
"""The most connections served at once, whatever the process may open."""

_FEWEST = 64

logger = logging.getLogger("treadle.serve")


def connection_limit() -> int:
    """How many connections to serve at once: half the descriptors the process may open."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # Windows: no such limit to read
        return MOST_CONNECTIONS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MOST_CONNECTIONS
    return max(_FEWEST, min(MOST_CONNECTIONS, soft // 2))


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What a connection may hold of the server: ``--max-connections``, ``--headers-timeout``.

    Attributes:
        most: Connections served at once (``None``: :func:`connection_limit`'s).
        headers_timeout: Seconds each request's line and headers have to arrive.
    """

    most: int | None = None
    headers_timeout: float = HEADERS_TIMEOUT


def guarded_protocol(limits: ConnectionLimits) -> type[Any]:
    """The h11 protocol of uvicorn, closing slow or surplus connections (see the module doc)."""
    limit = limits.most or connection_limit()
    headers_timeout = limits.headers_timeout

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _shed = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limit:
                if not Guarded._shed:  # said once per crowd, not once per connection
                    logger.warning("over %d connections: closing new ones until some end", limit)
                    Guarded._shed = True
                transport.close()
                return
            Guarded._shed = False
            self._wait_for_headers()

        def data_received(self, data: bytes) -> None:
            waiting = self.cycle
            super().data_received(data)
            if self.cycle is not waiting and self._deadline is not None:  # a request came
                self._deadline.cancel()
                self._deadline = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._wait_for_headers()  # the next request of a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _wait_for_headers(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(headers_timeout, self._too_slow)

        def _too_slow(self) -> None:
            self._deadline = None
            if self.cycle is None or self.cycle.response_complete:  # no request under way
                self.transport.close()

    return Guarded
