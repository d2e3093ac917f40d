"""Named API tokens: the store's part for them, kept apart from the run store's port.

``treadle tokens create NAME --role R`` makes a token, prints it once and
keeps only its SHA-256 (a token is 256 random bits, so a fast hash is as
good as a slow one: there is nothing to guess). ``treadle serve`` looks a
bearer token up by that hash on every request, refuses it when it is
revoked or expired, and notes when it was last used (at most once a
minute, so a busy client does not turn every read into a write).

Sessions signed out are kept here too (:class:`EndedSessions`): a
signed-in person's session is a signed value with no row behind it, so
signing out keeps its SHA-256 until it would have run out, and every
process serving the store refuses it (not only the one that signed it out).

Only what signs people in needs this: the server and the ``tokens``
command depend on :class:`TokenKeeper` and :class:`EndedSessions`, not on
the whole ``Store`` port (every store implements all three). The SQL
stores' statements are in the neutral dialect; each backend runs them
(:mod:`treadle._stores._sql_tokens`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from treadle._exceptions import CommandError

if TYPE_CHECKING:
    from collections.abc import Sequence

SERVER_TOKEN_NAME = "server"  # noqa: S105 - an actor's name
"""The actor name of whoever holds ``treadle serve``'s own token (``token:server``): a named
token may not take it, or the record could not tell them apart."""

USE_GRANULARITY = 60.0
"""Seconds: a token's last use is written again only when the one kept is older."""


def token_hash(token: str) -> str:
    """What the store keeps of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A named token as the store keeps it (never the token itself).

    Attributes:
        name: Its name, unique in the store (the actor's name in the record).
        role: The role it acts with (``viewer``, ``approver``, ``operator``, ``admin``).
        created_at: When it was made (Unix seconds).
        created_by: Who made it (an actor's label, ``cli:ann@box``).
        expires_at: When it stops working (``None``: never).
        last_used_at: When a request last carried it (to the minute; ``None``: never).
        revoked_at: When it was revoked (``None``: it was not).
    """

    name: str
    role: str
    created_at: float
    created_by: str
    expires_at: float | None = None
    last_used_at: float | None = None
    revoked_at: float | None = None

    def refusal(self, now: float) -> str | None:
        """Why the token no longer admits anyone (revoked, expired), or ``None``."""
        if self.revoked_at is not None:
            return f"the token {self.name!r} was revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return f"the token {self.name!r} has expired"
        return None


@runtime_checkable
class TokenKeeper(Protocol):
    """What the server and ``treadle tokens`` ask of a store about named tokens."""

    async def add_token(
        self,
        name: str,
        role: str,
        hashed: str,
        *,
        created_by: str,
        expires_at: float | None = None,
    ) -> TokenRecord:
        """Keep a new token's name, role and hash.

        Raises:
            CommandError: A token of that name exists (revoked ones too: a
                name in the record stays one token's).
        """
        ...

    async def list_tokens(self) -> list[TokenRecord]:
        """Every token, by name, revoked and expired ones too."""
        ...

    async def revoke_token(self, name: str) -> TokenRecord:
        """Make the token of this name admit nobody from now on (revoking twice changes nothing).

        Raises:
            CommandError: No token has that name.
        """
        ...

    async def find_token(self, hashed: str) -> TokenRecord | None:
        """The token whose hash this is, whatever its state, or ``None``."""
        ...

    async def note_token_use(self, name: str) -> None:
        """Note that a request carried the token now (written at most once a minute)."""
        ...


@runtime_checkable
class EndedSessions(Protocol):
    """What the server asks of a store about sessions signed out before they ran out."""

    async def end_session(self, digest: str, expires_at: float) -> None:
        """Keep the session of this digest as signed out until ``expires_at``.

        Sessions kept whose time has passed are removed on the way, so the
        store holds at most the sessions of one session's length.
        """
        ...

    async def session_ended(self, digest: str) -> bool:
        """Whether the session of this digest was signed out (in any process)."""
        ...


