"""Claims, leases, fencing and the inbox, against the real PostgreSQL, in one process.

Workers here are real ``Worker`` objects (and bare ``RunQueue``s where a
test must hold a lease without running anything); the chaos campaign with
worker processes killed and paused is in ``test_chaos.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import sys
import time

import pytest
import scale_app
from processes import HERE
from psycopg import sql

import treadle.workers
from treadle import RunStatus
from treadle._stores._postgres_queue import RunQueue
from treadle._stores._store import CheckpointInfo, CheckpointRecord, Lease
from treadle.errors import (
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RequestError,
    RunExistsError,
)
from treadle.stores import PostgresStore
from treadle.workers import Worker

WORKFLOWS = [scale_app.counter, scale_app.asker, scale_app.napper]


async def install_commit_log(dsn: str, schema: str) -> None:
    """Log every checkpoint insert in a table with no unique key, by trigger."""
    import psycopg  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await db.execute("CREATE TABLE commit_log (run_id TEXT, superstep BIGINT)")
        await db.execute(
            "CREATE FUNCTION log_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO commit_log VALUES (NEW.run_id, NEW.superstep); RETURN NEW; END $$"
        )
        await db.execute(
            "CREATE TRIGGER log_commit AFTER INSERT ON treadle_checkpoints"
            " FOR EACH ROW EXECUTE FUNCTION log_commit()"
        )


async def query(dsn: str, schema: str, statement: str) -> list[tuple[object, ...]]:
    import psycopg  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as db:
        await db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return await (await db.execute(statement)).fetchall()  # type: ignore[arg-type]


def worker(store: PostgresStore, **options: object) -> Worker:
    settings: dict[str, object] = {"lease": 2.0, "poll_interval": 0.05, **options}
    return Worker(store, WORKFLOWS, **settings)  # type: ignore[arg-type]


async def test_a_worker_runs_a_client_started_run_to_the_same_outputs_as_one_process(store):
    client = treadle.workers.Client(store, WORKFLOWS)
    run_id = await client.start("counter", {"total": 20}, run_id="c-1")
    assert (await client.get(run_id)).status == "pending"
    assert await worker(store).run_until_idle() == 1
    result = await client.result(run_id)
    alone = await scale_app.counter.run(scale_app.Job(20))
    assert result.status is RunStatus.COMPLETED
    assert result.outputs == alone.outputs
    assert result.superstep == alone.superstep == 21


async def test_two_clients_starting_one_run_id_at_once_produce_one_run(dsn, schema, store):
    await store.list_runs()  # create the tables
    clients = [treadle.workers.connect(dsn, schema=schema) for _ in range(2)]
    try:
        ids = [f"same-{n}" for n in range(10)]
        started = await asyncio.gather(
            *(client.start("counter", {"total": 2}, run_id=i) for i in ids for client in clients)
        )
        assert sorted(set(started)) == sorted(ids)
        with pytest.raises(RunExistsError):
            await clients[0].start("asker", "other workflow, same id", run_id="same-0")
    finally:
        for client in clients:
            await client.close()
    assert await query(dsn, schema, "SELECT count(*) FROM treadle_runs") == [(10,)]
    assert await query(dsn, schema, "SELECT count(*) FROM treadle_inbox") == [(10,)]
    await worker(store).run_until_idle()
    outputs = await query(
        dsn, schema, "SELECT count(*) FROM treadle_runs WHERE status = 'completed'"
    )
    assert outputs == [(10,)]


async def test_concurrent_claims_never_hand_one_run_to_two_workers(dsn, schema, store):
    client = treadle.workers.Client(store)
    for n in range(60):
        await client.start("counter", {"total": 1}, run_id=f"r{n}")
    stores = [PostgresStore(dsn, schema=schema) for _ in range(4)]
    queues = [RunQueue(s, f"w{n}", lease=30) for n, s in enumerate(stores)]
    try:
        rounds = await asyncio.gather(
            *(q.claim([("counter", 1)], time.time(), 10) for q in queues for _ in range(3))
        )
    finally:
        for s in stores:
            await s.close()
    claimed = [claim.run_id for batch in rounds for claim in batch]
    assert len(claimed) == len(set(claimed)) == 60


async def test_a_stale_worker_commits_nothing_once_another_has_taken_its_run_over(
    dsn, schema, store
):
    await store.list_runs()  # create the tables
    await install_commit_log(dsn, schema)
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="stale")
    stale = RunQueue(store, "stale-worker", lease=0.2)
    (claim,) = await stale.claim([("asker", 1)], time.time(), 1)
    view = stale.leased(claim, None)
    # The stale worker starts the run under its lease: the run rests on its request.
    (start,) = await stale.inbox("stale")
    view.consume(start.seq)
    await scale_app.asker.run("colour?", run_id="stale", store=view)
    before = await store.list_checkpoints("stale")
    (request,) = (await client.result("stale")).pending_requests
    await asyncio.sleep(0.3)  # its lease lapses without a heartbeat
    fresh = RunQueue(store, "fresh-worker", lease=30)
    (taken,) = await fresh.claim([("asker", 1)], time.time(), 1)
    assert (taken.run_id, taken.epoch, taken.recoveries) == ("stale", claim.epoch + 1, 1)
    # An answer arrives; the stale worker, resumed, applies it and tries to commit. Refused.
    await client.respond("stale", {request.request_id: "x"})
    with pytest.raises(LeaseLostError, match="nothing was committed"):
        await scale_app.asker.resume("stale", store=view)
    assert await store.list_checkpoints("stale") == before
    assert (await store.get_run("stale")).status == "awaiting_input"
    assert not await stale.release(claim, time.time())  # nor can it release the run
    log = await query(
        dsn, schema, "SELECT superstep, count(*) FROM commit_log GROUP BY 1 ORDER BY 1"
    )
    assert log == [(0, 1), (1, 1)]


async def test_a_response_delivered_while_no_worker_runs_is_applied_exactly_once(
    dsn, schema, store
):
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="hitl")
    await worker(store).run_until_idle()  # the worker parks the run on its request, then stops
    rested = await client.result("hitl")
    assert rested.status is RunStatus.AWAITING_INPUT
    (request,) = rested.pending_requests
    # No worker runs now. The answer waits in the run's inbox.
    await client.respond("hitl", {request.request_id: "blue"})
    assert (await client.get("hitl")).status == "awaiting_input"
    unapplied = "SELECT kind, target FROM treadle_inbox WHERE consumed_at IS NULL"
    assert await query(dsn, schema, unapplied) == [("answer", request.request_id)]
    # A worker starts: it applies the answer, once.
    assert await worker(store).run_until_idle() == 1
    done = await client.result("hitl")
    assert (done.status, done.outputs) == (RunStatus.COMPLETED, ["colour? -> blue"])
    # Applied, and kept as the ledger of answers (and of the start input).
    assert (
        await query(dsn, schema, "SELECT kind FROM treadle_inbox WHERE consumed_at IS NULL") == []
    )
    assert await query(dsn, schema, "SELECT kind FROM treadle_inbox ORDER BY seq") == [
        ("start",),
        ("answer",),
    ]
    assert await worker(store).run_until_idle() == 0  # nothing left to apply
    assert (await client.result("hitl")).outputs == ["colour? -> blue"]
    with pytest.raises(RequestAlreadyAnsweredError, match="blue"):  # answered, and ended
        await client.respond("hitl", {request.request_id: "again"})
    with pytest.raises(RequestError, match="has ended"):  # a message: refused as too late
        await client.send_message("hitl", "more")


async def test_a_run_that_keeps_losing_its_worker_is_parked_failed_with_the_reason(store):
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("counter", {"total": 3}, run_id="loop")
    for n in range(4):  # four workers in a row die holding it (their leases lapse)
        dying = RunQueue(store, f"dying-{n}", lease=0.05)
        (claim,) = await dying.claim([("counter", 1)], time.time(), 1)
        assert claim.recoveries == n
        await asyncio.sleep(0.08)
    assert await worker(store, max_recoveries=3).run_until_idle() == 1
    row = await client.get("loop")
    assert row.status == "failed"
    assert row.error is not None
    assert "lost 4 times in a row" in row.error
    assert "max_recoveries=3" in row.error
    assert await worker(store).run_until_idle() == 0  # parked: not claimed again


async def test_cancelling_a_run_a_worker_holds_fences_the_worker_out(store, caplog):
    caplog.set_level(logging.INFO, logger="treadle.worker")
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("counter", {"total": 200, "pause": 0.01}, run_id="doomed")
    busy = worker(store, lease=0.6, poll_interval=0.05)
    serving = asyncio.create_task(busy.serve())
    try:
        async with asyncio.timeout(10):
            async for row in client.watch("doomed", poll_interval=0.02):
                if row.superstep >= 5:
                    break
        await client.cancel("doomed")
        cancelled_at = (await client.get("doomed")).superstep
        await asyncio.sleep(0.5)  # the worker's next commit (or heartbeat) finds the fence
    finally:
        busy.stop()
        await serving
    row = await client.get("doomed")
    assert row.status == "cancelled"
    assert row.superstep == cancelled_at  # nothing committed after the cancel
    # Said as what it is: a cancel fences the worker out as a takeover would, but nobody took
    # the run over (it said "lease lost, left to its new owner").
    assert "run doomed was cancelled; its lease (epoch 1) is given up" in caplog.text
    assert "lease lost" not in caplog.text


async def test_a_stopping_worker_commits_its_superstep_and_hands_the_run_on(dsn, schema, store):
    await store.list_runs()
    await install_commit_log(dsn, schema)
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("counter", {"total": 40, "pause": 0.01}, run_id="handed")
    first = worker(store)
    serving = asyncio.create_task(first.serve())
    async with asyncio.timeout(10):
        async for row in client.watch("handed", poll_interval=0.02):
            if row.superstep >= 5:
                break
    first.stop()
    await serving
    row = await client.get("handed")
    assert row.status == "running"
    assert 5 <= row.superstep < 41
    # Released, not left to its lease: the next worker takes it at once.
    await worker(store).run_until_idle()
    result = await client.result("handed")
    alone = await scale_app.counter.run(scale_app.Job(40))
    assert result.outputs == alone.outputs
    dupes = await query(
        dsn, schema, "SELECT superstep FROM commit_log GROUP BY 1 HAVING count(*) > 1"
    )
    assert dupes == []
    assert await query(dsn, schema, "SELECT count(*) FROM commit_log") == [(42,)]


async def test_a_worker_started_run_records_where_its_workflow_lives_for_clients(dsn, schema):
    from treadle._scaleout._apps import load_app  # noqa: PLC0415

    store = PostgresStore(dsn, schema=schema)
    try:
        served = load_app("scale_app")
        assert sorted(w.name for w in served) == ["asker", "counter", "napper"]
        await treadle.workers.Client(store).start("counter", {"total": 3}, run_id="o")
        await Worker(store, served, lease=2, poll_interval=0.05).run_until_idle()
    finally:
        await store.close()
    async with treadle.workers.connect(dsn, schema=schema) as client:  # knows no workflow
        result = await client.result("o")
        assert result.outputs == (await scale_app.counter.run(scale_app.Job(3))).outputs
        assert [r.run_id for r in await client.list_runs(status="completed")] == ["o"]
        assert await client.list_runs(workflow="asker") == []


async def test_a_worker_with_another_graph_under_the_name_parks_the_run_naming_the_change(store):
    """Parked, not failed: the run keeps its status and checkpoints for code that can load it."""
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="moved")
    await worker(store).run_until_idle()
    (request,) = (await client.result("moved")).pending_requests
    await client.respond("moved", {request.request_id: "blue"})

    @treadle.executor(id="ask")
    async def ask_twice(question: str, ctx: treadle.WorkflowContext) -> None:
        ctx.send_message(question)

    @treadle.executor(id="echo")
    async def echo(question: str, ctx: treadle.WorkflowContext) -> None:
        ctx.yield_output(question)

    changed = treadle.WorkflowBuilder(ask_twice, name="asker").add_edge(ask_twice, echo).build()
    assert await Worker(store, [changed], lease=2, poll_interval=0.05).run_until_idle() == 1
    row = await client.get("moved")
    assert row.status == "awaiting_input"
    assert row.parked is not None
    assert row.parked.startswith("GraphChangedError")
    assert "echo" in row.parked
    assert row.owner is None  # released
    assert await worker(store).run_until_idle() == 0  # parked: no worker takes it again
    # The right code, resumed by hand, takes it up and applies the answer that waited.
    (asker,) = [w for w in WORKFLOWS if w.name == "asker"]
    done = await asker.resume("moved", store=store)
    assert done.status.value == "completed"
    assert (await client.get("moved")).parked is None


async def test_an_input_that_fits_no_handler_parks_the_run_failed_saying_so(store):
    client = treadle.workers.Client(store)
    await client.start("counter", {"totl": 3}, run_id="typo")
    assert await worker(store).run_until_idle() == 1
    row = await client.get("typo")
    assert row.status == "failed"
    assert row.error is not None
    assert "does not fit the start executor 'begin'" in row.error
    assert await worker(store).run_until_idle() == 0  # parked, not claimed in a loop


async def test_a_client_deadline_is_kept_by_the_worker_and_fails_the_run_when_passed(store):
    client = treadle.workers.Client(store, WORKFLOWS)
    # Two seconds: on a loaded machine the worker's first supersteps came a second late.
    await client.start("counter", {"total": 200, "pause": 0.03}, run_id="late", timeout=2.0)
    await client.start("counter", {"total": 3}, run_id="in-time", timeout=60)
    await worker(store).run_until_idle()
    late, in_time = await client.get("late"), await client.get("in-time")
    assert late.deadline_at is not None
    assert in_time.deadline_at is not None
    assert (late.status, in_time.status) == ("failed", "completed")
    assert late.error is not None
    assert "passed its deadline" in late.error
    assert 5 < late.superstep < 201


async def test_an_idle_worker_takes_new_runs_and_answers_at_once_not_a_poll_later(store):
    client = treadle.workers.Client(store, WORKFLOWS)
    await store.list_runs()  # the tables exist before the worker listens
    idle = worker(store, lease=120.0, poll_interval=60.0)  # a poll would come a minute later
    serving = asyncio.create_task(idle.serve())
    try:
        await asyncio.sleep(1.0)  # the worker has claimed nothing and listens
        await client.start("asker", "colour?", run_id="prompt")
        rested = await client.wait("prompt", timeout=20, until_rest=True)
        assert rested.status == "awaiting_input"
        (request,) = (await client.result("prompt")).pending_requests
        await client.respond("prompt", {request.request_id: "green"})
        assert (await client.wait("prompt", timeout=20)).status == "completed"
    finally:
        idle.stop()
        await serving
    assert (await client.result("prompt")).outputs == ["colour? -> green"]


# One client process: connects, waits for the common start time, answers.
ANSWERING_CLIENT = """
import asyncio, json, sys, time
import treadle.workers
from treadle.errors import RequestAlreadyAnsweredError

