"""``treadle tokens create | list | revoke``: named API tokens for ``treadle serve``.

A token is made here, printed once, and kept in the store only as its
SHA-256 (:mod:`treadle._stores._tokens`), so nobody can read it back: a
lost token is revoked and a new one made. The server admits a request
carrying it with the token's role, as the actor ``token:NAME``, and the
record names it so. The command opens the store itself, as ``cli:USER@HOST``
(an admin: whoever can open the store can change it), who is kept as the
token's maker.
"""

from __future__ import annotations

import re
import secrets
import time
from types import MappingProxyType
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from treadle._cli._execute import execute, refuse
from treadle._cli._flags import JsonOption, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_group, command_set
from treadle._cli._views import out, when
from treadle._operations._shapes import iso_time
from treadle._stores._tokens import SERVER_TOKEN_NAME, TokenKeeper, TokenRecord, token_hash
from treadle._values._actors import Actor, Role
from treadle._values._durations import duration_problem

cli = command_set()

tokens_app = command_group(
    "Named API tokens for treadle serve: create (printed once), list, revoke."
)
cli.add_typer(tokens_app, name="tokens")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = MappingProxyType({"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400})


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` (or a sum: ``1d12h``) in seconds.

    Raises:
        ValueError: It is none of those, or zero.
    """
    compact = text.replace(" ", "").lower()
    parts = _DURATION.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        msg = f"{text!r} is not a duration (write 30d, 12h, 90m, 2w or 45s)"
        raise ValueError(msg)
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        msg = f"a token must last some time, not {text!r}"
        raise ValueError(msg)
    if (problem := duration_problem(seconds)) is not None:
        msg = f"{text!r}: {problem}"
        raise ValueError(msg)
    return seconds


def _keeper(store: object) -> TokenKeeper:
    if not isinstance(store, TokenKeeper):
        refuse(f"this store keeps no tokens: {escape(type(store).__name__)}")
    return store


@tokens_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The token's name: who the record says acted.")],
    role: Annotated[
        str, typer.Option("--role", help="viewer, approver, operator or admin.")
    ] = "viewer",
    expires: Annotated[
        str | None, typer.Option("--expires", help="It stops working after this: 30d, 12h, 2w.")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a named token and print it once (only its hash is kept: copy it now)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}", name):
        refuse(f"a token's name is letters, digits and . _ @ - (up to 64), not {escape(name)!r}")
    if name == SERVER_TOKEN_NAME:  # token:server is the record's name for the server's own token
        refuse(f"{name!r} names the server's own token on the record: choose another name")
    try:
        chosen = Role.parse(role)
        lasting = None if expires is None else parse_duration(expires)
    except ValueError as error:
        refuse(escape(str(error)))
    token = "tdl_" + secrets.token_urlsafe(32)
    maker = Actor.cli().label
    expires_at = None if lasting is None else time.time() + lasting
    record = execute(
        store,
        lambda s: _keeper(s).add_token(
            name, chosen.label, token_hash(token), created_by=maker, expires_at=expires_at
        ),
        creates=True,
    )
    if as_json:
        out.print_json(data={**_json(record), "token": token})
        return
    out.print(
        f"token {escape(name)} ({chosen.label}"
        + (f", expires {when(expires_at)}" if expires_at else "")
        + "); it is shown only now:",
        highlight=False,
    )
    out.print(token, highlight=False, soft_wrap=True)


@tokens_app.command("list")
def list_tokens(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List the tokens: name, role, maker, when made, expiry, last use, state (never the token)."""
    records = execute(store, lambda s: _keeper(s).list_tokens())
    if as_json:
        out.print_json(data={"tokens": [_json(r) for r in records]})
        return
    if not records:
        out.print("no tokens (treadle tokens create NAME --role ROLE makes one)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("NAME", "ROLE", "CREATED BY", "CREATED", "EXPIRES", "LAST USED", "STATE"):
        table.add_column(column)
    now = time.time()
    for record in records:
        table.add_row(
            escape(record.name),
            record.role,
            escape(record.created_by),
            when(record.created_at),
            when(record.expires_at) or "never",
            when(record.last_used_at) or "never",
            _state(record, now),
        )
    out.print(table)


@tokens_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The token's name.")],
    store: StoreOption = None,
) -> None:
    """Revoke a token: the server refuses it from its next request on."""
    record = execute(store, lambda s: _keeper(s).revoke_token(name))
    out.print(f"revoked token {escape(record.name)} ({record.role})", highlight=False)


def _state(record: TokenRecord, now: float) -> str:
    if record.revoked_at is not None:
        return f"revoked {when(record.revoked_at)}"
    if record.expires_at is not None and record.expires_at <= now:
        return "expired"
    return "active"


def _json(record: TokenRecord) -> dict[str, object]:
    return {
        "name": record.name,
        "role": record.role,
        "created_by": record.created_by,
        "created_at": iso_time(record.created_at),
        "expires_at": iso_time(record.expires_at),
        "last_used_at": iso_time(record.last_used_at),
        "revoked_at": iso_time(record.revoked_at),
        "state": _state(record, time.time()),
    }
