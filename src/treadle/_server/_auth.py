"""Who may use the server, and how much they may send: checked before any route runs.

One ASGI middleware, around every route (the page, its files,
``/openapi.json``, ``/api/...``), so that a route added later cannot be
forgotten:

* **Who.** Every request admitted carries an actor, kept as
  ``request.state.actor`` (:mod:`treadle._server._principals` names it):
  ``Authorization: Bearer`` with a named token, a signed-in person's
  session, or (only when nobody signs in) the server's own token. The
  page's cookie (``treadle_session`` for a signed-in person, else
  ``treadle_token``; HttpOnly, SameSite, Secure over https) admits only reads (GET, HEAD):
  another site can make a browser send the cookie with a form it posts,
  never the header, so a change authorized by the cookie alone would be a
  cross-site request forgery. ``GET /?token=T`` (the URL printed at start
  when nobody signs in) sets the cookie and redirects to ``/``, so the
  token leaves the address bar and the history. With sign-in, ``GET /``
  without a session goes to ``/auth/login``; the sign-in's own routes
  (``/auth/login``, ``/auth/callback``) are open. Anything else is 401.
  Whether the actor's role suffices is the route's to say
  (:mod:`treadle._server._endpoints`: 403).
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
* **The body's time.** A body must arrive within ``body_seconds`` of its
  first read, else 408 and the connection closes: a client trickling it a
  byte at a time holds a route (and what the route holds) no longer. What
  a route reads after the body (an event stream waiting for its client to
  leave) has no such bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.requests import cookie_parser

from treadle._server._json import error_body
from treadle._server._principals import TOKEN_COOKIE as COOKIE
from treadle._server._principals import bearer_credentials

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from treadle._server._principals import Principals
    from treadle._values._actors import Actor

OPEN_PATHS = frozenset({"/auth/login", "/auth/callback"})
"""The sign-in's own routes: reached before anyone is signed in."""

LINK_PATHS = "/answer/"
"""Answer links' routes (:mod:`treadle._server._routes_links`): the link in the path is
the credential, so they are reached without a token; ``request.state.actor``
is whoever is signed in (by the page's cookie or a bearer token, for a
change too), else ``None``."""

_READS = frozenset({"GET", "HEAD"})

DRAIN_BYTES = 8 * 1024 * 1024
"""The most of a refused body read and discarded so its sender can read the 413: 8 MiB."""

DRAIN_SECONDS = 5.0
"""The longest a refused body is read for before the connection is closed anyway."""


class BodyTooLargeError(Exception):
    """A request body passed the limit while streaming in (answered with 413)."""


class BodyTooSlowError(Exception):
    """A request body did not arrive in its time (answered with 408)."""


