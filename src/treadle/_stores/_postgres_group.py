"""Group commit on PostgreSQL: the commits of many runs in one transaction, pipelined.

Each commit is a write plan (:mod:`treadle._stores._write_plans`); this
module drives several side by side on one connection in one transaction
(:func:`drive_together`) and gathers the commits an event loop makes while
one of its transactions is in flight into the next (:class:`GroupCommit`).

**Batched.** The plans' statements go to the server a round at a time, each
round one query (:mod:`treadle._stores._postgres_batch`): a statement whose
answer a plan does not need is sent without waiting, and every plan's next
statement is sent before any answer is awaited. The answers a commit almost
always gets (its fenced advance finds no pause asked, its checkpoints are
new) are taken for granted, so its later statements go too; the server
checks each guess as it runs the statement, and a wrong one fails it, so
the group rolls back and its commits run again one by one without guessing.
With nothing left to learn, the query ends with the COMMIT: a group of
commits costs one round trip, whatever its size.

**Each commit still its own.** Every plan is fenced by its own lease: its
first statement moves the run row on only while the lease is current. A
plan refused there (a lost lease, an unknown run) changed nothing, so it
fails alone and the others commit. One refused after it wrote (a taken id,
a pruned piece), and any failure of the transaction itself (a statement
failing, a deadlock), make the group's commits run again one transaction
each, so each gets exactly the outcome it would have had alone.

**One transaction in flight per loop.** A commit made while none of its
loop's is in flight runs at once, on its own; those made meanwhile wait and
go together in the next transaction, so the group grows with the number of
runs committing at once and a lone run pays nothing for it. A commit whose
caller is cancelled while it waits is dropped; once its group is under way
it completes with the group (as on ``SqliteStore``'s writer).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from treadle._exceptions import DurabilityError
from treadle._stores._postgres_batch import BatchSender, Prepared, Sent
from treadle._stores._postgres_writes import answer
from treadle._stores._sql_dialect import POSTGRES
from treadle._stores._sql_ownership import ADOPT_PENDING, FENCE, SELECT_LEFTOVERS
from treadle._stores._sql_queue import RELEASE_HELD
from treadle._stores._sql_statements import INSERT_CHECKPOINT
from treadle._stores._write_parts import RELEASE_RETURNING
from treadle._stores._write_steps import ALL, COUNT, NOTHING, ONE, POSTGRES_WRITES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from psycopg import AsyncCursor, AsyncPipeline

    from treadle._stores._postgres_pools import Connection
    from treadle._stores._write_steps import Plan, Step

_T = TypeVar("_T")
_Outcome = tuple[Any, BaseException | None]
Connected: TypeAlias = "Callable[[Callable[[Connection], Awaitable[Any]]], Awaitable[Any]]"
"""Runs ``work(connection)`` on a pooled connection (no transaction), with a store's errors."""

GROUP_MAX = 256
"""At most this many commits share one transaction (the rest go in the next)."""

_render = functools.cache(POSTGRES.render)
_IN_TRANSACTION = frozenset(("INTRANS", "INERROR"))  # psycopg's TransactionStatus names
_LOCK = " FOR UPDATE"
_WRITES = frozenset(("INSERT", "UPDATE", "DELETE", "MERGE"))


class WroteThenRefused(Exception):  # noqa: N818 - a signal to the group's driver, not an error
    """A plan of a group was refused after it wrote: the group runs again, one by one."""


_NOT_ASKED = (None,)  # the fenced advance's answer when no pause was asked
_NOT_READY = (False,)  # a release's answer when the run is not to be taken up at once
_LET_GO = (None, None, None)  # an owner's release when nothing came meanwhile, no pause asked
_FENCED_ADVANCE = POSTGRES_WRITES.advance + FENCE + " RETURNING pause_requested"
_ADOPT = ADOPT_PENDING
_CHECKPOINTS = INSERT_CHECKPOINT[: INSERT_CHECKPOINT.index("VALUES")]
_CHECKPOINT_COLUMNS = INSERT_CHECKPOINT.count("?")


@functools.cache
def _asserted(template: str, rows_are: str = "") -> str:
    """``template`` made to fail unless it touches as many rows as its last parameter says.

    The statement becomes a data-modifying ``WITH`` whose one row is the
    number of rows it returned; any other number (or a returned row for
    which ``rows_are``, a condition on ``guessed``, does not hold) casts a
    message to an integer, which fails the statement, and with it the
    transaction. Not a constant, so PostgreSQL cannot fold it when it plans
    the statement.
    """
    also = f" AND bool_and({rows_are})" if rows_are else ""
    return (
        f"WITH guessed AS ({template}) SELECT CASE WHEN count(*) = ?{also} THEN count(*)"  # noqa: S608 - constants only
        " ELSE CAST('treadle: not the answer guessed, rows: ' || count(*) AS INTEGER) END"
        " FROM guessed"
    )