async def main(dsn, schema, run_id, request_id, answer, start_at):
    async with treadle.workers.connect(dsn, schema=schema) as client:
        await client.get(run_id)  # connected before the start, so all answer at once
        await asyncio.sleep(max(0.0, float(start_at) - time.time()))
        try:
            await client.respond(run_id, {request_id: answer})
        except RequestAlreadyAnsweredError as refused:
            print(json.dumps(["refused", refused.answer]))
        else:
            print(json.dumps(["accepted", answer]))

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.integration
async def test_eight_client_processes_answering_one_request_at_once_get_one_acceptance(
    dsn, schema, store
):
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="raced")
    await worker(store).run_until_idle()
    (request,) = (await client.result("raced")).pending_requests
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{HERE.parent}"}
    start_at = time.time() + 5  # after every process has imported treadle and connected
    processes = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, "-c", ANSWERING_CLIENT, dsn, schema, "raced"),
            *(request.request_id, f"colour-{n}", str(start_at)),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(8)
    ]
    outcomes = []
    for process in processes:
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        outcomes.append(json.loads(out))
    assert time.time() > start_at  # they did wait for the start
    accepted = [answer for verdict, answer in outcomes if verdict == "accepted"]
    refused = [answer for verdict, answer in outcomes if verdict == "refused"]
    assert (len(accepted), len(refused)) == (1, 7), outcomes
    (winner,) = accepted
    assert refused == [json.dumps(winner)] * 7  # each refusal names the answer that won
    assert await query(
        dsn, schema, "SELECT convert_from(payload, 'UTF8') FROM treadle_inbox WHERE kind = 'answer'"
    ) == [(json.dumps(winner),)]
    await worker(store).run_until_idle()
    assert (await client.result("raced")).outputs == [f"colour? -> {winner}"]
    with pytest.raises(RequestAlreadyAnsweredError):  # answered first, whatever came since
        await client.respond("raced", {request.request_id: "late"})


