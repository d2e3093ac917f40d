"""Named tokens and ended sessions on the SQL stores (:mod:`treadle._stores._tokens`), written once.

The statements are this module's (neutral dialect); a
backend supplies how one SELECT and one change are run
(:class:`SqliteTokens`, :class:`PostgresTokens`), as for its reads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._stores import _tokens
from treadle._stores._sql_dialect import POSTGRES, SQLITE

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Awaitable, Callable, Sequence

_T = TypeVar("_T")

# --- the SQL stores' statements (neutral dialect) ------------------------------------

_COLUMNS = "name, role, created_at, created_by, expires_at, last_used_at, revoked_at"

SELECT_ALL = f"SELECT {_COLUMNS} FROM treadle_tokens ORDER BY name"  # noqa: S608 - constants
SELECT_NAMED = f"SELECT {_COLUMNS} FROM treadle_tokens WHERE name = ?"  # noqa: S608
SELECT_HASHED = f"SELECT {_COLUMNS} FROM treadle_tokens WHERE token_hash = ?"  # noqa: S608

ADD_ROW = """
INSERT INTO treadle_tokens (name, role, token_hash, created_at, created_by, expires_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING"""
"""(name, role, hash, now, created_by, expires_at): no row when the name or hash is taken."""

REVOKE_ROW = "UPDATE treadle_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE name = ?"

NOTE_USE = """
UPDATE treadle_tokens SET last_used_at = ?
WHERE name = ? AND (last_used_at IS NULL OR last_used_at < ?)"""
"""(now, name, now - USE_GRANULARITY)."""

END_SESSION = """
INSERT INTO treadle_ended_sessions (digest, ended_at, expires_at) VALUES (?, ?, ?)
ON CONFLICT DO NOTHING"""
"""(digest, now, expires_at): a session signed out twice keeps its first row."""

SWEEP_ENDED = "DELETE FROM treadle_ended_sessions WHERE expires_at <= ?"
"""(now): sessions that have run out anyway, which nothing needs to refuse by name."""

SELECT_ENDED = "SELECT 1 FROM treadle_ended_sessions WHERE digest = ?"


class SqlTokens(ABC):
    """What signs people in, over the SQL stores' tables.

    :class:`~treadle._stores._tokens.TokenKeeper` over ``treadle_tokens``, and
    :class:`~treadle._stores._tokens.EndedSessions` over ``treadle_ended_sessions``.
    """

    @abstractmethod
    async def _select(self, template: str, parameters: tuple[Any, ...]) -> list[Sequence[Any]]:
        """Run one SELECT written in the neutral SQL dialect; return its rows."""

    @abstractmethod
    async def _change(self, template: str, parameters: tuple[Any, ...]) -> int:
        """Run one INSERT or UPDATE in a transaction of its own; return the rows it changed."""

    async def add_token(
        self,
        name: str,
        role: str,
        hashed: str,
        *,
        created_by: str,
        expires_at: float | None = None,
    ) -> _tokens.TokenRecord:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.add_token`."""
        at = _tokens.now()
        parameters = (name, role, hashed, at, created_by, expires_at)
        if not await self._change(ADD_ROW, parameters):
            raise _tokens.token_exists(name)
        return _tokens.TokenRecord(name, role, at, created_by, expires_at)

    async def list_tokens(self) -> list[_tokens.TokenRecord]:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.list_tokens`."""
        return [_tokens.record_of(row) for row in await self._select(SELECT_ALL, ())]

    async def revoke_token(self, name: str) -> _tokens.TokenRecord:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.revoke_token`."""
        await self._change(REVOKE_ROW, (_tokens.now(), name))
        rows = await self._select(SELECT_NAMED, (name,))
        if not rows:
            raise _tokens.no_such_token(name)
        return _tokens.record_of(rows[0])

    async def find_token(self, hashed: str) -> _tokens.TokenRecord | None:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.find_token`."""
        rows = await self._select(SELECT_HASHED, (hashed,))
        return _tokens.record_of(rows[0]) if rows else None

    async def note_token_use(self, name: str) -> None:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.note_token_use`."""
        at = _tokens.now()
        await self._change(NOTE_USE, (at, name, at - _tokens.USE_GRANULARITY))

    async def end_session(self, digest: str, expires_at: float) -> None:
        """See :meth:`~treadle._stores._tokens.EndedSessions.end_session`."""
        at = _tokens.now()
        await self._change(SWEEP_ENDED, (at,))
        await self._change(END_SESSION, (digest, at, expires_at))

    async def session_ended(self, digest: str) -> bool:
        """See :meth:`~treadle._stores._tokens.EndedSessions.session_ended`."""
        return bool(await self._select(SELECT_ENDED, (digest,)))


class SqliteTokens(SqlTokens):
    """Tokens in a SQLite file: a change is one write on the store's writer thread."""

    @abstractmethod
    async def _call(
        self, work: Callable[[sqlite3.Connection], _T], *, write: bool, group: bool = False
    ) -> _T:
        """Run ``work`` on the store's connection (``SqliteStore._call``)."""

    async def _change(self, template: str, parameters: tuple[Any, ...]) -> int:
        statement = SQLITE.render(template)
        return await self._call(lambda c: c.execute(statement, parameters).rowcount, write=True)


class PostgresTokens(SqlTokens):
    """Tokens in PostgreSQL: a change is one statement in a transaction of its own."""

    @abstractmethod
    async def transact(self, work: Callable[[Any], Awaitable[_T]], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection (``PostgresStore.transact``)."""

    async def _change(self, template: str, parameters: tuple[Any, ...]) -> int:
        statement = POSTGRES.render(template)

        async def work(connection: Any) -> int:
            cursor = await connection.execute(statement, parameters)
            count: int = cursor.rowcount
            return count

        return await self.transact(work)
