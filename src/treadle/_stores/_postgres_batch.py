"""A group commit's statements as one query: EXECUTEs of statements prepared on the connection.

psycopg's pipeline mode sends each statement as it is executed, waiting on
the event loop for the socket every time: per statement, that costs a
worker more than the server spends running it. So
:mod:`treadle._stores._postgres_group` gathers a round of statements (every
plan's, up to the first answer it cannot take for granted) and
:class:`BatchSender` sends them as one simple query, ``EXECUTE name(...)``
each, its parameters bound on this side: one execute for the round,
however many statements. The query is put together here, each parameter
quoted as psycopg's client-side cursor quotes it (``as_literal``), rather
than handed to that cursor with its parameters: it would parse the whole
query for placeholders every time (a query of many statements is too long
for its cache), a sixth of what a worker spent per superstep. Each
statement is prepared once per connection
(``PREPARE``, in front of the first query needing it), so the server plans
it once, as it does psycopg's own prepared statements.

A query of several statements stops at the first that fails; the caller's
transaction (``BEGIN`` first in the first round) is then lost. Prepared
statements outlive a transaction rolled back, but not one skipped; so
after a failure the connection's are read again from the server before
they are used.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from typing import TYPE_CHECKING, Any

from treadle._stores._write_steps import ALL, COUNT, ONE

if TYPE_CHECKING:
    from treadle._stores._postgres_pools import Connection

_WRITES = frozenset(("INSERT", "UPDATE", "DELETE", "MERGE"))
_PLACEHOLDER = re.compile(r"%%|%s")


# What PREPARE takes; any other statement (a LOCK TABLE) goes as it is, taking no parameters.
_PREPARABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "VALUES", "WITH")


@functools.cache
def _prepared_as(rendered: str) -> tuple[str, str] | None:
    """The name a statement is prepared under, and its ``PREPARE`` (as sent: ``%%`` is ``%``).

    ``None``: the statement cannot be prepared (it is sent as it is).
    """
    if not rendered.lstrip().upper().startswith(_PREPARABLE):
        return None
    name = "treadle_" + hashlib.blake2b(rendered.encode(), digest_size=10).hexdigest()
    count = 0

    def number(found: re.Match[str]) -> str:
        nonlocal count
        if found.group() == "%%":
            return "%%"
        count += 1
        return f"${count}"

    prepare = f"PREPARE {name} AS {_PLACEHOLDER.sub(number, rendered)}"
    return name, prepare.replace("%%", "%")


@functools.cache
def _encoded(text: str, encoding: str) -> bytes:
    return text.encode(encoding)


class Prepared:
    """Which statements each connection has prepared (read from the server when unsure)."""

    def __init__(self) -> None:
        self._known: weakref.WeakKeyDictionary[Connection, set[str]] = weakref.WeakKeyDictionary()

    async def on(self, connection: Connection) -> set[str]:
        """The names prepared on ``connection`` (asked of the server the first time)."""
        known = self._known.get(connection)
        if known is None:
            found = await connection.execute("SELECT name FROM pg_prepared_statements")
            known = self._known[connection] = {row[0] for row in await found.fetchall()}
        return known

    def forget(self, connection: Connection) -> None:
        """Unsure again (a query failed part way): ask the server next time."""
        self._known.pop(connection, None)


class Sent:
    """A statement of a round: what its plan wants of it, then its answer once flushed."""

    __slots__ = ("answer", "parameters", "rendered", "want", "wrote")

    def __init__(self, rendered: str, parameters: Any, want: str) -> None:
        self.rendered = rendered
        self.parameters = parameters
        self.want = want
        self.answer: Any = None
        self.wrote = False


class BatchSender:
    """Sends a transaction's statements a round at a time, each round one simple query.

    ``begin``: the first round opens the transaction (``BEGIN`` in front).
    """

    def __init__(self, connection: Connection, prepared: Prepared) -> None:
        from psycopg import AsyncClientCursor  # noqa: PLC0415 - psycopg only when driven
        from psycopg.adapt import Transformer  # noqa: PLC0415

        self._connection = connection
        self._prepared = prepared
        self._cursor = AsyncClientCursor(connection)
        self._literal = Transformer.from_context(connection).as_literal
        self._encoding = connection.info.encoding
        self._round: list[Sent] = []
        self.begun = False
        self.committed = False

    def send(self, rendered: str, parameters: Any, want: str) -> Sent:
        """Add a statement to the round (sent at :meth:`flush`)."""
        sent = Sent(rendered, parameters or (), want)
        self._round.append(sent)
        return sent

    async def flush(self, *, last: bool = False) -> None:
        """Send the round as one query and set each statement's answer.

        A round with nothing in it (its plans finished on the answers of the
        last) sends nothing: the transaction is open already. ``last``: the
        caller needs no answer of this round to decide anything more, so
        ``COMMIT`` ends the query (:attr:`committed`), a round trip saved;
        should any statement fail, the ones after it, ``COMMIT`` too, do not run.

        Raises:
            psycopg.Error: a statement failed (those after it did not run).
        """
        if not self._round and self.begun:
            return
        known = await self._prepared.on(self._connection)
        encoding, literal = self._encoding, self._literal
        head: list[bytes] = []
        body: list[bytes] = []
        for sent in self._round:
            prepared = _prepared_as(sent.rendered)
            if prepared is None:
                if sent.parameters:
                    msg = f"a statement PREPARE cannot take has parameters: {sent.rendered}"
                    raise ValueError(msg)
                body.append(_encoded(sent.rendered.replace("%%", "%"), encoding))
                continue
            name, prepare = prepared
            if name not in known:
                head.append(_encoded(prepare, encoding))
                known.add(name)  # forgotten below should the query fail
            execute = _encoded(f"EXECUTE {name}", encoding)
            if sent.parameters:
                values = [b"NULL" if value is None else literal(value) for value in sent.parameters]
                execute += b"(" + b", ".join(values) + b")"
            body.append(execute)
        if not self.begun:
            head.append(b"BEGIN")
            self.begun = True
        tail = [b"COMMIT"] if last else []
        try:
            await self._cursor.execute(b";\n".join(head + body + tail))
            self.committed = last
            for _ in head:
                self._cursor.nextset()
            for position, sent in enumerate(self._round):
                if position:
                    self._cursor.nextset()
                sent.answer = await self._answer(sent.want)
                tag = self._cursor.statusmessage
                sent.wrote = (
                    tag is not None
                    and tag.split(" ", 1)[0] in _WRITES
                    and self._cursor.rowcount > 0
                )
        except BaseException:
            self._prepared.forget(self._connection)
            raise
        finally:
            self._round = []

    async def _answer(self, want: str) -> Any:
        if want is COUNT:
            return self._cursor.rowcount
        if want is ONE:
            return await self._cursor.fetchone()
        if want is ALL:
            return await self._cursor.fetchall()
        return None

    async def commit(self) -> None:
        """End the transaction the first round began."""
        await self._connection.execute("COMMIT")
