"""Who a request comes from: the sign-in's settings, roles from claims, signed sessions.

``treadle serve`` knows three kinds of principal (DESIGN §17):

* **People**, signed in through an OpenID Connect provider
  (:mod:`treadle._server._oidc`). The provider's claims give their name
  (``preferred_username`` unless told otherwise) and groups (``groups``);
  :attr:`SignIn.roles` maps names and ``group:G`` to a role, the highest
  that matches winning, else :attr:`SignIn.default_role`.
* **Named API tokens** (``treadle tokens create``), looked up by hash in
  the store (:mod:`treadle._stores._tokens`).
* **The server's own token**, printed at start, only when no sign-in is
  configured: whoever holds it is an admin, and the banner says so.

A signed-in person's session is a cookie signed with the server's secret
(itsdangerous; the secret comes from the configuration, else a new one per
start, which signs everyone out on a restart). The same signed value is
the page's credential for changes, sent as ``Authorization: Bearer`` by
its scripts: another site can make a browser send a cookie, never a header.
A session signed out is kept in the store (its digest, until it would have
run out: :class:`~treadle._stores._tokens.EndedSessions`), so that every
process serving the store refuses it, not only the one it signed out on.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
import tomllib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from treadle._stores._tokens import EndedSessions
from treadle._values._actors import KINDS, Actor, Role, names_problem

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path

SESSION_PREFIX = "s."
"""What a session's credential starts with (a named token starts with ``tdl_``)."""

DEFAULT_SCOPES = ("openid", "profile", "email")

CLOCK_MARGIN = 300.0
"""Seconds a session signed out is kept past its end: the clocks of the processes that
serve one store may differ, and one behind would take the session for live a while longer."""


@dataclass(frozen=True, slots=True)
class SignIn:
    """How people sign in: one OpenID Connect provider and the roles its claims give.

    Attributes:
        issuer: The provider's issuer URL (its discovery document is under it).
        client_id: This server's client id at the provider.
        client_secret: Its secret (``None``: a public client, PKCE alone).
        redirect_uri: Where the provider sends people back (``None``: this
            server's ``/auth/callback``, as the browser reached it).
        scopes: The scopes asked for.
        username_claim: The claim naming a person (the actor's name).
        groups_claim: The claim listing a person's groups.
        roles: Who gets which role: each role with the user names and
            ``group:G`` entries that get it; the highest matching role wins.
        default_role: The role of a person no entry names (``None``: such a
            person may not sign in).
        session_seconds: How long a session lasts.
        secret: The key sessions are signed with (``None``: a new one per start).
    """

    issuer: str
    client_id: str
    client_secret: str | None = None
    redirect_uri: str | None = None
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"
    roles: tuple[tuple[Role, tuple[str, ...]], ...] = ()
    default_role: Role | None = Role.VIEWER
    session_seconds: float = 12 * 3600.0
    secret: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Refuse a configuration no sign-in could work with.

        Raises:
            ValueError: The issuer is not an http(s) URL, the client id is
                empty, ``openid`` is not asked for, or the session lasts no time.
        """
        if not self.issuer.startswith(("https://", "http://")):
            msg = f"the OpenID Connect issuer must be an http(s) URL, not {self.issuer!r}"
            raise ValueError(msg)
        if not self.client_id:
            raise ValueError("the OpenID Connect client id is empty")
        if "openid" not in self.scopes:
            msg = f"the scopes must include 'openid' (given: {' '.join(self.scopes)})"
            raise ValueError(msg)
        if not self.session_seconds > 0:
            msg = f"session_seconds must be positive, not {self.session_seconds}"
            raise ValueError(msg)

    def actor_of(self, claims: Mapping[str, Any]) -> Actor | str:
        """The signed-in person the claims describe, or why they may not sign in."""
        name = claims.get(self.username_claim) or claims.get("sub")
        if not isinstance(name, str) or not name:
            return f"the provider's claims name nobody (no {self.username_claim!r} or 'sub')"
        found = claims.get(self.groups_claim) or ()
        groups = frozenset(str(g) for g in found) if isinstance(found, list) else frozenset()
        refused = person_problem(name, groups)
        if refused is not None:
            return refused
        return self.person(name, groups)

    def person(self, name: str, groups: frozenset[str]) -> Actor | str:
        """``name`` in ``groups`` with the role the rules give them now, or why they have none.

        Asked at sign-in and again at each request a session makes: a
        session keeps who someone is, never the role they had when they
        signed in, so a rule changed or removed holds from the next request.
        """
        role = role_of(name, groups, self.roles, self.default_role)
        if role is None:
            return f"{name} has no role on this server: ask its admin for one"
        return Actor("user", name, "page", role, groups)


_TAKEN_PREFIXES = frozenset({"group", "role"}) | KINDS
"""What a signed-in name may not start with before a colon: a rule's ``group:`` or ``role:``,
or another kind of actor's label (``cli:ann@box``), which the record would take it for."""


