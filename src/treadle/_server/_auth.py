"""Who may use the server, and how much they may send: checked before any route runs.

One ASGI middleware, around every route (the page, its files,
``/openapi.json``, ``/api/...``), so that a route added later cannot be
forgotten:

* **The token.** ``Authorization: Bearer T`` admits any request. The
  page's cookie (``treadle_token``, HttpOnly, SameSite=Strict) admits only
  reads (GET, HEAD): another site can make a browser send the cookie with a
  form it posts, never the header, so a change authorized by the cookie
  alone would be a cross-site request forgery. ``GET /?token=T`` (the URL
  printed at start) sets the cookie and redirects to ``/``, so the token
  leaves the address bar and the history. Anything else is 401.
* **The body.** A declared ``Content-Length`` over the limit is refused
  with 413 before a byte is read; a body sent without one (chunked) is
  read here as it streams in, refused the moment it passes the limit, and
  handed on whole, so that every route refuses it, also one that would
  never read a body. A body that runs past its declared length is counted
  too.
* **The 413 is readable.** Most clients (urllib, ``http.client``,
  ``requests``) send the whole body before they read a response; closing
  the connection on a body still arriving makes their kernel meet a reset,
  and they report "connection reset" or "broken pipe" instead of the 413.
  So the 413 is sent at once, the rest of the body is read and discarded,
  and only then is the connection closed (RFC 9112 §9.6) — within a bound,
  :data:`DRAIN_BYTES` and :data:`DRAIN_SECONDS`, so that an endless body
  is cut off. A client that sent ``Expect: 100-continue`` has sent nothing
  yet: it reads the 413 instead of sending, and nothing is drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.requests import cookie_parser

from treadle._server._json import error_body

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "treadle_token"
"""The page's cookie: it holds the token, for reads only."""

_READS = frozenset({"GET", "HEAD"})

DRAIN_BYTES = 8 * 1024 * 1024
"""The most of a refused body read and discarded so its sender can read the 413: 8 MiB."""

DRAIN_SECONDS = 5.0
"""The longest a refused body is read for before the connection is closed anyway."""


class BodyTooLargeError(Exception):
    """A request body passed the limit while streaming in (answered with 413)."""


class AccessGuard:
    """The middleware described in the module docstring.

    Args:
        app: The application it guards.
        token: The server's token.
        max_body: The largest body, in bytes.
    """

    def __init__(self, app: ASGIApp, *, token: str, max_body: int) -> None:
        self.app = app
        self._token = token.encode()
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Admit, redirect or refuse one request (lifespan events pass through)."""
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket routes: refuse without reading anything
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        method = scope["method"]
        if scope["path"] == "/" and method in _READS:
            given = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("token")
            if given is not None:
                await self._sign_in(given, send)
                return
        refusal = self._refusal(headers, method)
        if refusal is not None:
            await _send_json(send, 401, error_body("Unauthorized", refusal), _CHALLENGE)
            return
        declared = headers.get("content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                await _send_json(send, 400, error_body("CommandError", "bad Content-Length"))
                return
            if length > self._max_body:
                # Nothing read yet: a client expecting 100-continue sends nothing now, and
                # past the drain's bound the sender meets a reset however long it is read.
                expecting = headers.get("expect", b"").lower() == b"100-continue"
                drain = not expecting and length <= DRAIN_BYTES
                await self._too_large(send, receive if drain else None)
                return
        elif "transfer-encoding" in headers:  # streamed: read it whole here, then hand it on
            await self._buffered(scope, receive, send)
            return
        await self._guard_body(scope, receive, send)

    def _matches(self, given: str | bytes) -> bool:
        raw = given.encode("latin-1", "replace") if isinstance(given, str) else given
        return hmac.compare_digest(raw, self._token)

    def _refusal(self, headers: dict[str, bytes], method: str) -> str | None:
        """Why the request is refused, or ``None`` when it is admitted."""
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, credentials = authorization.partition(b" ")
            if scheme.lower() == b"bearer" and self._matches(credentials.strip()):
                return None
            return "wrong token: send the token `treadle serve` printed, as Authorization: Bearer"
        cookie = cookie_parser(headers.get("cookie", b"").decode("latin-1")).get(COOKIE)
        if cookie is None:
            return (
                "this server needs its token: send Authorization: Bearer <token> "
                "(printed by `treadle serve` with the page's address)"
            )
        if not self._matches(cookie):
            return "wrong token in the page's cookie: open the address `treadle serve` printed"
        if method not in _READS:
            return (
                "a change needs the token in the Authorization header; "
                "the page's cookie alone authorizes only reads"
            )
        return None

    async def _sign_in(self, given: str, send: Send) -> None:
        """``GET /?token=T``: set the cookie and send the browser to ``/``, the token gone."""
        if not self._matches(given):
            message = "wrong token in the address: open the address `treadle serve` printed"
            await _send_json(send, 401, error_body("Unauthorized", message), _CHALLENGE)
            return
        cookie = f"{COOKIE}={self._token.decode()}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", b"/"),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"cache-control", b"no-store"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def _buffered(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read a streamed body up to the limit (refusing it past that), then run the app on it.

        Every route is refused an oversized body this way, also one that
        would never read it.
        """
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nobody to answer
                return
            body += message.get("body", b"")
            if len(body) > self._max_body:
                more = message.get("more_body", False)
                await self._too_large(send, receive if more else None)
                return
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # what follows the body: a disconnect
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _guard_body(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app, counting the body's bytes as they arrive."""
        received = 0
        started = False

        more = True

        async def counted() -> Message:
            nonlocal received, more
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                more = message.get("more_body", False)
                if received > self._max_body:
                    raise BodyTooLargeError
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLargeError:
            if started:  # cannot happen with routes that read first; nothing more to say
                raise
            await self._too_large(send, receive if more else None)

    async def _too_large(self, send: Send, unread: Receive | None) -> None:
        """Answer 413, drain the rest of the body from ``unread`` (module docstring), close."""
        message = f"the request body is larger than {self._max_body} bytes, the most this accepts"
        await _send_json(
            send,
            413,
            error_body("PayloadTooLarge", message),
            [(b"connection", b"close")],
            more_body=unread is not None,
        )
        if unread is not None:
            await _drain(unread)
            await send({"type": "http.response.body", "body": b""})  # the server closes now


async def _drain(receive: Receive) -> None:
    """Read and discard the rest of a body: at most :data:`DRAIN_BYTES`, :data:`DRAIN_SECONDS`."""
    drained = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while drained <= DRAIN_BYTES:
                message = await receive()
                if message["type"] != "http.request":  # the client left
                    return
                drained += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return


_CHALLENGE = [(b"www-authenticate", b'Bearer realm="treadle"')]


async def _send_json(
    send: Send,
    status: int,
    body: dict[str, object],
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    more_body: bool = False,
) -> None:
    content = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
                (b"cache-control", b"no-store"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": content, "more_body": more_body})