async def test_a_second_answer_is_refused_whole_naming_the_first(store):
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="asked")
    await worker(store).run_until_idle()
    (request,) = (await client.result("asked")).pending_requests
    await client.respond("asked", {request.request_id: "blue"})
    late = [("answer", "another-request", b'"x"'), ("answer", request.request_id, b'"red"')]
    with pytest.raises(RequestAlreadyAnsweredError, match='"blue"') as refused:
        await store.deliver("asked", late)  # the store's decision, whoever delivers
    assert (refused.value.run_id, refused.value.request_id) == ("asked", request.request_id)
    (kept,) = await store.inbox("asked")  # nothing of the refused batch landed
    assert (kept.kind, kept.target, kept.payload) == ("answer", request.request_id, b'"blue"')
    await worker(store).run_until_idle()
    assert (await client.result("asked")).outputs == ["colour? -> blue"]


async def make_orphan(store, dsn, schema, run_id, *, parked=None):
    """A counter run left mid-run by an in-process owner that died: no ``ready_at``."""
    await scale_app.counter.run(scale_app.Job(6), run_id=run_id, store=store)
    at_two = next(c for c in await store.list_checkpoints(run_id) if c.superstep == 2)
    await query(
        dsn,
        schema,
        "UPDATE treadle_runs SET status = 'running', superstep = 2,"  # noqa: S608 - the test's own
        f" checkpoint_id = '{at_two.checkpoint_id}', owner = 'gone:1:x',"
        " lease_until = 1.0, ready_at = NULL, parked = "
        + ("NULL" if parked is None else f"'{parked}'")
        + f" WHERE run_id = '{run_id}' RETURNING run_id",
    )


