"""Webhook receivers that misbehave: one that redirects, one that never answers.

A real server (in process, on a SQLite file) and real receivers on
127.0.0.1. A receiver that answers a POST with a redirect never got the
message, so the message is not delivered (it was: urllib followed the 303
with a GET, whose 200 took the message out of the outbox). Receivers that
hold their connections open must not hold up anything but their own
messages: a run whose step is synchronous still runs meanwhile (it waited,
as every delivery's thread was one of the loop's default executor).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import select
import socket
import threading
import time

import pytest

from server.conftest import serving
from treadle._operations import _webhooks as webhooks
from treadle._operations._webhooks import outbox_of
from treadle._stores._outbox import new_endpoint

pytestmark = pytest.mark.integration


class Redirecting(http.server.BaseHTTPRequestHandler):
    """Answers every POST with 303 to /elsewhere, whose GET answers 200."""

    seen: list[str]

    def do_POST(self) -> None:
        self.seen.append("POST " + self.path)
        self.send_response(303)
        self.send_header("location", "/elsewhere")
        self.end_headers()

    def do_GET(self) -> None:
        self.seen.append("GET " + self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class Holding:
    """A receiver that keeps every connection open, answering nothing, until released.

    It notes each connection the client closes meanwhile (a delivery that
    gave up waiting).
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.release = threading.Event()
        self.held = 0
        self.closed_by_client = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.release.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.held += 1
            threading.Thread(target=self._hold, args=(connection,), daemon=True).start()

    def _hold(self, connection: socket.socket) -> None:
        with connection:
            while not self.release.is_set():
                readable, _, _ = select.select([connection], [], [], 0.05)
                if readable:
                    try:
                        data = connection.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        with self.lock:
                            self.closed_by_client += 1
                        return

    def stop(self) -> None:
        self.release.set()
        self.listener.close()


async def until(condition, seconds: float = 30) -> None:
    async with asyncio.timeout(seconds):
        while not await condition():  # noqa: ASYNC110 - conditions of other threads
            await asyncio.sleep(0.05)


async def test_a_redirect_is_not_a_delivery(tmp_path):
    seen: list[str] = []
    handler = type("Handler", (Redirecting,), {"seen": seen})
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    try:
        async with serving(f"sqlite:///{tmp_path / 'runs.sqlite'}") as api:
            outbox = outbox_of(api.store)
            await outbox.add_endpoint(
                new_endpoint(url, ("run.failed",), now=time.time(), attempts=1)
            )
            await api.start("failing", "boom", run_id="fails")

            async def settled() -> bool:
                return bool(seen) and not await outbox.messages("pending", 10)

            await until(settled)
            dead = await outbox.messages("dead", 10)
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert seen[0] == "POST /hook"
    assert [m.run_id for m in dead] == ["fails"], "a redirected message counted as delivered"
    assert "303" in (dead[0].last_error or "")
    assert "redirect" in (dead[0].last_error or "")


async def test_receivers_that_never_answer_hold_up_no_run(tmp_path):
    receiver = Holding()
    url = f"http://127.0.0.1:{receiver.port}/hook"
    try:
        async with serving(
            f"sqlite:///{tmp_path / 'runs.sqlite'}", apps=("server_app", "webhook_app")
        ) as api:
            outbox = outbox_of(api.store)
            await outbox.add_endpoint(new_endpoint(url, ("run.completed",), now=time.time()))
            for number in range(12):  # a message each, all sent at once, none answered
                run = await api.start("quick", number, run_id=f"quick-{number}")
                await api.wait_for(run["run_id"], {"completed"})

            async def all_held() -> bool:
                return receiver.held >= 12

            await until(all_held)
            run = await api.start("counted", 1, run_id="counted")
            detail = await api.wait_for(run["run_id"], {"completed", "failed"}, limit=60)
            closed = receiver.closed_by_client
    finally:
        receiver.stop()
    assert detail["run"]["status"] == "completed"
    assert closed == 0, "the sync step waited until deliveries gave up"


class Answering:
    """A receiver that reads each request and answers ``reply`` (then, if ``trickle``, forever)."""

    def __init__(self, reply: bytes, *, trickle: bool = False) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.reply, self.trickle = reply, trickle
        self.requests = 0
        self.release = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.recv(65536)
            self.requests += 1
            connection.sendall(self.reply)
            while self.trickle and not self.release.wait(0.2):
                connection.sendall(b"x")  # a header line that never ends

    def stop(self) -> None:
        self.release.set()
        self.listener.close()


@pytest.mark.parametrize(
    ("reply", "trickle", "error"),
    [
        (b"garbage, not HTTP\r\n\r\n", False, "BadStatusLine"),
        # A delivery's deadline, 10 s, made 2 s here: what is tested is that it is the
        # whole delivery's, which a trickle of bytes never extends.
        (b"HTTP/1.1 200 OK\r\nx-slow: ", True, "no answer within 2 s"),
    ],
    ids=["garbage", "endless-answer"],
)
async def test_a_receiver_answering_garbage_or_endlessly_fails_its_message_only(
    tmp_path, monkeypatch, reply, trickle, error
):
    monkeypatch.setattr(webhooks, "TIMEOUT", 2.0)
    bad = Answering(reply, trickle=trickle)
    good = Answering(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
    try:
        async with serving(f"sqlite:///{tmp_path / 'runs.sqlite'}") as api:
            outbox = outbox_of(api.store)
            for port in (bad.port, good.port):
                url = f"http://127.0.0.1:{port}/hook"
                await outbox.add_endpoint(
                    new_endpoint(url, ("run.failed",), now=time.time(), attempts=1)
                )
            await api.start("failing", "boom", run_id="fails")

            async def settled() -> bool:
                return bool(good.requests) and bool(await outbox.messages("dead", 10))

            await until(settled, 25)
            dead = await outbox.messages("dead", 10)
            await api.start("failing", "again", run_id="fails-again")  # the sender still sends

            async def again() -> bool:
                return good.requests >= 2

            await until(again, 25)
    finally:
        bad.stop()
        good.stop()
    (letter,) = dead
    assert letter.run_id == "fails"
    assert error in (letter.last_error or "")
