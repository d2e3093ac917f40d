"""Webhooks and answer links on the SQL stores: an ``Outbox`` written once.

The statements are :mod:`treadle._stores._sql_outbox`'s; a backend supplies
how a list of them runs in one transaction (:class:`SqliteOutbox`,
:class:`PostgresOutbox`), including the two steps it spells its own way
(adding and dropping the outbox's feed).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._stores import _sql_outbox as sql
from treadle._stores._answer_links import AnswerLink, LinkOffer, new_key
from treadle._stores._outbox import Endpoint, Outbox, OutboxMessage
from treadle._stores._sql_dialect import POSTGRES, SQLITE

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Awaitable, Callable, Sequence

_T = TypeVar("_T")
Step = tuple[str, tuple[Any, ...]]
Done = tuple[list[Any], int]  # a step's rows (if it returns any) and the rows it changed


class SqlOutbox(ABC):
    """The ``Outbox`` over ``treadle_webhooks``, ``treadle_outbox`` and ``treadle_links``."""

    @abstractmethod
    async def _outbox_steps(self, steps: Sequence[Step], *, write: bool = True) -> list[Done]:
        """Run ``steps`` (neutral templates) in order, in one transaction when ``write``."""

    def outbox(self) -> Outbox:
        """The store's webhooks and answer links: the store itself."""
        return self

    async def add_endpoint(self, endpoint: Endpoint) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.add_endpoint`."""
        e = endpoint
        row = (e.endpoint_id, e.url, ",".join(e.events), e.secret, e.attempts, e.backoff)
        links = None if e.links is None else json.dumps(e.links.to_json())
        await self._outbox_steps(
            [
                (sql.INSERT_ENDPOINT, (*row, e.deadline_lead, e.created_at, links)),
                (sql.ADD_FEED, ()),
            ]
        )

    async def endpoints(self) -> list[Endpoint]:
        """See :meth:`~treadle._stores._outbox.Outbox.endpoints`."""
        ((rows, _),) = await self._outbox_steps([(sql.SELECT_ENDPOINTS, ())], write=False)
        return [
            Endpoint(
                i,
                url,
                tuple(events.split(",")),
                secret,
                int(n),
                float(b),
                float(lead),
                at,
                LinkOffer.from_json(links),
            )
            for i, url, events, secret, n, b, lead, at, links in rows
        ]

    async def remove_endpoint(self, endpoint_id: str) -> bool:
        """See :meth:`~treadle._stores._outbox.Outbox.remove_endpoint`."""
        done = await self._outbox_steps(
            [
                (sql.DELETE_ENDPOINT, (endpoint_id,)),
                (sql.DELETE_ENDPOINT_MESSAGES, (endpoint_id,)),
                (sql.DROP_FEED_IF_UNUSED, ()),
            ]
        )
        return done[0][1] > 0

    async def claim_messages(
        self, owner: str, now: float, lease: float, limit: int
    ) -> list[OutboxMessage]:
        """See :meth:`~treadle._stores._outbox.Outbox.claim_messages`."""
        parameters = sql.claim_parameters(owner, now, lease, limit)
        ((rows, _),) = await self._outbox_steps([(sql.CLAIM, parameters)])
        return sorted((OutboxMessage.from_row(r) for r in rows), key=lambda m: m.message_id)

    async def message_sent(self, message_id: int, owner: str) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.message_sent`."""
        await self._outbox_steps([(sql.SENT, (message_id, owner))])

    async def message_failed(
        self, message_id: int, owner: str, error: str, retry_at: float | None
    ) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.message_failed`."""
        state, due = ("dead", 0.0) if retry_at is None else ("pending", retry_at)
        await self._outbox_steps([(sql.FAILED, (error[:500], due, state, message_id, owner))])

    async def messages(self, state: str = "dead", limit: int = 100) -> list[OutboxMessage]:
        """See :meth:`~treadle._stores._outbox.Outbox.messages`."""
        steps = [(sql.SELECT_MESSAGES, (state, limit))]
        ((rows, _),) = await self._outbox_steps(steps, write=False)
        return [OutboxMessage.from_row(r) for r in rows]

    async def resend(self, message_ids: Sequence[int] | None, now: float) -> int:
        """See :meth:`~treadle._stores._outbox.Outbox.resend`."""
        steps: list[Step]
        if message_ids is None:
            steps = [(sql.RESEND_ALL, (now,))]
        else:
            steps = [(sql.RESEND_ONE, (now, i)) for i in message_ids]
        return sum(count for _, count in await self._outbox_steps(steps))

    async def link_key(self) -> bytes:
        """See :meth:`~treadle._stores._outbox.Outbox.link_key`."""
        done = await self._outbox_steps(
            [
                (sql.INSERT_SECRET, (sql.LINK_SECRET, new_key())),
                (sql.SELECT_SECRET, (sql.LINK_SECRET,)),
            ]
        )
        return bytes.fromhex(done[1][0][0][0])

    async def add_link(self, link: AnswerLink) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.add_link`."""
        k = link
        row = (k.nonce, k.run_id, k.request_id, k.principal, k.expires_at, k.created_at)
        await self._outbox_steps([(sql.INSERT_LINK, (*row, k.created_by, None, None))])

    async def link(self, nonce: str) -> AnswerLink | None:
        """See :meth:`~treadle._stores._outbox.Outbox.link`."""
        ((rows, _),) = await self._outbox_steps([(sql.SELECT_LINK, (nonce,))], write=False)
        return AnswerLink(*rows[0]) if rows else None

    async def use_link(self, nonce: str, now: float, used_by: str) -> bool:
        """See :meth:`~treadle._stores._outbox.Outbox.use_link`."""
        ((_, count),) = await self._outbox_steps([(sql.USE_LINK, (now, used_by, nonce))])
        return count > 0

    async def release_link(self, nonce: str) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.release_link`."""
        await self._outbox_steps([(sql.RELEASE_LINK, (nonce,))])


class SqliteOutbox(SqlOutbox):
    """The outbox in a SQLite file: its writes on the store's writer thread."""

    @abstractmethod
    async def _call(
        self, work: Callable[[sqlite3.Connection], _T], *, write: bool, group: bool = False
    ) -> _T:
        """Run ``work`` on the store's connection (``SqliteStore._call``)."""

    async def _outbox_steps(self, steps: Sequence[Step], *, write: bool = True) -> list[Done]:
        def work(connection: sqlite3.Connection) -> list[Done]:
            done: list[Done] = []
            for template, parameters in steps:
                if template == sql.ADD_FEED:
                    for statement in sql.SQLITE_FEED:
                        connection.execute(statement)
                elif template == sql.DROP_FEED_IF_UNUSED:
                    if not connection.execute(sql.COUNT_ENDPOINTS).fetchone()[0]:
                        for statement in sql.SQLITE_DROP_FEED:
                            connection.execute(statement)
                else:
                    cursor = connection.execute(SQLITE.render(template), parameters)
                    done.append((cursor.fetchall(), cursor.rowcount))
            return done

        return await self._call(work, write=write)


