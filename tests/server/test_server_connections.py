"""Connections that never ask are bounded: closed after ``--headers-timeout``, shed past a limit.

A client used to hold a connection that sent nothing, or half a request
line, for as long as it liked, and the server took every connection
offered: one client opening tens of thousands used up the process's file
descriptors, other requests timed out, and the accept loop logged
``Too many open files`` hundreds of thousands of times. A real ``treadle
serve`` process here, attacked over raw sockets.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from server.conftest import ServeProcess

if TYPE_CHECKING:
    from collections.abc import Iterator


LIMIT = 40


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    limits = ("--headers-timeout", "1", "--max-connections", str(LIMIT))
    with ServeProcess.running(tmp_path, *limits) as serving:
        yield serving


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` (EOF or a reset) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def test_a_connection_that_sends_no_request_or_half_of_one_is_closed(server):
    auth = f"Authorization: Bearer {server.token}\r\n"
    with contextlib.ExitStack() as holding:
        quiet, half_line, half_headers = (holding.enter_context(server.connect()) for _ in range(3))
        half_line.sendall(b"GET /api/me HTT")
        half_headers.sendall(f"GET /api/me HTTP/1.1\r\nHost: x\r\n{auth}".encode())
        for sock in (quiet, half_line, half_headers):
            assert _closed_by_server(sock, within=15)
        # A kept-alive connection's next request has the same bound after its first.
        kept = holding.enter_context(server.connect())
        kept.sendall(f"GET /api/me HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")
        kept.sendall(b"GET /api/me HTTP/1.1\r\n")  # and then nothing
        assert _closed_by_server(kept, within=15)
    with server.client() as client:
        assert client.get("/api/me", headers=server.auth).status_code == 200


def test_past_the_limit_new_connections_are_closed_and_those_open_served(server):
    with contextlib.ExitStack() as holding:
        crowd = [holding.enter_context(server.connect()) for _ in range(LIMIT * 3)]
        # The crowd came first: past the limit, the server closed what it could not serve.
        shed = sum(_closed_by_server(sock, within=0.5) for sock in crowd[LIMIT + 5 :])
        assert shed >= LIMIT
        # Once the first of the crowd time out, a request is served again at once.
        time.sleep(1.5)
        with server.client() as client:
            assert client.get("/api/me", headers=server.auth).status_code == 200
    _, _, log = server.stop()
    assert "Too many open files" not in log
    assert log.count(f"over {LIMIT} connections") <= 3  # said once per crowd, not per connection


def test_a_client_gone_mid_body_changes_nothing_and_is_no_server_failure(server):
    # Half an answer's body, then a reset: the run is as it was (its request still open,
    # answered later once), and the server logs no failure of its own (it logged a 500
    # and a traceback for each: a client leaving is not a bug).
    with server.client(headers=server.auth) as client:
        started = client.post(
            "/api/runs", json={"workflow": "approval", "input": {"topic": "x", "words": 3}}
        )
        run_id = started.json()["run"]["run_id"]
        for _ in range(200):
            detail = client.get(f"/api/runs/{run_id}").json()
            if detail["pending_requests"]:
                break
            time.sleep(0.05)
        (request,) = detail["pending_requests"]
        path = f"/api/runs/{run_id}/requests/{request['request_id']}"
        body = b'{"answer": {"approved": true, "note": "half"}}'
        for _ in range(3):
            sock = server.connect()
            head = (
                f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            sock.sendall(head.encode() + body[: len(body) // 2])
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # a reset
        time.sleep(0.5)
        assert client.get(f"/api/runs/{run_id}").json()["run"]["status"] == "awaiting_input"
        answered = client.post(path, json={"answer": {"approved": True, "note": "whole"}})
        assert answered.status_code == 202, answered.text
    _, _, log = server.stop()
    assert "unexpected error" not in log
    assert "Traceback" not in log, log[-4000:]


def _live_files(server: ServeProcess) -> int:
    """How many files the server holds open on the store's live-event file (SQLite)."""
    assert server.process is not None
    fds = Path(f"/proc/{server.process.pid}/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd).endswith(("-live", "-live-wal")))


def test_an_event_stream_dropped_by_its_client_releases_what_it_held(server):
    # Each stream of a run's events follows its live events through a connection to the
    # store's live file; a client that went while the stream waited to send left that
    # connection open until the garbage collector came round (hundreds, under streams
    # opened and dropped).
    with server.client(headers=server.auth) as client:
        started = client.post("/api/runs", json={"workflow": "chat", "input": "hi"})
        run_id = started.json()["run"]["run_id"]
        before = _live_files(server)
        for _ in range(30):
            sock = server.connect()
            sock.sendall(
                f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {server.token}\r\n\r\n".encode()
            )
            sock.recv(65536)  # the stream began
            sock.close()
        # What stays is the live file's writer at most (opened once something is published).
        deadline = time.monotonic() + 15
        while (held := _live_files(server)) > before + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held <= before + 2, held
        assert client.get("/api/me").status_code == 200


def _response(sock: socket.socket, within: float) -> bytes:
    """What the server sends on ``sock`` until it closes it (or ``within`` seconds pass)."""
    sock.settimeout(within)
    got = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while chunk := sock.recv(65536):
            got += chunk
    return got


def test_a_request_with_both_content_length_and_chunks_is_refused_and_the_connection_closed(
    server,
):
    # A proxy that reads the Content-Length would forward the second request inside the
    # body; a server that read the chunks served it as a request of its own.
    hidden = f"GET /api/runs?smuggled=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}"
    body = f"0\r\n\r\n{hidden}\r\n\r\n".encode()
    head = (
        f"POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    with server.connect() as sock:
        sock.sendall(head.encode() + body)
        answered = _response(sock, within=15)
    assert answered.startswith(b"HTTP/1.1 400 "), answered
    assert answered.count(b"HTTP/1.1 ") == 1, answered  # the hidden one was never served
    assert b"not both" in answered
    assert "smuggled" not in server.log.read_text()


def test_a_chunked_body_to_a_link_that_is_no_link_is_refused_without_being_read(server):
    # Anyone may reach /answer/...: its body was read whole before the link was looked at,
    # so connections sending never-ending chunks held a megabyte each for the body timeout.
    with server.connect() as sock:
        sock.sendall(
            b"POST /answer/no-such-link HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        )  # and the body never ends
        answered = _response(sock, within=10)  # the body timeout is 30 s
    assert answered.startswith(b"HTTP/1.1 404 "), answered


def test_an_event_stream_whose_client_reads_nothing_is_let_go_after_the_send_timeout(tmp_path):
    # Its events (a page of the log: here one commit of about 15 MB) were held for as long
    # as the client kept the connection open without reading: for ever, the run waiting.
    serving = ServeProcess(
        tmp_path, str(tmp_path / "runs.sqlite"), "--send-timeout", "1", app="big_commit_app"
    )
    serving.start().ready()
    try:
        with serving.client() as http:
            started = http.post(
                "/api/runs", json={"workflow": "big_commit", "input": 60}, headers=serving.auth
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
            for _ in range(600):
                status = http.get(f"/api/runs/{run_id}", headers=serving.auth).json()["run"]
                if status["status"] == "awaiting_input":
                    break
                time.sleep(0.05)
        host, port = serving.base.removeprefix("http://").split(":")
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before it connects
            sock.connect((host, int(port)))
            sock.sendall(
                f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {serving.token}\r\n\r\n".encode()
            )
            time.sleep(4)  # reading nothing, past the send timeout
            assert _closed_by_server(sock, within=20)  # what was sent, then the end
    finally:
        _, _, log = serving.stop()
    assert "Traceback" not in log  # the client's doing: no failure of the server's
    assert "ERROR" not in log
