"""How ``treadle serve`` serves, as one frozen, checked value.

Everything the command line says about the server (where the runs are,
which workflows it serves, where it listens, its token and limits) travels
as one :class:`ServerSettings`, checked where it is made, so a bad value is
refused before anything is opened or bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from treadle._server._identity import SignIn

DEFAULT_HOST = "127.0.0.1"
"""Where the server listens unless told otherwise: this machine only."""

DEFAULT_PORT = 8420
"""The server's port unless told otherwise."""

DEFAULT_MAX_BODY = 1024 * 1024
"""The largest request body the server reads: 1 MiB."""

DEFAULT_BODY_SECONDS = 30.0
"""How long a request body may take to arrive, from its first read: 30 seconds."""

# A token goes into a header, a cookie and a URL unchanged: RFC 7235's token68
# characters (no spaces, quotes, semicolons or commas) keep all three safe.
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{8,512}")


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What ``treadle serve`` was told.

    Attributes:
        token: The secret every request must carry (``Authorization: Bearer``,
            or for reads the page's cookie).
        apps: The ``--app`` paths of the workflows it serves (one that does
            not load stops the server before it starts).
        definitions: The definition files of its ``--definitions`` folders
            (one that does not load is reported and left out; the others are served).
        store: The store's URL (``None``: ``TREADLE_STORE``, else the default file).
        host: The address it listens on.
        port: Its port (0: any free one, chosen when it binds).
        max_body: The largest request body, in bytes.
        body_seconds: How long a request body may take to arrive (408 past it), so
            a client that sends it a byte at a time holds its route no longer.
        send_seconds: How long an event stream waits for its client to take what
            it sends before it lets the client go: one that reads nothing held the
            events it was sent (a whole commit's, however large) for ever.
        poll_interval: Seconds between the SQLite timer service's looks for due runs.
        event_poll: Seconds between an event stream's looks for new events.
        sign_in: How people sign in (``None``: nobody does, and whoever holds
            ``token`` is an admin).
    """

    token: str
    apps: tuple[str, ...] = ()
    definitions: tuple[str, ...] = ()
    store: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body: int = DEFAULT_MAX_BODY
    body_seconds: float = DEFAULT_BODY_SECONDS
    send_seconds: float = 30.0
    poll_interval: float = 1.0
    event_poll: float = 0.25
    sign_in: SignIn | None = None

    def __post_init__(self) -> None:
        """Refuse values no server could run with.

        Raises:
            ValueError: The token is too short, too long or holds characters
                a header or cookie cannot carry; a limit or interval is not
                positive; the port is out of range.
        """
        if not _TOKEN.fullmatch(self.token):
            msg = (
                "the token must be 8 to 512 characters of letters, digits and . _ ~ + / = -"
                " (it travels in a header, a cookie and a URL)"
            )
            raise ValueError(msg)
        if not 0 <= self.port <= 65535:  # noqa: PLR2004 - the port range
            msg = f"the port must be 0 to 65535, not {self.port}"
            raise ValueError(msg)
        if self.max_body < 1:
            msg = f"the body limit must be at least 1 byte, not {self.max_body}"
            raise ValueError(msg)
        for name in ("poll_interval", "event_poll", "body_seconds", "send_seconds"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                msg = f"{name} must be a positive number of seconds, not {value}"
                raise ValueError(msg)

    def page_url(self, port: int | None = None) -> str:
        """The page's address, as printed at start (``port``: the bound one).

        With the token when nobody signs in; else bare (the page sends
        people to sign in).
        """
        host = self.host
        if host in ("0.0.0.0", "::", ""):  # noqa: S104 - naming it, not binding it
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        base = f"http://{host}:{port if port is not None else self.port}/"
        return base if self.sign_in is not None else f"{base}?token={quote(self.token)}"
