"""A ``treadle worker`` is woken by a client at once, also the worker that created the schema.

The first worker on an empty database creates treadle's schema and tables
(docs/deploy.md). Its poll interval here is long (8 s), so a start or an
answer it picked up only by polling would wait seconds; woken by the
client's notification, it takes each up in a fraction of that.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import scale_app
from chaos import worker_dsn
from processes import start_worker, wait_until

from treadle import RunStatus
from treadle.stores import PostgresStore
from treadle.workers import Client

if TYPE_CHECKING:
    from pathlib import Path

POLL = 8.0
PROMPT = POLL / 4  # well under a poll interval, and far above a wake-up's few milliseconds


async def _listening(dsn: str, name: str) -> bool:
    """Whether the worker's listening connection has sent its ``LISTEN``.

    Asked on a connection of the test's own: a store would create the schema.
    """
    import psycopg  # noqa: PLC0415 - the extra's driver

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        found = await db.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND query LIKE 'LISTEN%%'",
            (name,),
        )
        return await found.fetchone() is not None


async def _status_within(client: Client, run_id: str, status: RunStatus) -> float:
    """Seconds until the run has ``status`` (polled often: another process moves it)."""
    began = time.monotonic()

    async def reached() -> bool:
        return (await client.get(run_id)).status == status

    await wait_until(reached, interval=0.01)
    return time.monotonic() - began


async def test_the_worker_that_creates_the_schema_is_woken_by_a_clients_start_and_answer(
    dsn: str, schema: str, tmp_path: Path
) -> None:
    name = f"wake-{schema}"  # its connections' application_name, to find its LISTEN
    worker = start_worker(
        worker_dsn(dsn, name), schema, tmp_path / "worker.log", name=name, lease=30, poll=POLL
    )
    store = PostgresStore(dsn, schema=schema)
    try:
        # The worker alone has reached the empty database: the schema is its to create.
        await wait_until(lambda: _listening(dsn, name), interval=0.05)
        client = Client(store, [scale_app.asker])
        await client.start("asker", "colour?", run_id="q")
        started = await _status_within(client, "q", RunStatus.AWAITING_INPUT)
        (request,) = (await client.result("q")).pending_requests
        await client.respond("q", {request.request_id: "blue"})
        answered = await _status_within(client, "q", RunStatus.COMPLETED)
        assert worker.poll() is None, (tmp_path / "worker.log").read_text()
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        await store.close()
    log = (tmp_path / "worker.log").read_text()
    assert started < PROMPT, f"started after {started:.2f} s (poll {POLL} s)\n{log}"
    assert answered < PROMPT, f"answered after {answered:.2f} s (poll {POLL} s)\n{log}"


async def announced(listener: Any, schema: str, seconds: float) -> bool:
    """Whether ``schema``'s runs are announced ready within ``seconds``.

    The channel is the server's, shared by every schema: other tests' workers
    announce theirs on it too, so only this schema's announcements count.
    """
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        async for notice in listener.notifies(timeout=left, stop_after=1):
            if notice.payload == schema:
                return True
    return False


async def test_a_run_given_back_ready_is_announced_and_one_ended_is_not(
    dsn: str, schema: str, store: PostgresStore
) -> None:
    """A release's answer (is the run ready?) is taken for granted as no; the server checks it.

    So a run given back before it ended (here: claimed, never started) must
    still be announced to idle workers, and a run that completed is not.
    """
    import psycopg  # noqa: PLC0415 - the extra's driver
    from psycopg import sql  # noqa: PLC0415

    from treadle._stores._postgres_queue import RunQueue  # noqa: PLC0415
    from treadle._stores._sql_ownership import READY_CHANNEL  # noqa: PLC0415

    client = Client(store, [scale_app.counter])
    await client.start("counter", {"total": 2}, run_id="handed-back")
    queue = RunQueue(store, "me", lease=30)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as listener:
        await listener.execute(f"LISTEN {READY_CHANNEL}")
        (claim,) = await queue.claim([("counter", 1)], time.time(), 1)
        assert await queue.release(claim, time.time())
        assert await announced(listener, schema, PROMPT)
        (claim,) = await queue.claim([("counter", 1)], time.time(), 1)
        ended = sql.SQL("UPDATE {} SET status = 'completed' WHERE run_id = 'handed-back'")
        await listener.execute(ended.format(sql.Identifier(schema, "treadle_runs")))
        assert await queue.release(claim, time.time())
        assert not await announced(listener, schema, 0.5)
