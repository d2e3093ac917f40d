"""``treadle serve``: the HTTP API and the web page, until SIGTERM or Ctrl-C.

The command only gathers its options into a
:class:`~treadle._server._settings.ServerSettings`, binds the socket
(so ``--port 0`` gets a free port, named in the printed address), prints the
page's address with the token (as Jupyter does) and runs uvicorn. The
server itself is :mod:`treadle._server`; like ``treadle worker`` on SQLite
it is the store file's timer service while it runs, and stopping it leaves
the runs it was advancing as last committed (``treadle resume`` or the next
server or worker takes them up).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
import secrets
import signal
import socket
from pathlib import Path  # noqa: TC003 - typer reads the annotation
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from treadle._cli._execute import execute, execute_sync, refuse
from treadle._cli._flags import StoreOption  # noqa: TC001 - typer reads annotations at run time
from treadle._cli._help import command_set
from treadle._cli._serve import first_contact
from treadle._cli._views import err, out
from treadle._extras import needs_extra

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from treadle._cli._serve_guard import ConnectionLimits

cli = command_set()

_HELP_APP = "pkg.module (every workflow in it), pkg.module:workflow or path/app.py[:workflow]."
_HELP_TOKEN = "The access token (default: TREADLE_TOKEN, else a new one, printed)."  # noqa: S105 - help text


def definition_files(apps: list[str], folders: list[Path]) -> tuple[str, ...]:
    """The definition files of each ``--definitions`` folder, by name (something must be served)."""
    found: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            refuse(f"--definitions {folder}: not a folder")
        found += sorted(str(f) for f in folder.iterdir() if f.suffix in {".yaml", ".yml", ".json"})
    if not found and not apps:
        refuse("name what to serve: --app pkg.module, or --definitions FOLDER")
    return tuple(found)


@cli.command("serve")
def serve(
    apps: Annotated[list[str] | None, typer.Option("--app", help=_HELP_APP)] = None,
    definitions: Annotated[
        list[Path] | None,
        typer.Option("--definitions", help="A folder: serve every definition file in it."),
    ] = None,
    store: StoreOption = None,
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on (this machine only by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0: any free one).")
    ] = 8420,
    token: Annotated[
        str | None, typer.Option("--token", envvar="TREADLE_TOKEN", help=_HELP_TOKEN)
    ] = None,
    max_body: Annotated[
        int, typer.Option("--max-body", min=1, help="The largest request body, in bytes.")
    ] = 1024 * 1024,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout", min=0.01, help="Seconds a request body may take to arrive (408)."
        ),
    ] = 30.0,
    send_timeout: Annotated[
        float,
        typer.Option(
            "--send-timeout",
            min=0.01,
            help="Seconds an event stream waits for its client to read before letting it go.",
        ),
    ] = 30.0,
    headers_timeout: Annotated[
        float,
        typer.Option(
            "--headers-timeout",
            min=0.01,
            help="Seconds a connection has to send a request's line and headers (then closed).",
        ),
    ] = 10.0,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections",
            min=1,
            help="Connections served at once; past it new ones are closed"
            " (default: half the files this process may open, at most 10,000).",
        ),
    ] = None,
    poll_interval: Annotated[
        float,
        typer.Option("--poll-interval", min=0.01, help="Seconds between looks for due runs."),
    ] = 1.0,
    identity: Annotated[
        Path | None,
        typer.Option("--identity", help="A TOML file: [oidc] sign-in and [roles] (see docs)."),
    ] = None,
    oidc_issuer: Annotated[
        str | None, typer.Option("--oidc-issuer", help="Sign people in with this provider.")
    ] = None,
    oidc_client_id: Annotated[
        str | None, typer.Option("--oidc-client-id", help="This server's client id there.")
    ] = None,
    oidc_client_secret: Annotated[
        str | None,
        typer.Option(
            "--oidc-client-secret",
            envvar="TREADLE_OIDC_CLIENT_SECRET",
            help="Its client secret (default: TREADLE_OIDC_CLIENT_SECRET).",
        ),
    ] = None,
    oidc_scopes: Annotated[
        str | None,
        typer.Option("--oidc-scopes", help="The scopes asked for (default: openid profile email)."),
    ] = None,
    oidc_roles: Annotated[
        list[str] | None,
        typer.Option("--oidc-role", help="ROLE=USER or ROLE=group:GROUP (repeatable)."),
    ] = None,
) -> None:
    """Serve the HTTP API and the web page for people who operate and approve runs.

    Every request needs the token (printed with the page's address when none
    is given): as `Authorization: Bearer TOKEN`, or, for the page's reads, the
    cookie it sets. On SQLite this process also runs the file's runs and
    wakes their timers (as `treadle worker` does); on PostgreSQL `treadle
    worker`s run them and this process queues and delivers.
    """
    try:
        from treadle._server._app import create_app  # noqa: PLC0415 - the server extra
        from treadle._server._identity import read_sign_in  # noqa: PLC0415
        from treadle._server._json import Redactor  # noqa: PLC0415
        from treadle._server._settings import ServerSettings  # noqa: PLC0415
    except ImportError as error:
        refuse(escape(needs_extra("treadle serve", "server", error)))
    try:
        sign_in = read_sign_in(
            identity,
            issuer=oidc_issuer,
            client_id=oidc_client_id,
            client_secret=oidc_client_secret,
            scopes=oidc_scopes,
            role_rules=oidc_roles or (),
        )
        if sign_in is not None and token is not None:
            refuse(
                "with sign-in configured the server takes no shared token (--token, "
                "TREADLE_TOKEN): give programs named tokens (`treadle tokens create`)"
            )
        settings = ServerSettings(
            sign_in=sign_in,
            token=token or secrets.token_urlsafe(32),
            apps=tuple(apps or ()),
            definitions=definition_files(apps or [], definitions or []),
            store=store,
            host=host,
            port=port,
            max_body=max_body,
            body_seconds=body_timeout,
            send_seconds=send_timeout,
            poll_interval=poll_interval,
        )
    except ValueError as error:
        refuse(str(error))
    # A store no retry can mend is refused now, before the server says where it serves.
    execute(store, first_contact, creates=True)
    application = execute_sync(lambda: create_app(settings))
    for problem in application.state.left_out:
        err.print(escape(f"treadle serve: not serving {problem}"), highlight=False)
    listening = _bind(host, port)
    bound = listening.getsockname()[1]
    redact = Redactor.of(settings.token, store)
    served = application.state.workflows.describe()
    out.print(f"treadle serve: {served} on {redact(store or 'treadle.sqlite')}", highlight=False)
    out.print(f"open {settings.page_url(bound)}", highlight=False, soft_wrap=True)
    if settings.sign_in is None:
        out.print(
            "no sign-in configured: whoever holds this token is an admin"
            " (API clients send it as Authorization: Bearer TOKEN; `treadle tokens create`"
            " makes named tokens with roles, --identity or --oidc-issuer signs people in)",
            highlight=False,
        )
    else:
        out.print(
            f"people sign in with {settings.sign_in.issuer};"
            " API clients send a named token (`treadle tokens create`) as Authorization: Bearer",
            highlight=False,
        )
    out.file.flush()
    from treadle._cli._serve_guard import ConnectionLimits  # noqa: PLC0415 - uvicorn's, lazily

    _run(application, listening, redact, ConnectionLimits(max_connections, headers_timeout))


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket (bound here, so a busy port is refused with one line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as error:
        listening.close()
        refuse(f"cannot listen on {host}:{port}: {error.strerror}")
    listening.listen(2048)
    listening.setblocking(False)  # noqa: FBT003 - socket's own signature
    return listening


def _run(
    application: Any,
    listening: socket.socket,
    redact: Callable[[str], str],
    limits: ConnectionLimits,
) -> None:
    """Run uvicorn on the socket until SIGTERM or Ctrl-C; logs go to stderr, tokens hidden."""
    import uvicorn  # noqa: PLC0415 - the server extra
    from uvicorn.config import LOGGING_CONFIG  # noqa: PLC0415

    from treadle._cli._serve_guard import guarded_protocol  # noqa: PLC0415

    logs = copy.deepcopy(LOGGING_CONFIG)
    logs["handlers"]["access"]["stream"] = "ext://sys.stderr"  # stdout: what the command says
    config = uvicorn.Config(
        application,
        log_config=logs,
        lifespan="on",
        timeout_graceful_shutdown=5,
        http=guarded_protocol(limits),
    )
    server = _server_class()(config)
    logging.getLogger("uvicorn.access").addFilter(_Redacting(redact))
    logging.getLogger("uvicorn.error").addFilter(_LettingGo())
    asyncio.run(server.serve(sockets=[listening]))


def _server_class() -> type[Any]:
    import uvicorn  # noqa: PLC0415 - the server extra

    class Server(uvicorn.Server):
        """uvicorn's server, stopping on SIGTERM, Ctrl-C or SIGHUP as ``treadle worker`` does.

        uvicorn raises the signal again once it has shut down gracefully, so
        the process would end killed by it (Ctrl-C: a traceback); a
        server that stopped as asked exits 0 instead.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            originals = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in originals.items():
                    signal.signal(sig, handler)

    return Server


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: its terminal closed