async def remake_old_feed(connection: Any) -> None:
    """Make the PostgreSQL feed function again if an older treadle made it (``_sql_outbox``).

    Called in the transaction that opens the store's schema; one adder at a time, as
    ``add_endpoint``'s: ``CREATE OR REPLACE`` races with itself.
    """
    found = await connection.execute(sql.POSTGRES_OLD_FEED)
    if await found.fetchone() is not None:
        await connection.execute("LOCK TABLE treadle_webhooks IN EXCLUSIVE MODE")
        await connection.execute(sql.POSTGRES_FEED_FUNCTION)


class PostgresOutbox(SqlOutbox):
    """The outbox in PostgreSQL: its writes in a transaction on a pooled connection."""

    @abstractmethod
    async def transact(self, work: Callable[[Any], Awaitable[_T]], *, write: bool = True) -> _T:
        """Run ``work`` on a pooled connection (``PostgresStore.transact``)."""

    async def _outbox_steps(self, steps: Sequence[Step], *, write: bool = True) -> list[Done]:
        async def work(connection: Any) -> list[Done]:
            done: list[Done] = []
            for template, parameters in steps:
                if template == sql.ADD_FEED:
                    # One adder at a time: CREATE OR REPLACE races with itself.
                    await connection.execute("LOCK TABLE treadle_webhooks IN EXCLUSIVE MODE")
                    await connection.execute(sql.POSTGRES_FEED_FUNCTION)
                    await connection.execute(sql.POSTGRES_FEED)
                elif template == sql.DROP_FEED_IF_UNUSED:
                    count = await (await connection.execute(sql.COUNT_ENDPOINTS)).fetchone()
                    if not count[0]:
                        await connection.execute(sql.POSTGRES_DROP_FEED)
                else:
                    cursor = await connection.execute(POSTGRES.render(template), parameters)
                    rows = await cursor.fetchall() if cursor.description else []
                    done.append((rows, cursor.rowcount))
            return done

        return await self.transact(work, write=write)