def _guess(template: str, parameters: Any, want: str) -> tuple[object, str, int] | None:
    """The answer a commit's statement almost always gets, as the server is to check it.

    A commit under a lease moves its run row on (no pause asked: the row
    says ``NULL``) and inserts its checkpoints (each one new): taking those
    answers for granted, its later statements go with them, without waiting.
    A worker starting a run moves its pending row on under its claim, likewise,
    and one giving a run up finds it not ready (it ended, or waits for a
    client, with nothing delivered meanwhile): no notice to send. So does a
    process letting its run go (nothing delivered, no pause asked: the
    status the row returns is then not read). A run that ends leaves
    nothing unapplied in its inbox.

    Returns:
        ``None`` (no guess), or the answer the plan is given, the statement
        to send instead (:func:`_asserted`: it fails unless the answer is
        that one) and the number of rows it is to touch. The server checks
        the guess, so a group can commit in the query that carries it.
    """
    if want is ONE and template == _FENCED_ADVANCE:
        return _NOT_ASKED, _asserted(template, "guessed IS NULL"), 1
    if want is ONE and template == RELEASE_HELD:
        return _NOT_READY, _asserted(template, "NOT guessed.ready"), 1
    if want is ONE and template == RELEASE_RETURNING:
        quiet = "guessed.ready_at IS NULL AND guessed.pause_requested IS NULL"
        return _LET_GO, _asserted(template, quiet), 1
    if want is ALL and template == SELECT_LEFTOVERS:
        return [], _asserted(template), 0
    if want is COUNT and template == _ADOPT:
        return 1, _asserted(template + " RETURNING 1"), 1
    if want is COUNT and template.startswith(_CHECKPOINTS):
        rows = len(parameters) // _CHECKPOINT_COLUMNS
        return rows, _asserted(template + " RETURNING 1"), rows
    return None


class _PipelineSender:
    """Sends statements as they come, in psycopg's pipeline mode (the transaction's own)."""

    def __init__(self, connection: Connection, pipeline: AsyncPipeline) -> None:
        self._connection = connection
        self._pipeline = pipeline
        self._round: list[tuple[Sent, AsyncCursor[Any]]] = []

    async def send(self, rendered: str, parameters: Any, want: str) -> Sent:
        sent = Sent(rendered, parameters, want)
        self._round.append((sent, await self._connection.execute(rendered, parameters or None)))
        return sent

    async def flush(self, *, last: bool = False) -> None:  # noqa: ARG002 - see Sender
        await self._pipeline.sync()
        for sent, cursor in self._round:
            sent.answer = await answer(cursor, sent.want)
            tag = cursor.statusmessage
            sent.wrote = tag is not None and tag.split(" ", 1)[0] in _WRITES and cursor.rowcount > 0
        self._round = []


class _Batched:
    """A :class:`BatchSender` whose :meth:`send` is awaited, as the pipeline's is."""

    def __init__(self, sender: BatchSender) -> None:
        self.flush = sender.flush
        self._send = sender.send

    async def send(self, rendered: str, parameters: Any, want: str) -> Sent:
        return self._send(rendered, parameters, want)


class Sender(Protocol):
    """Sends a transaction's statements a round at a time (see :class:`BatchSender`)."""

    async def send(self, rendered: str, parameters: Any, want: str) -> Sent: ...

    async def flush(self, *, last: bool = False) -> None:
        """Send the round; ``last``: the transaction may commit with it (if the sender can)."""


class _Driven:
    """One plan being driven: its statements so far, and the one awaiting an answer."""

    __slots__ = ("plan", "sent", "waits")

    def __init__(self, plan: Plan[Any]) -> None:
        self.plan = plan
        self.sent: list[Sent] = []
        self.waits: Sent | None = None


