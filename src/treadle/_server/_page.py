"""The web page ``treadle serve`` serves at ``/``: one HTML document and its static files.

The page is a thin client of the JSON API (``/api/...``): plain HTML, CSS and
JavaScript modules from ``page/``, no build step and nothing fetched from
elsewhere. The server's access check has already admitted every request
that reaches these routes (by the ``Authorization`` header or, for GET, the
cookie). The page itself can read neither the HttpOnly cookie nor the URL
it came from, so the token is written into the document as
``<meta name="treadle-token">``: its scripts send it back as the
``Authorization`` header, the only thing that authorizes a change (another
site can make a browser send the cookie, never the header). That is also why
the document must never be cached or framed, and why its Content Security
Policy admits only this server's own scripts and styles.
"""

from __future__ import annotations

import html
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from treadle._server._endpoints import actor_of
from treadle._server._principals import SESSION_COOKIE
from treadle._server._state import served_of
from treadle._stores._tokens import SERVER_TOKEN_NAME

if TYPE_CHECKING:
    from starlette.requests import Request

PAGE_DIR = Path(__file__).parent / "page"
"""Where the page's template (``index.html``) and static files (``static/``) live."""

_PLACEHOLDER = "{{token}}"

_HEADERS = MappingProxyType(
    {
        # The document holds the token: never stored, never framed, never leaked by a link.
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
    }
)


def routes() -> list[BaseRoute]:
    """The page's routes: ``GET /`` (the document) and ``/static/...`` (its files)."""
    return [
        Route("/", _index, methods=["GET", "HEAD"], name="page"),
        Mount("/static", app=StaticFiles(directory=PAGE_DIR / "static"), name="static"),
    ]


@cache
def _template() -> str:
    return (PAGE_DIR / "index.html").read_text(encoding="utf-8")


def _token_of(request: Request) -> str:
    """The page's credential for its scripts' changes: the session, or the server's token.

    A signed-in person's page carries their signed session (the cookie's
    value); without sign-in, the server's token, only to whoever sent that
    token. A page fetched with a named token carries none (its changes need
    that token): it carried the server's, so a viewer's token read the
    admin's from the page.
    """
    session = request.cookies.get(SESSION_COOKIE)
    actor = actor_of(request)
    if session is not None and actor.kind == "user":
        return session
    settings = served_of(request).settings
    holds_it = actor.kind == "token" and actor.name == SERVER_TOKEN_NAME
    return settings.token if settings.sign_in is None and holds_it else ""


async def _index(request: Request) -> HTMLResponse:
    """The page, with the token as a meta tag for its scripts' Authorization header."""
    body = _template().replace(_PLACEHOLDER, html.escape(_token_of(request), quote=True))
    return HTMLResponse(body, headers=_HEADERS)