class AccessGuard:
    """The middleware described in the module docstring.

    Args:
        app: The application it guards.
        principals: Who a request's credentials name.
        max_body: The largest body, in bytes.
        body_seconds: How long a body may take to arrive, from its first read.
    """

    def __init__(
        self, app: ASGIApp, *, principals: Principals, max_body: int, body_seconds: float
    ) -> None:
        self.app = app
        self._principals = principals
        self._max_body = max_body
        self._body_seconds = body_seconds

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
        path = scope["path"]
        if "content-length" in headers and "transfer-encoding" in headers:
            # Which one ends the body? A proxy in front may have read the other, and what
            # this server took for the next request on the connection was hidden in a body.
            message = "a request has Content-Length or Transfer-Encoding, not both"
            await _send_json(send, 400, error_body("CommandError", message), _CLOSE)
            return
        if path == "/" and method in _READS and self._principals.sign_in is None:
            given = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("token")
            if given is not None:
                await self._sign_in(scope, given, send)
                return
        unsigned = path.startswith(LINK_PATHS) or path in OPEN_PATHS  # reached without a token
        if path.startswith(LINK_PATHS):  # the link is the credential; who is signed in narrows it
            found = await self._actor(scope, headers, "GET")
            scope.setdefault("state", {})["actor"] = None if isinstance(found, str) else found
        elif path not in OPEN_PATHS:
            found = await self._actor(scope, headers, method)
            if isinstance(found, str):
                if path == "/" and method in _READS and self._principals.sign_in is not None:
                    await _redirect(send, "/auth/login")
                    return
                await _send_json(send, 401, error_body("Unauthorized", found), _CHALLENGE)
                return
            state = scope.setdefault("state", {})
            state["actor"] = found
            # Who sent it, asked again: a long request (an event stream) ends once its
            # credential no longer admits it (a token revoked, a sign-in ended).
            state["readmit"] = functools.partial(self._actor, scope, headers, method)
        await self._with_body(scope, receive, send, headers, unsigned=unsigned)

    async def _with_body(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, bytes],
        *,
        unsigned: bool,
    ) -> None:
        """Run the app on the request's body, refused past its size or its time."""
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
        elif "transfer-encoding" in headers and not unsigned:
            # Streamed, from a caller the server knows: read it whole here, then hand it on.
            # Anyone may reach a link's or the sign-in's route: its body is counted as the
            # route reads it (a link that is no link is refused before any is read), so
            # nobody without a credential makes the server hold bodies.
            await self._buffered(scope, receive, send)
            return
        await self._guard_body(scope, receive, send)

    async def _actor(self, scope: Scope, headers: dict[str, bytes], method: str) -> Actor | str:
        """Who sent the request, or why it is refused (a sentence without the credential)."""
        cookies = cookie_parser(headers.get("cookie", b"").decode("latin-1"))
        served = getattr(scope["app"].state, "served", None)
        store = getattr(served, "store", None)
        authorization = headers.get("authorization")
        if authorization is not None:
            given = bearer_credentials(authorization.decode("latin-1"))
            if given is None:
                return "send the token as Authorization: Bearer <token>"
            # Which door only (the bearer is checked against the store below): no store read.
            page = not isinstance(await self._principals.cookie(cookies, None), str | None)
            return await self._principals.bearer(given, store, page=page)
        found = await self._principals.cookie(cookies, store)
        if found is None:
            if self._principals.sign_in is not None:
                return (
                    "sign in on the page, or send a named token (`treadle tokens create`) "
                    "as Authorization: Bearer <token>"
                )
            return (
                "this server needs its token: send Authorization: Bearer <token> "
                "(printed by `treadle serve` with the page's address)"
            )
        if isinstance(found, str):
            return found
        if method not in _READS:
            return (
                "a change needs the token in the Authorization header; "
                "the page's cookie alone authorizes only reads"
            )
        return found

    async def _sign_in(self, scope: Scope, given: str, send: Send) -> None:
        """``GET /?token=T``: set the cookie and send the browser to ``/``, the token gone."""
        if not self._principals.matches_server_token(given):
            message = "wrong token in the address: open the address `treadle serve` printed"
            await _send_json(send, 401, error_body("Unauthorized", message), _CHALLENGE)
            return
        cookie = f"{COOKIE}={given}; HttpOnly; SameSite=Strict; Path=/"
        if scope.get("scheme") == "https":  # also behind a proxy uvicorn trusts (docs/server.md)
            cookie += "; Secure"
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
        try:
            async with asyncio.timeout(self._body_seconds):
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
        except TimeoutError:
            await self._too_slow(send)
            return
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
        deadline: float | None = None

        async def counted() -> Message:
            nonlocal received, more, deadline
            if not more:  # the body is in: what follows (a disconnect) may take any time
                return await receive()
            if deadline is None:
                deadline = asyncio.get_running_loop().time() + self._body_seconds
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTooSlowError from None
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
        except BodyTooSlowError:
            if started:
                raise
            await self._too_slow(send)

    async def _too_slow(self, send: Send) -> None:
        """Answer 408 and close: the rest of the body is not waited for."""
        message = (
            f"the request body did not arrive within {self._body_seconds:g} seconds"
            " (send it whole, or faster)"
        )
        await _send_json(
            send, 408, error_body("RequestTimeout", message), [(b"connection", b"close")]
        )

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


_CHALLENGE = ((b"www-authenticate", b'Bearer realm="treadle"'),)
_CLOSE = ((b"connection", b"close"),)


async def _redirect(send: Send, location: str) -> None:
    """303 to ``location`` (the page, unsigned-in, goes to the sign-in)."""
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1")),
                (b"cache-control", b"no-store"),
                (b"content-length", b"0"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _send_json(
    send: Send,
    status: int,
    body: dict[str, object],
    headers: Sequence[tuple[bytes, bytes]] = (),
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
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": content, "more_body": more_body})