async def drive_together(
    plans: list[Plan[Any]],
    sender: Sender,
    *,
    alone: bool = False,
    guess: bool = True,
) -> list[_Outcome]:
    """Drive ``plans`` side by side in the sender's transaction; one outcome each, in order.

    A round sends every plan's statements up to one wanting an answer, then
    flushes. ``alone`` (a single plan): its refusal is raised as is, rolling
    the transaction back, as :func:`treadle._stores._postgres_writes.drive`
    does. ``guess``: a statement whose usual answer is known
    (:func:`_guess`) is given it at once and the plan goes on; the server
    checks each guess as it runs the statement, failing the statement (and
    the transaction) when it was wrong, so no plan hears a real answer, and
    nothing commits, after a wrong guess. So the round that leaves every
    plan done, none refused, is told it is the last, and a sender that can
    commits with it: a group of commits is one query.

    Raises:
        WroteThenRefused: a plan was refused after it wrote (not ``alone``).
        psycopg.Error: a statement failed (a guess the server found wrong,
            say); the transaction is lost.
    """
    outcomes: list[_Outcome | None] = [None] * len(plans)
    refused: list[_Driven] = []
    guessed: list[tuple[Sent, int]] = []  # each with the rows it is to touch

    async def step_on(index: int, driven: _Driven, answer: Any, *, first: bool = False) -> bool:
        """Send ``answer`` and the statements after it, up to one wanting an answer.

        ``False``: the plan is done (its outcome is set).
        """
        plan = driven.plan
        while True:
            try:
                step: Step = next(plan) if first else plan.send(answer)
            except StopIteration as done:
                outcomes[index] = (done.value, None)
                return False
            except Exception as error:
                if alone:
                    raise
                outcomes[index] = (None, error)
                refused.append(driven)
                return False
            first = False
            template, parameters, want, lock = step
            guessed_as = _guess(template, parameters, want) if guess else None
            if guessed_as is not None:
                answer, asserted, rows = guessed_as
                sent = await sender.send(_render(asserted), (*parameters, rows), ONE)
                driven.sent.append(sent)
                guessed.append((sent, rows))
                continue
            sent = await sender.send(
                _render(template + _LOCK if lock else template), parameters, want
            )
            driven.sent.append(sent)
            answer = None
            if want is not NOTHING:
                driven.waits = sent
                return True

    waiting: list[tuple[int, _Driven]] = []
    for index, plan in enumerate(plans):
        driven = _Driven(plan)
        if await step_on(index, driven, None, first=True):
            waiting.append((index, driven))
    while True:
        await sender.flush(last=not waiting and not refused)
        for sent, rows in guessed:  # each as guessed, or the server failed the flush
            sent.wrote = rows > 0
        guessed.clear()
        if not waiting:
            break
        answered, waiting = waiting, []
        for index, driven in answered:
            assert driven.waits is not None  # noqa: S101 - set with the step that wants an answer
            if await step_on(index, driven, driven.waits.answer):
                waiting.append((index, driven))
    if any(sent.wrote for driven in refused for sent in driven.sent):
        raise WroteThenRefused
    return [outcome for outcome in outcomes if outcome is not None]


class _Waiting:
    """A commit waiting for the next transaction of its loop."""

    __slots__ = ("done", "make")

    def __init__(self, make: Callable[[], Plan[Any]], done: asyncio.Future[Any]) -> None:
        self.make = make
        self.done = done


class _LoopCommits:
    """One event loop's commits: whether a transaction of them is in flight, and who waits."""

    __slots__ = ("busy", "flusher", "waiting")

    def __init__(self) -> None:
        self.busy = False
        self.waiting: list[_Waiting] = []
        self.flusher: asyncio.Task[None] | None = None