def no_such_token(name: str) -> CommandError:
    """The refusal of a name no token has."""
    return CommandError(f"no token is named {name!r} (`treadle tokens list` lists them)")


def token_exists(name: str) -> CommandError:
    """The refusal of a name a token already has."""
    return CommandError(f"a token named {name!r} exists already; choose another name")


def record_of(row: Sequence[object]) -> TokenRecord:
    """A :class:`TokenRecord` from a row of the token table's selected columns."""
    name, role, created_at, created_by, expires_at, last_used_at, revoked_at = row
    return TokenRecord(
        name=str(name),
        role=str(role),
        created_at=float(created_at),  # type: ignore[arg-type]
        created_by=str(created_by),
        expires_at=None if expires_at is None else float(expires_at),  # type: ignore[arg-type]
        last_used_at=None if last_used_at is None else float(last_used_at),  # type: ignore[arg-type]
        revoked_at=None if revoked_at is None else float(revoked_at),  # type: ignore[arg-type]
    )


def now() -> float:
    """The time tokens are stamped with: Unix seconds of this machine's clock."""
    return time.time()


class MemoryTokens:
    """:class:`TokenKeeper` and :class:`EndedSessions` in memory, for ``MemoryStore``."""

    def _ended_rows(self) -> dict[str, float]:
        rows: dict[str, float] | None = getattr(self, "_ended_sessions", None)
        if rows is None:
            rows = {}
            self._ended_sessions = rows
        return rows

    async def end_session(self, digest: str, expires_at: float) -> None:
        """See :meth:`EndedSessions.end_session`."""
        rows = self._ended_rows()
        at = now()
        for gone in [kept for kept, until in rows.items() if until <= at]:
            del rows[gone]
        rows.setdefault(digest, expires_at)

    async def session_ended(self, digest: str) -> bool:
        """See :meth:`EndedSessions.session_ended`."""
        return digest in self._ended_rows()

    def _token_rows(self) -> dict[str, tuple[TokenRecord, str]]:
        rows: dict[str, tuple[TokenRecord, str]] | None = getattr(self, "_tokens_by_name", None)
        if rows is None:
            rows = {}
            self._tokens_by_name = rows
        return rows

    async def add_token(
        self,
        name: str,
        role: str,
        hashed: str,
        *,
        created_by: str,
        expires_at: float | None = None,
    ) -> TokenRecord:
        """See :meth:`TokenKeeper.add_token`."""
        rows = self._token_rows()
        if name in rows or any(h == hashed for _, h in rows.values()):
            raise token_exists(name)
        record = TokenRecord(name, role, now(), created_by, expires_at)
        rows[name] = (record, hashed)
        return record

    async def list_tokens(self) -> list[TokenRecord]:
        """See :meth:`TokenKeeper.list_tokens`."""
        return [record for _, (record, _) in sorted(self._token_rows().items())]

    async def revoke_token(self, name: str) -> TokenRecord:
        """See :meth:`TokenKeeper.revoke_token`."""
        rows = self._token_rows()
        if name not in rows:
            raise no_such_token(name)
        record, hashed = rows[name]
        if record.revoked_at is None:
            record = dataclasses.replace(record, revoked_at=now())
            rows[name] = (record, hashed)
        return record

    async def find_token(self, hashed: str) -> TokenRecord | None:
        """See :meth:`TokenKeeper.find_token`."""
        for record, kept in self._token_rows().values():
            if kept == hashed:
                return record
        return None

    async def note_token_use(self, name: str) -> None:
        """See :meth:`TokenKeeper.note_token_use`."""
        rows = self._token_rows()
        if name in rows:
            record, hashed = rows[name]
            at = now()
            if record.last_used_at is None or record.last_used_at < at - USE_GRANULARITY:
                rows[name] = (dataclasses.replace(record, last_used_at=at), hashed)
