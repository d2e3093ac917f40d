"""Who a request's credentials name: every request the server admits carries an actor.

The access guard (:mod:`treadle._server._auth`) asks :class:`Principals`
for the actor of a request's ``Authorization: Bearer`` header or, for
reads, of the page's cookie, and keeps it as ``request.state.actor``
(see :mod:`treadle._server._identity` for the kinds of principal). A
request that came from the page (it carries the page's cookie) comes in by
the door ``page``; any other by ``api``. Nothing here ever puts a
credential into a message: a refusal says which kind was wrong, not what
was sent.
"""

from __future__ import annotations

import hmac
import time
from typing import TYPE_CHECKING

from treadle._server._identity import SESSION_PREFIX, Sessions
from treadle._stores._tokens import SERVER_TOKEN_NAME, TokenKeeper, token_hash
from treadle._values._actors import Actor, Role

if TYPE_CHECKING:
    from treadle._server._identity import SignIn

TOKEN_COOKIE = "treadle_token"  # noqa: S105 - a cookie's name
"""The page's cookie without sign-in: it holds the server's token, for reads only."""

SESSION_COOKIE = "treadle_session"
"""The page's cookie of a signed-in person: their signed session, for reads only."""

NAMED_PREFIX = "tdl_"
"""What a named API token starts with (``treadle tokens create``)."""


def bearer_credentials(authorization: str) -> str | None:
    """What an ``Authorization`` header's value carries as ``Bearer`` (any case), else ``None``."""
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


class Principals:
    """The server's ways to name who sent a request.

    Args:
        token: The server's own token (it admits only without sign-in).
        sign_in: How people sign in (``None``: nobody does).
        sessions: The signer of signed-in people's sessions.
    """

    def __init__(self, *, token: str, sign_in: SignIn | None, sessions: Sessions) -> None:
        self._token = token.encode()
        self.sign_in = sign_in
        self.sessions = sessions

    def server_actor(self, door: str) -> Actor:
        """Whoever holds the server's token: an admin (only when nobody signs in)."""
        return Actor("token", SERVER_TOKEN_NAME, door, Role.ADMIN)

    def matches_server_token(self, given: str | bytes) -> bool:
        """Whether ``given`` is the server's own token, and it admits anyone (no sign-in)."""
        if self.sign_in is not None:
            return False
        raw = given.encode("latin-1", "replace") if isinstance(given, str) else given
        return hmac.compare_digest(raw, self._token)

    async def bearer(self, given: str, keeper: object, *, page: bool) -> Actor | str:
        """The actor an ``Authorization: Bearer`` credential names, or why it names none."""
        door = "page" if page else "api"
        if given.startswith(SESSION_PREFIX):
            actor = await self.sessions.actor(given, "page", keeper)
            return actor or "your session has ended or is not this server's: sign in again"
        if given.startswith(NAMED_PREFIX) and isinstance(keeper, TokenKeeper):
            return await self._named(given, keeper, door)
        if self.matches_server_token(given):
            return self.server_actor(door)
        if self.sign_in is not None:
            return (
                "wrong token: send a named token (`treadle tokens create`) as "
                "Authorization: Bearer, or sign in on the page"
            )
        return "wrong token: send the token `treadle serve` printed, as Authorization: Bearer"

    async def _named(self, given: str, keeper: TokenKeeper, door: str) -> Actor | str:
        found = await keeper.find_token(token_hash(given))
        if found is None:
            return "wrong token: no token of this server has this value"
        refusal = found.refusal(time.time())
        if refusal is not None:
            return f"{refusal}: ask an admin for a new one"
        await keeper.note_token_use(found.name)
        return Actor("token", found.name, door, Role.parse(found.role))

    async def cookie(self, cookies: dict[str, str], keeper: object) -> Actor | str | None:
        """The actor of the page's cookie (reads only), why it names none, or ``None`` (none).

        ``keeper`` is the store, which says whether a session was signed out
        (``None``: by its signature alone, to tell the page's door only).
        """
        session = cookies.get(SESSION_COOKIE)
        if session is not None:
            actor = await self.sessions.actor(session, "page", keeper)
            if actor is not None:
                return actor
            if TOKEN_COOKIE not in cookies:
                return "your session has ended or is not this server's: sign in again"
        token = cookies.get(TOKEN_COOKIE)
        if token is None:
            return None
        if self.matches_server_token(token):
            return self.server_actor("page")
        return "wrong token in the page's cookie: open the address `treadle serve` printed"
