"""``GET /metrics`` on a port of its own: how ``treadle worker`` is scraped.

A worker serves no HTTP API, so its metrics get the smallest server that
Prometheus can scrape: asyncio's, in the worker's own event loop (the
store's gauges are read there, on the worker's connection pool), one
request per connection, ``GET /metrics`` and nothing else. It binds
127.0.0.1 unless told otherwise: it has no access rules of its own, so
reaching it from elsewhere is a choice made by whoever sets the address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING

from treadle._exceptions import CommandError
from treadle._operations._prometheus import CONTENT_TYPE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from treadle._operations._prometheus import PrometheusMetrics

_logger = logging.getLogger("treadle.worker")

_HEAD_LIMIT = 16 * 1024
"""The most of a request's head read: a scraper sends a few hundred bytes."""

_READ_SECONDS = 10.0
"""How long a connection may take to send its request."""


@contextlib.asynccontextmanager
async def metrics_endpoint(
    exposed: PrometheusMetrics, host: str, port: int
) -> AsyncIterator[tuple[str, int]]:
    """Serve ``GET /metrics`` on ``host:port`` while the block runs; yield the bound address.

    Raises:
        CommandError: The address cannot be bound (in use, not this host's).
    """

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body, kind = await _respond(exposed, head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, body, kind = "400 Bad Request", b"bad request\n", "text/plain"
        except Exception:
            _logger.exception("metrics: the scrape failed")
            status, body, kind = "500 Internal Server Error", b"scrape failed\n", "text/plain"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    try:
        server = await asyncio.start_server(answer, host, port, limit=_HEAD_LIMIT)
    except OSError as error:  # in use, not this host's address, no such host
        # The system's word for it (asyncio wraps it in a sentence of its own); a host
        # name that does not resolve has its resolver's.
        code = error.errno or 0
        reason = os.strerror(code) if code > 0 else (error.strerror or str(error))
        msg = f"cannot serve metrics on {host}:{port}: {reason}"
        raise CommandError(msg) from None
    bound = server.sockets[0].getsockname()
    _logger.info("metrics on http://%s:%d/metrics", bound[0], bound[1])
    try:
        yield bound[0], bound[1]
    finally:
        server.close()
        await server.wait_closed()


async def _respond(exposed: PrometheusMetrics, head: bytes) -> tuple[str, bytes, str]:
    """The status, body and media type answering one request's head."""
    method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
    path = rest.split(" ", 1)[0].split("?", 1)[0]
    if path != "/metrics":
        return "404 Not Found", b"only /metrics is served here\n", "text/plain"
    if method not in {"GET", "HEAD"}:
        return "405 Method Not Allowed", b"GET /metrics\n", "text/plain"
    body = await exposed.scrape()
    return "200 OK", b"" if method == "HEAD" else body, CONTENT_TYPE
