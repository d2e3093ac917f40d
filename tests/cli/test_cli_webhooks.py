"""Webhooks reach a real receiver through failures, an outage and a SIGKILL (issue 29, must show 4).

The receiver is a real HTTP server on 127.0.0.1, written here: it answers
500 to its first three deliveries and is down (nothing listening) until
both senders were refused. Runs commit their events (a request, a
failure, a completion) into a SQLite file while it is down; a ``treadle
serve`` (sending the outbox as every server does) is SIGKILLed after it
tried them and before any delivery, and a ``treadle worker`` delivers
them. The ``treadle webhooks`` commands run in the test's process; the
senders are processes of their own, forked with treadle imported
(``tests/forked.py``).
Every message arrives, its signature verified by the ``standardwebhooks``
reference library; a duplicate only ever repeats an id; each run's
messages arrive in commit order. An endpoint that never answers 2xx
turns its messages into dead letters, listed by ``treadle webhooks dead``
and sent again by ``treadle webhooks resend --all-dead``.

The outbox is the store's, so the dead letters, and two senders claiming
at once as processes of their own, are shown on a SQLite file and on
PostgreSQL alike (its trigger writes the messages there).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from treadle_cli import TREADLE, Cli

import forked
from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle.stores import PostgresStore, SqliteStore
from webhook_receiver import Receiver, until, verified

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from server_app import Brief, Verdict, approval, failing

pytestmark = pytest.mark.integration
APP = str(Path(__file__).parents[1] / "server" / "server_app.py")
CLAIMER = str(Path(__file__).parent / "outbox_claimer.py")


class Place:
    """Where the runs and the outbox are: a SQLite file, or a PostgreSQL schema of the test's."""

    def __init__(self, store: str, schema: str | None = None) -> None:
        self.store = store
        self.schema = schema
        self.env = {**os.environ, **({"TREADLE_SCHEMA": schema} if schema else {})}

    def open(self) -> SqliteStore | PostgresStore:
        if self.schema is None:
            return SqliteStore(self.store)
        return PostgresStore(self.store, schema=self.schema)


@pytest.fixture(params=["sqlite", "postgres"])
async def place(request, tmp_path):
    if request.param == "sqlite":
        yield Place(str(tmp_path / "hooks.sqlite"))
        return
    schema = fresh_schema()
    try:
        yield Place(postgres_dsn(), schema)
    finally:
        await drop_schemas([schema])


