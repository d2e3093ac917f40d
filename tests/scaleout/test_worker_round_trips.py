"""What a worker asks of PostgreSQL for a run besides its commits: its claim, nothing more.

A claimed run's inbox and deadline come with its claim (two queries for
every run claimed at once: BEGIN with the claim, the inboxes' read with
COMMIT); its start, its commits and its release are
write plans of the store's group commits, each one query of prepared
statements ending with its COMMIT, sharing transactions with the other runs'
writes when several are in flight. Counted here at psycopg's cursor, for
one run served alone, so each of those writes is a transaction of its own.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psycopg
import scale_app

import treadle.workers
from treadle._stores import _postgres_batch, _sql_queue
from treadle._stores._postgres_queue import RunQueue
from treadle.workers import Worker

if TYPE_CHECKING:
    import pytest

    from treadle.stores import PostgresStore

SUPERSTEPS = 6

# The claim loop's own queries, a round each, however many runs it claims.
_CLAIM_LOOP = (
    "SELECT s.schedule_id",  # due schedule ticks
    "SELECT DISTINCT workflow FROM treadle_starts",  # queued starts
    "SELECT name FROM pg_prepared_statements",  # once per connection
)


# The claim's two batches (BEGIN with the claim; the inboxes' read with COMMIT), by the
# names of their prepared statements; a claim that found nothing ends with a bare COMMIT.
_CLAIM_BATCHES = tuple(
    f"EXECUTE {_postgres_batch._prepared_as(statement)[0]}("
    for statement in (_sql_queue.CLAIM_BATCHED, _sql_queue.SELECT_INBOXES)
)


def _run_queries(queries: list[str]) -> list[str]:
    """The queries not of the claim loop nor of setting a connection up."""
    ran = []
    claiming = False
    for query in queries:
        of_claim = any(name in query for name in _CLAIM_BATCHES)
        if of_claim or (claiming and query == "COMMIT"):
            claiming = of_claim
            continue
        claiming = False
        if query.startswith(_CLAIM_LOOP) or "search_path" in query or "set_config" in query:
            continue
        ran.append(query)
    return ran


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every query psycopg's async cursors send from now on (until ``undo``)."""
    queries: list[str] = []
    executed = psycopg.AsyncCursor.execute

    async def recorded(self: psycopg.AsyncCursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        queries.append(query.decode() if isinstance(query, bytes) else str(query))
        return await executed(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", recorded)
    return queries


async def test_a_run_costs_a_query_a_write_and_no_read_of_its_own(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = treadle.workers.Client(store, [scale_app.counter])
    await client.start("counter", {"total": SUPERSTEPS}, run_id="rt-1")
    sent = _recording(monkeypatch)
    worker = Worker(store, [scale_app.counter], lease=5.0, poll_interval=0.05, concurrency=1)
    assert await worker.run_until_idle() == 1
    monkeypatch.undo()
    assert (await client.get("rt-1")).status == "completed"
    checkpoints = await store.list_checkpoints("rt-1")
    ran = _run_queries([" ".join(query.split()) for query in sent])
    batches = [query for query in ran if query.startswith(("PREPARE", "BEGIN", "EXECUTE"))]
    # Each write (the start, every commit after it, the release) is one query, its COMMIT at
    # the end: no statement alone, no read of the run's row or inbox of its own.
    writes = len(checkpoints) + 1  # the start writes the first checkpoint; then the release
    assert len(batches) <= writes
    assert all(query.endswith("; COMMIT") for query in batches), batches
    assert ran == batches, [q for q in ran if q not in batches]


async def test_a_claim_round_finding_no_queued_start_due_begins_no_transaction(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked at every claim round, that nothing is due is one read: no BEGIN, no COMMIT."""
    client = treadle.workers.Client(store, [scale_app.counter])
    await client.start("counter", {"total": 1}, run_id="rt-2")  # started, not queued
    begun: list[object] = []
    transaction = psycopg.AsyncConnection.transaction

    def counted(self: psycopg.AsyncConnection[Any], *args: Any, **kw: Any) -> Any:
        begun.append(self)
        return transaction(self, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted)
    assert await store.admit_queued(["counter"], time.time(), limit=4) == 0
    monkeypatch.undo()
    assert begun == []


async def test_a_claim_is_two_queries_begin_with_the_claim_and_commit_with_the_inboxes(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No round trip for BEGIN or COMMIT alone: each goes with a statement of the claim."""
    client = treadle.workers.Client(store, [scale_app.counter])
    await client.start("counter", {"total": 1}, run_id="rt-3")
    queue = RunQueue(store, "me", lease=5.0)
    await queue.claim([("nothing-hosted", 1)], time.time(), 1)  # the connection's prepared read
    queries = _recording(monkeypatch)
    (claim,) = await queue.claim([("counter", 1)], time.time(), 4)
    monkeypatch.undo()
    assert (claim.run_id, claim.epoch) == ("rt-3", 1)
    assert [item.kind for item in claim.inbox] == ["start"]
    claimed, read = queries
    assert claimed.startswith(("BEGIN", "PREPARE"))
    assert _CLAIM_BATCHES[0] in claimed
    assert claimed.count("BEGIN") == 1
    assert "COMMIT" not in claimed
    assert _CLAIM_BATCHES[1] in read
    assert read.endswith(";\nCOMMIT")


async def test_a_clients_start_is_three_queries_its_commit_in_the_last(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whether the id is new; the inbox, the announcement and the audit chain's end; the
    # chain's entry and the run's log with COMMIT: a query per answer needed, the chain's
    # lock held for one round trip and the COMMIT.
    client = treadle.workers.Client(store, [scale_app.counter])
    await client.start("counter", {"total": 1}, run_id="warm")  # statements prepared
    queries = _recording(monkeypatch)
    await client.start("counter", {"total": 1}, run_id="counted")
    again = await client.start("counter", {"total": 1}, run_id="counted")  # idempotent
    monkeypatch.undo()
    first, chained, committed, *rest = queries
    assert first.startswith("BEGIN")
    assert "LOCK TABLE treadle_audit" in chained
    assert committed.endswith("COMMIT")
    assert len(rest) == 3  # the second start: the id taken, its workflow read, COMMIT: no write
    assert again == "counted"
    row = await store.get_run("counted")
    assert (row.status, row.workflow) == ("pending", "counter")