def person_problem(name: str, groups: frozenset[str]) -> str | None:
    """Why the provider's name or groups for someone cannot stand on the record, if they cannot.

    A name is what the record says decided (a blank one, a control
    character that breaks an audit line, 20,000 characters), and what the
    role rules and approvers match: a person named ``group:finance`` took
    that group's role.
    """
    problem = names_problem(name, sorted(groups), ("the name", "a group"))
    if problem is not None:
        return f"the provider's claims cannot sign anyone in: {problem}"
    prefix, colon, _ = name.partition(":")
    if colon and prefix in _TAKEN_PREFIXES:
        return (
            f"the provider's claims cannot sign anyone in: the name {name!r} reads as "
            f"{prefix}:..., which names a {prefix} on this server, not a person"
        )
    return None


def role_of(
    name: str,
    groups: frozenset[str],
    rules: Iterable[tuple[Role, tuple[str, ...]]],
    default: Role | None,
) -> Role | None:
    """The highest role ``rules`` give the user ``name`` in ``groups``, else ``default``."""
    matched = [
        role
        for role, who in rules
        if any(
            entry.removeprefix("group:") in groups
            if entry.startswith("group:")
            else entry == name  # a name matches names only: never a group's entry
            for entry in who
        )
    ]
    return max(matched) if matched else default


def parse_role_rule(text: str) -> tuple[Role, str]:
    """``approver=group:finance`` as (role, who).

    Raises:
        ValueError: It is not ``ROLE=WHO`` or names no role.
    """
    role, sep, who = text.partition("=")
    if not sep or not who.strip():
        msg = f"a role rule reads ROLE=USER or ROLE=group:GROUP, not {text!r}"
        raise ValueError(msg)
    return Role.parse(role), who.strip()


def read_sign_in(
    path: Path | None,
    *,
    issuer: str | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    scopes: str | None = None,
    role_rules: Iterable[str] = (),
) -> SignIn | None:
    """The sign-in a configuration file and the command's flags describe (flags win).

    The file is TOML: an ``[oidc]`` table (``issuer``, ``client_id``,
    ``client_secret`` or ``client_secret_env``, ``redirect_uri``,
    ``scopes``, ``username_claim``, ``groups_claim``, ``default_role`` (a
    role or ``"none"``), ``session_hours``, ``session_secret``) and a
    ``[roles]`` table (``approver = ["group:finance", "maria"]``).

    Returns:
        ``None`` when neither names an issuer: no sign-in.

    Raises:
        ValueError: The file does not read, or a value is wrong (named).
    """
    table: dict[str, Any] = {}
    roles: dict[str, Any] = {}
    if path is not None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            msg = f"{path}: {error}"
            raise ValueError(msg) from error
        table = dict(document.get("oidc", {}))
        roles = dict(document.get("roles", {}))
        unknown = set(document) - {"oidc", "roles"}
        if unknown:
            msg = f"{path}: unknown tables {sorted(unknown)} (it takes [oidc] and [roles])"
            raise ValueError(msg)
    issuer = issuer or table.get("issuer")
    if issuer is None:
        if role_rules or client_id:
            raise ValueError("name the OpenID Connect issuer (--oidc-issuer or [oidc] issuer)")
        return None
    secret = client_secret or table.get("client_secret")
    if secret is None and (variable := table.get("client_secret_env")):
        secret = os.environ.get(str(variable))
    rules: dict[Role, list[str]] = {}
    for role_name, who in roles.items():
        entries = [who] if isinstance(who, str) else list(who)
        rules.setdefault(Role.parse(role_name), []).extend(str(e) for e in entries)
    for text in role_rules:
        role, who = parse_role_rule(text)
        rules.setdefault(role, []).append(who)
    default = str(table.get("default_role", "viewer"))
    return SignIn(
        issuer=str(issuer).rstrip("/"),
        client_id=str(client_id or table.get("client_id") or ""),
        client_secret=secret,
        redirect_uri=table.get("redirect_uri"),
        scopes=tuple(scopes.split() if scopes else table.get("scopes", DEFAULT_SCOPES)),
        username_claim=str(table.get("username_claim", "preferred_username")),
        groups_claim=str(table.get("groups_claim", "groups")),
        roles=tuple((role, tuple(who)) for role, who in sorted(rules.items())),
        default_role=None if default == "none" else Role.parse(default),
        session_seconds=float(table.get("session_hours", 12)) * 3600.0,
        secret=table.get("session_secret"),
    )