class GroupCommit:
    """Commits of many runs sharing transactions (see the module docstring).

    Args:
        connected: Runs a ``(connection) -> awaitable`` on a pooled
            connection, with the store's error handling; the group opens
            its own transaction there, pipelined.
    """

    def __init__(self, connected: Connected) -> None:
        self._connected = connected
        self._prepared = Prepared()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopCommits] = (
            weakref.WeakKeyDictionary()
        )

    async def commit(self, make: Callable[[], Plan[_T]]) -> _T:
        """Drive the plan ``make`` makes, alone if nothing is in flight, else in the next group."""
        loop = asyncio.get_running_loop()
        commits = self._loops.get(loop)
        if commits is None:
            commits = self._loops[loop] = _LoopCommits()
        if not commits.busy:
            commits.busy = True
            try:
                result: _T = await self.alone(make)
            finally:
                self._next(commits, loop)
            return result
        done: asyncio.Future[_T] = loop.create_future()
        commits.waiting.append(_Waiting(make, done))
        return await done

    async def batched(self, work: Callable[[Sender], Awaitable[_T]]) -> _T:
        """``work`` in a transaction of its own, its rounds sent as a group's are.

        ``BEGIN`` goes with the first round and, when ``work`` flushes its
        last round saying so, ``COMMIT`` with that one; else it ends the
        transaction once ``work`` returns. For a run queue's claim: its
        statements prepared once per connection, as a commit's are.
        """
        outcome: _T = await self._connected(functools.partial(_batched, work, self._prepared))
        return outcome

    async def settled(self) -> None:
        """Wait for the groups in flight on the running loop (closing the store)."""
        commits = self._loops.get(asyncio.get_running_loop())
        while commits is not None and commits.flusher is not None:
            await asyncio.wait([commits.flusher])

    def _next(self, commits: _LoopCommits, loop: asyncio.AbstractEventLoop) -> None:
        """Start the next group if commits wait (else nothing is in flight any more)."""
        if commits.waiting and not loop.is_closed():
            commits.flusher = loop.create_task(self._flush(commits, loop))
        else:
            commits.busy = False

    async def _flush(self, commits: _LoopCommits, loop: asyncio.AbstractEventLoop) -> None:
        waiting = [w for w in commits.waiting[:GROUP_MAX] if not w.done.cancelled()]
        del commits.waiting[:GROUP_MAX]
        try:
            if len(waiting) == 1:
                outcomes = [await self._one(waiting[0].make)]
            else:
                outcomes = await self._group([w.make for w in waiting]) if waiting else []
        except BaseException:  # cancelled (its loop shuts down): so is every commit waiting
            for member in (*waiting, *commits.waiting):
                member.done.cancel()
            commits.waiting.clear()
            commits.flusher, commits.busy = None, False
            raise
        commits.flusher = None
        self._next(commits, loop)
        for member, (result, error) in zip(waiting, outcomes, strict=True):
            if member.done.cancelled():
                continue
            if error is None:
                member.done.set_result(result)
            else:
                member.done.set_exception(error)

    async def _group(self, makes: list[Callable[[], Plan[Any]]]) -> list[_Outcome]:
        together = functools.partial(_together, makes)
        try:
            outcomes: list[_Outcome] = await self._connected(
                functools.partial(_batched, together, self._prepared)
            )
        except Exception:  # noqa: BLE001 - WroteThenRefused, a wrong guess, any: each again, alone
            return [await self._one(make) for make in makes]
        return outcomes

    async def _one(self, make: Callable[[], Plan[Any]]) -> _Outcome:
        try:
            return (await self.alone(make), None)
        except Exception as error:  # noqa: BLE001 - handed to the commit's caller
            return (None, error)

    async def alone(self, make: Callable[[], Plan[_T]]) -> _T:
        """One commit in a transaction of its own: batched and guessing, else pipelined.

        Also for a write that is not to join a group (a run's creation, whose
        audit entry extends the one chain every creation extends: two in one
        transaction would both read its end) but should still cost a round
        trip per answer it needs, not one per statement.

        A wrong guess (the server fails its statement), or any other failure
        of the batch itself (a statement that cannot be prepared, say), and
        the commit is driven again as the pipeline drives it, answer by answer.
        """
        lone = functools.partial(_lone, make)
        try:
            outcome: _T = await self._connected(functools.partial(_batched, lone, self._prepared))
        except DurabilityError as error:
            if type(error) is not DurabilityError or not _batch_refused(error):
                raise  # a refusal (a lost lease...), or the connection failed: final
        else:
            return outcome
        lone = functools.partial(_lone, make, guess=False)
        outcome = await self._connected(functools.partial(_pipelined, lone))
        return outcome  # noqa: RET504 - typed: _connected returns Any


def _batch_refused(error: DurabilityError) -> bool:
    """Whether the server refused the batch's query itself (worth driving again, pipelined).

    Not when the connection failed (killed, the server shutting down, a
    timeout: psycopg's ``OperationalError``): the transaction's outcome is
    the caller's to hear at once, as it was before commits were batched;
    driven again, the commit would wait on whatever stopped the first.
    """
    import psycopg  # noqa: PLC0415 - psycopg only when driven

    cause = error.__cause__
    return isinstance(cause, psycopg.Error) and not isinstance(cause, psycopg.OperationalError)


async def _batched(
    work: Callable[[Sender], Awaitable[_T]], prepared: Prepared, connection: Connection
) -> _T:
    """``work`` in one transaction whose rounds are one query each (see _postgres_batch)."""
    sender = BatchSender(connection, prepared)
    try:
        result = await work(_Batched(sender))
        if sender.begun and not sender.committed:
            await sender.commit()
    except BaseException:
        if connection.info.transaction_status.name in _IN_TRANSACTION:
            with contextlib.suppress(Exception):
                await connection.execute("ROLLBACK")
        raise
    return result


async def _pipelined(work: Callable[[Sender], Awaitable[_T]], connection: Connection) -> _T:
    """``work`` in one transaction whose BEGIN and COMMIT go in the pipeline with the rest."""
    async with connection.pipeline() as pipeline, connection.transaction():
        return await work(_PipelineSender(connection, pipeline))


async def _lone(make: Callable[[], Plan[_T]], sender: Sender, *, guess: bool = True) -> _T:
    [(result, _)] = await drive_together([make()], sender, alone=True, guess=guess)
    outcome: _T = result
    return outcome


async def _together(makes: list[Callable[[], Plan[Any]]], sender: Sender) -> list[_Outcome]:
    return await drive_together([make() for make in makes], sender)
