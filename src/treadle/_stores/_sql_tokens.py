"""Named API tokens on the SQL stores: :class:`~treadle._stores._tokens.TokenKeeper`, written once.

The statements are :mod:`treadle._stores._tokens`' (neutral dialect); a
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


class SqlTokens(ABC):
    """:class:`~treadle._stores._tokens.TokenKeeper` over ``treadle_tokens``."""

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
        if not await self._change(_tokens.ADD_ROW, parameters):
            raise _tokens.token_exists(name)
        return _tokens.TokenRecord(name, role, at, created_by, expires_at)

    async def list_tokens(self) -> list[_tokens.TokenRecord]:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.list_tokens`."""
        return [_tokens.record_of(row) for row in await self._select(_tokens.SELECT_ALL, ())]

    async def revoke_token(self, name: str) -> _tokens.TokenRecord:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.revoke_token`."""
        await self._change(_tokens.REVOKE_ROW, (_tokens.now(), name))
        rows = await self._select(_tokens.SELECT_NAMED, (name,))
        if not rows:
            raise _tokens.no_such_token(name)
        return _tokens.record_of(rows[0])

    async def find_token(self, hashed: str) -> _tokens.TokenRecord | None:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.find_token`."""
        rows = await self._select(_tokens.SELECT_HASHED, (hashed,))
        return _tokens.record_of(rows[0]) if rows else None

    async def note_token_use(self, name: str) -> None:
        """See :meth:`~treadle._stores._tokens.TokenKeeper.note_token_use`."""
        at = _tokens.now()
        await self._change(_tokens.NOTE_USE, (at, name, at - _tokens.USE_GRANULARITY))


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