class Sessions:
    """Signed sessions of signed-in people: the cookie's value and the page's credential."""

    def __init__(self, secret: str | None, seconds: float, sign_in: SignIn | None = None) -> None:
        self._signer = URLSafeTimedSerializer(
            secret or secrets.token_urlsafe(32), salt="treadle-session"
        )
        self._seconds = seconds
        self._sign_in = sign_in
        # Sessions known to be signed out (here, or found so in the store), each one's
        # digest until it would have run out: such a session is refused without a read.
        self._ended: dict[str, float] = {}

    async def end(self, value: str, keeper: object) -> None:
        """Sign a session out: from now on it names nobody, though its signature still holds.

        A session is a signed value with no row behind it, so signing out
        keeps its digest in the store (``keeper``) until it would have run
        out, where every process serving the store finds it; a value this
        server did not sign, or that has run out, names nobody already and
        is not kept. A store that keeps no sessions (none is a
        :class:`~treadle._stores._tokens.EndedSessions`) leaves it to this
        process alone.
        """
        found = self._read(value)
        if found is None:
            return
        digest, until = _digest(value), found[1] + CLOCK_MARGIN
        self._remember(digest, until)
        if isinstance(keeper, EndedSessions):
            await keeper.end_session(digest, until)

    def issue(self, actor: Actor) -> str:
        """A signed session of ``actor`` (its record as JSON, with when it was made)."""
        data = {**actor.to_json(), "at": time.time()}
        return SESSION_PREFIX + self._signer.dumps(data)

    async def actor(self, value: str, door: str, keeper: object) -> Actor | None:
        """The actor a session's value names, coming in by ``door``, or ``None``.

        ``None`` when :meth:`signed` gives none, or the store (``keeper``)
        keeps the session as signed out, whichever process signed it out:
        the store is the authority, read at each request (a session found
        signed out is remembered, so it costs no read again).
        """
        signed = self.signed(value, door)
        if signed is None or not isinstance(keeper, EndedSessions):
            return signed
        digest = _digest(value)
        if await keeper.session_ended(digest):
            self._remember(digest, time.time() + self._seconds + CLOCK_MARGIN)
            return None
        return signed

    def signed(self, value: str, door: str) -> Actor | None:
        """The actor a session's value names by its signature alone, or ``None``.

        ``None`` when the value was not signed by this server, is older
        than a session lasts, names someone the role rules now give no
        role, or was signed out as far as this process knows. The role is
        the rules' now (:meth:`SignIn.person`), not the one the session
        was signed with. Without the store's word, so never enough to
        admit a request: :meth:`actor` is.
        """
        if self._ended and _digest(value) in self._ended:
            return None  # signed out
        found = self._read(value)
        if found is None:
            return None
        signed = found[0]
        if self._sign_in is None:
            return signed.through(door)
        now = self._sign_in.person(signed.name, signed.groups)
        return now.through(door) if isinstance(now, Actor) else None

    def _read(self, value: str) -> tuple[Actor, float] | None:
        """Whom a session was signed for and when it runs out, if this server signed it."""
        if not value.startswith(SESSION_PREFIX):
            return None
        try:
            data, signed_at = self._signer.loads(
                value.removeprefix(SESSION_PREFIX),
                max_age=int(self._seconds),
                return_timestamp=True,
            )
            return Actor.from_json(data), signed_at.timestamp() + self._seconds
        except (BadSignature, ValueError, TypeError):
            return None

    def _remember(self, digest: str, until: float) -> None:
        """Keep a session signed out in this process too (those run out are let go)."""
        now = time.time()
        self._ended = {key: end for key, end in self._ended.items() if end > now}
        self._ended[digest] = until


def _digest(session: str) -> str:
    """What is kept of a session signed out: its SHA-256, never the credential itself."""
    return hashlib.sha256(session.encode()).hexdigest()