class _LettingGo(logging.Filter):
    """Drops uvicorn's traceback of an event stream let go for its client's reading nothing.

    uvicorn logs the error a response ended with, and closes the connection;
    the server said it in one line already (``_server/_app.py``): it is the
    client's doing, no failure of the server's.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        from treadle._server._sse import let_go  # noqa: PLC0415 - the server extra

        return not (record.exc_info and let_go(record.exc_info[1]))


_TOKEN_PARAMETER = re.compile(r"([?&]token=)[^&#\s]*")
_LINK_TOKEN = re.compile(r"(/answer/)(?!static/)[^/?#\s]+")


class _Redacting(logging.Filter):
    """Hides credentials in access-log lines, which log each path and query as it came.

    The server's token (``GET /?token=...``, in whatever encoding it came)
    and an answer link's token (``/answer/TOKEN``: whoever reads it could
    answer as the link's person) are logged as ``***``.
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        from treadle._server._json import HIDDEN  # noqa: PLC0415 - the server extra's

        super().__init__()
        self._redact = redact
        self._shown = rf"\g<1>{HIDDEN}"

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self._hidden(a) if isinstance(a, str) else a for a in record.args)
        return True

    def _hidden(self, text: str) -> str:
        text = _TOKEN_PARAMETER.sub(self._shown, self._redact(text))
        return _LINK_TOKEN.sub(self._shown, text)