async def test_a_worker_takes_over_a_run_whose_in_process_owner_died_mid_run(dsn, schema, store):
    await make_orphan(store, dsn, schema, "orphan")
    await make_orphan(store, dsn, schema, "parked", parked="GraphChangedError: moved")
    queue = RunQueue(store, "taker", lease=30)
    (claim,) = await queue.claim([("counter", 1)], time.time(), 10)  # the parked one is not taken
    assert (claim.run_id, claim.status, claim.recoveries) == ("orphan", "running", 1)
    assert await queue.release(claim, time.time())
    assert await worker(store).run_until_idle() == 1
    result = await treadle.workers.Client(store, WORKFLOWS).result("orphan")
    alone = await scale_app.counter.run(scale_app.Job(6))
    assert (result.status, result.outputs) == (RunStatus.COMPLETED, alone.outputs)
    row = await store.get_run("parked")
    assert (row.status, row.superstep, row.parked) == ("running", 2, "GraphChangedError: moved")


async def test_a_leased_view_answers_the_ownership_port_from_its_claim(store):
    client = treadle.workers.Client(store, WORKFLOWS)
    await client.start("asker", "colour?", run_id="held")
    await client.start("asker", "shape?", run_id="other")
    queue = RunQueue(store, "holder", lease=30)
    (claim, _) = sorted(await queue.claim([("asker", 1)], time.time(), 2), key=lambda c: c.run_id)
    assert claim.run_id == "held"
    view = queue.leased(claim, None)
    before = time.time()
    lease = await view.acquire("held", "ignored", 10)
    assert (lease.run_id, lease.owner, lease.epoch) == ("held", "holder", claim.epoch)
    assert before + 10 <= lease.until <= time.time() + 10
    with pytest.raises(LeaseLostError):
        await view.acquire("other", "holder", 10)
    assert (await view.renew(lease, 60)).epoch == claim.epoch
    assert await view.release(lease) is True
    row = await store.get_run("held")
    assert (row.owner, row.parked) == ("holder", None)  # nothing was written
    # Deliveries, the inbox and answers are the store's.
    await view.deliver("held", [("message", None, b'"m"')])
    items = await view.inbox("held")
    assert [item.kind for item in items] == ["start", "message"]
    assert await view.answer_of("held", "nope") is None
    # A commit marks what the engine applied; it does not give the claim up.
    info = CheckpointInfo("held/1", "held", 1, "running", None, time.time())
    batch = [CheckpointRecord(info, b"blob")]
    await view.commit_many(batch, lease=lease, consumed=items[-1].seq, release=True)
    assert await store.inbox("held") == []
    assert (await store.get_run("held")).owner == "holder"
    # Parking is fenced by the claim; once released, no worker takes the run.
    await view.park(lease, "cannot load it")
    assert (await store.get_run("held")).parked == "cannot load it"
    assert await queue.release(claim, time.time())
    assert await worker(store).run_until_idle() == 0
    stale = queue.leased(dataclasses.replace(claim, epoch=claim.epoch - 1), None)
    with pytest.raises(LeaseLostError):
        await stale.park(Lease("held", "holder", claim.epoch - 1, time.time()), "late")