def treadle(*args: str, env: dict[str, str] | None = None) -> str:
    """A ``treadle`` command run in this process (the senders are the processes under test)."""
    schema = (env or {}).get("TREADLE_SCHEMA")
    done = Cli(Path.cwd(), **({"TREADLE_SCHEMA": schema} if schema else {}))(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def command(*args: str, env: dict[str, str] | None = None) -> forked.Forked:
    """``treadle args`` in a process of its own, forked with the command line imported."""
    return forked.start("treadle._cli._app:main", env=env, argv=[TREADLE, *args])


def worker(store: str, env: dict[str, str] | None = None) -> forked.Forked:
    return command("worker", "--app", APP, "--store", store, "--poll-interval", "0.1", env=env)


def serve(store: str) -> forked.Forked:
    """``treadle serve`` on ``store`` (any free port); its output read once it is killed."""
    return command("serve", "--app", APP, "--store", store, "--port", "0", "--poll-interval", "0.1")


def add_endpoint(store: str, port: int, *extra: str, env: dict[str, str] | None = None) -> str:
    shown = treadle(
        "webhooks", "add", f"http://127.0.0.1:{port}/hook", "--store", store, *extra, env=env
    )
    return shown.split("signing secret: ", 1)[1].split()[0]


async def _commit_runs(path: Path | Place) -> None:
    store = path.open() if isinstance(path, Place) else SqliteStore(path)
    try:
        for n in range(3):
            await approval.run(Brief(f"topic {n}", n), store=store, run_id=f"ask-{n}")
        with pytest.raises(Exception, match="exploded"):
            await failing.run("boom", store=store, run_id="fails")
    finally:
        await store.close()


async def _pending(path: Path) -> list:
    store = SqliteStore(path)
    try:
        return await store.outbox().messages("pending")
    finally:
        await store.close()


def _attempts(path: Path) -> int:
    """The delivery attempts the outbox's pending messages have had, all told."""
    return sum(m.attempts for m in asyncio.run(_pending(path)))


def test_every_event_arrives_signed_once_per_id_in_order_per_run(tmp_path):
    path = tmp_path / "hooks.sqlite"
    store = str(path)
    receiver = Receiver(failures=3)
    asyncio.run(SqliteStore(path).close())  # the file, so webhooks add finds it
    secret = add_endpoint(store, receiver.port, "--backoff", "0.2")
    asyncio.run(_commit_runs(path))  # committed while the receiver is down
    first = serve(store)
    # It starts, tries (connection refused) and retries, leasing messages.
    until(lambda: _attempts(path) > 0, 60)
    first.send_signal(signal.SIGKILL)  # the server, between the commits and any delivery
    first.communicate(timeout=30)
    assert receiver.deliveries == []
    tried = asyncio.run(_pending(path))
    assert len(tried) == 4
    assert any(m.attempts > 0 for m in tried), "the server tried to send them before it died"
    second = worker(store)
    try:
        # Down until the worker, too, was refused: it takes over what the server left.
        until(lambda: _attempts(path) > sum(m.attempts for m in tried), 60)
        receiver.start()
        until(lambda: len({h["webhook-id"] for h, _ in receiver.taken}) >= 4, 60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=30)
        receiver.stop()
    assert len(receiver.deliveries) >= 3 + 4  # three refused, then each taken
    messages = verified(secret, receiver.taken)
    by_id: dict[str, dict] = {}
    for message in messages:  # a duplicate repeats its id and its content
        assert by_id.setdefault(message["id"], message) == message
    kinds = sorted((m["data"]["run_id"], m["type"]) for m in by_id.values())
    assert kinds == [
        ("ask-0", "request.created"),
        ("ask-1", "request.created"),
        ("ask-2", "request.created"),
        ("fails", "run.failed"),
    ]
    for run_id in ("ask-0", "ask-1", "ask-2", "fails"):  # each run's, in commit order
        seqs = [m["data"]["seq"] for m in messages if m["data"]["run_id"] == run_id]
        assert seqs == sorted(seqs)


async def _dead_count(place: Place) -> int:
    store = place.open()
    try:
        return len(await store.outbox().messages("dead"))
    finally:
        await store.close()


def test_a_dead_letter_is_listed_and_resent_from_the_cli(place):
    store, env = place.store, place.env
    asyncio.run(place.open().close())  # the file or schema, so webhooks add finds it
    receiver = Receiver(failures=10**6)  # refuses every delivery, until told otherwise
    receiver.start()
    secret = add_endpoint(store, receiver.port, "--attempts", "2", "--backoff", "0.1", env=env)
    asyncio.run(_commit_runs(place))  # on PostgreSQL the event log's trigger writes the outbox
    running = worker(store, env)

    def dead_letters() -> list[dict]:
        return json.loads(treadle("webhooks", "dead", "--store", store, "--json", env=env))["dead"]

    try:
        until(lambda: asyncio.run(_dead_count(place)) >= 4, 30)
        dead = dead_letters()
        assert sorted(d["type"] for d in dead) == ["request.created"] * 3 + ["run.failed"]
        assert [d["attempts"] for d in dead] == [2] * 4
        assert len(receiver.deliveries) == 8  # two attempts each, none taken
        receiver.failures = 0
        shown = treadle("webhooks", "resend", "--all-dead", "--store", store, env=env)
        assert shown.startswith(f"{len(dead)} dead letter")
        ids = {d["webhook_id"] for d in dead}
        until(lambda: ids <= {h["webhook-id"] for h, _ in receiver.taken}, 30)
    finally:
        running.send_signal(signal.SIGTERM)
        running.communicate(timeout=30)
        receiver.stop()
    verified(secret, receiver.taken)
    assert dead_letters() == []


async def _answered_runs(place: Place, count: int) -> None:
    """``count`` runs, each with three messages in its outbox: asked, answered, completed."""
    store = place.open()
    try:
        for n in range(count):
            result = await approval.run(Brief(f"topic {n}", n), store=store, run_id=f"run-{n}")
            (pending,) = result.pending_requests
            answer = {pending.request_id: Verdict(approved=True, note="ok")}
            await approval.respond(f"run-{n}", answer, store=store, wait=True)
    finally:
        await store.close()


def test_two_senders_at_once_never_hold_one_runs_messages_together(place):
    """Two sender processes claim one outbox at once: each message is held by one, once.

    And a run's next message is claimed only after its previous one was
    sent, so each run's messages go one at a time, in commit order,
    whichever sender holds them.
    """
    asyncio.run(place.open().close())
    add_endpoint(place.store, 9, env=place.env)  # never reached: the claimers only claim
    asyncio.run(_answered_runs(place, 8))
    env = {**place.env, "PYTHONPATH": str(Path(CLAIMER).parent)}
    claimers = [  # each a process of its own, forked with treadle imported
        forked.start("outbox_claimer:cli", env=env, argv=[CLAIMER, place.store, owner], stdin=True)
        for owner in ("sender-a", "sender-b")
    ]
    for claimer in claimers:
        assert claimer.stdout.readline().strip() == "ready", claimer.finish(60)[2]
    for claimer in claimers:  # both start claiming now
        assert claimer.stdin is not None
        claimer.stdin.write("go\n")
        claimer.stdin.flush()
    held = []
    for code, out, err in forked.communicate_all(claimers, timeout=60):
        assert code == 0, err
        held.append(json.loads(out.splitlines()[-1]))
    assert all(held), f"each sender claimed some: {[len(h) for h in held]}"
    every = [row for rows in held for row in rows]
    assert len(every) == 8 * 3
    assert len({row[0] for row in every}) == 8 * 3  # each message held once, by one sender
    for n in range(8):
        mine = sorted((row for row in every if row[1] == f"run-{n}"), key=lambda row: row[3])
        assert [row[2] for row in mine] == sorted(row[2] for row in mine)  # commit order
        for before, after in itertools.pairwise(mine):
            assert after[3] > before[4], f"run-{n}: a message claimed while one was held"
    asyncio.run(_no_message_left(place))


async def _no_message_left(place: Place) -> None:
    store = place.open()
    try:
        assert await store.outbox().messages("pending") == []
    finally:
        await store.close()
