"""One webhook delivery: a signed POST that follows no redirect and can be cut off.

Why not ``urllib.request.urlopen`` as it comes:

* it follows redirects, and turns a POST answered 301, 302 or 303 into a
  GET without the body: a receiver redirecting to a page that answers 200
  had the message counted as delivered, though nobody received it. Here a
  redirect is an answer like an error status: the delivery failed, saying
  so, and is retried (the endpoint's URL should be the final one);
* its timeout bounds each read of the socket, not the answer: a receiver
  sending a byte every few seconds held a delivery, and its thread, for
  ever. Each delivery here keeps the sockets it opens (:class:`Wire`) so
  the sender, past its deadline, shuts them and the thread returns.

Proxies from the environment are honoured as by ``urlopen``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from treadle._stores._outbox import sign
from treadle._values._text import error_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from treadle._stores._outbox import Endpoint, OutboxMessage

TIMEOUT = 10.0
"""Seconds a delivery waits for the endpoint's answer, all reads together."""
_ANSWER_READ = 64 * 1024
"""Bytes of an endpoint's answer read before the connection is closed (only its status counts)."""


class Wire:
    """The sockets one delivery opened, so another thread can cut it off past its deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._cut = False

    def opened(self, sock: socket.socket) -> None:
        """Keep ``sock``; shut it at once when the delivery was cut off already."""
        with self._lock:
            self._sockets.append(sock)
            cut = self._cut
        if cut:
            _shut(sock)

    def cut(self) -> None:
        """Shut every socket of the delivery: its blocked read returns with an error."""
        with self._lock:
            self._cut = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _kept(http_class: Callable[..., http.client.HTTPConnection], wire: Wire) -> Callable[..., Any]:
    """``http_class``, whose connections hand each socket they open to ``wire``."""

    def made(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = http_class(host, **kwargs)
        hooked: Any = connection  # http.client's one hook is private, so untyped
        create = hooked._create_connection  # noqa: SLF001

        def create_kept(*args: Any, **more: Any) -> socket.socket:
            sock: socket.socket = create(*args, **more)
            wire.opened(sock)
            return sock

        hooked._create_connection = create_kept  # noqa: SLF001
        return connection

    return made


class _Keeping(urllib.request.AbstractHTTPHandler):
    """A handler whose connections hand their sockets to ``wire``."""

    def __init__(self, wire: Wire) -> None:
        super().__init__()
        self.wire = wire

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_kept(http_class, self.wire), req, **kwargs)


class _KeptHTTP(_Keeping, urllib.request.HTTPHandler):
    pass


class _KeptHTTPS(_Keeping, urllib.request.HTTPSHandler):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is the receiver's answer, not a way to it: urllib then raises ``HTTPError``."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


def post(
    message: OutboxMessage,
    endpoint: Endpoint,
    extra: dict[str, Any] | None = None,
    wire: Wire | None = None,
) -> str | None:
    """POST the message to the endpoint, signed; ``None`` when it answered 2xx, else why not.

    ``extra``: more fields for the body's ``data`` (a request's answer link).
    ``wire``: where the sockets opened are kept, for the caller to cut.
    """
    payload = message.payload()
    payload["data"].update(extra or {})
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    headers = {
        "content-type": "application/json",
        "user-agent": "treadle-webhooks",
        "webhook-id": message.webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(endpoint.secret, message.webhook_id, timestamp, body),
    }
    request = urllib.request.Request(endpoint.url, data=body, headers=headers, method="POST")  # noqa: S310 - http(s) only, checked when the endpoint was added
    wire = wire or Wire()
    opener = urllib.request.build_opener(_KeptHTTP(wire), _KeptHTTPS(wire), _NoRedirect())
    try:
        with opener.open(request, timeout=TIMEOUT) as answer:
            answer.read(_ANSWER_READ)  # its status is the answer; a body may be endless
    except urllib.error.HTTPError as error:
        if 300 <= error.code < 400:  # noqa: PLR2004 - the redirect statuses
            where = error.headers.get("location") if error.headers else None
            return f"HTTP {error.code}: a redirect (to {where!r}), not followed"
        return f"HTTP {error.code}"
    except (OSError, ValueError, http.client.HTTPException) as error:
        return error_text(error)
    return None
