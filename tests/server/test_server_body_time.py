"""A request body must arrive in ``--body-timeout``: past it, 408 and the connection closes.

A client that sends a body a byte at a time (or stops halfway) would
otherwise hold its route, and whatever the route holds, for as long as it
likes. The bound is on the body only: an event stream, which reads on after
its (empty) body to notice its client leaving, stays open as long as it is
read.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from server.conftest import ServeProcess

if TYPE_CHECKING:
    import socket
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    """``treadle serve --body-timeout 1`` in a real process."""
    with ServeProcess.running(tmp_path, "--body-timeout", "1") as serving:
        yield serving


def _response(sender: socket.socket) -> tuple[int, dict, bool]:
    """The status and JSON body the server sent, and whether it then closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sender.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(v for k, v in _headers(head) if k == "content-length"))
    while len(body) < length:
        body += sender.recv(65536)
    closed = sender.recv(65536) == b""  # the server closed it (a reset would raise)
    return int(head.split()[1]), json.loads(body[:length]), closed


def _headers(head: bytes) -> list[tuple[str, str]]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines)]


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_that_stops_arriving_is_refused_408_and_stalls_no_one(
    server: ServeProcess, framing: str
) -> None:
    head = (
        f"POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
        "Content-Type: application/json\r\n"
    )
    if framing == "content-length":
        head += "Content-Length: 100\r\n\r\n" + '{"workflow": "appro'
    else:
        head += "Transfer-Encoding: chunked\r\n\r\n" + '13\r\n{"workflow": "appro\r\n'
    sender = server.connect()
    try:
        sender.sendall(head.encode())  # then nothing more
        # Meanwhile everyone else is served.
        with server.client() as client:
            assert client.get("/api/workflows", headers=server.auth).status_code == 200
        status, body, closed = _response(sender)
    finally:
        sender.close()
    assert status == 408
    assert body["error"]["type"] == "RequestTimeout"
    assert "did not arrive within 1 seconds" in body["error"]["message"]
    assert closed
    with server.client() as client:  # nothing was started
        assert client.get("/api/runs", headers=server.auth).json()["runs"] == []


def test_an_event_stream_outlives_the_body_timeout(server: ServeProcess) -> None:
    with server.client() as client:
        started = client.post(
            "/api/runs",
            headers=server.auth,
            json={"workflow": "approval", "input": {"topic": "x", "words": 3}},
        )
        assert started.status_code == 201, started.text
        run_id = started.json()["run"]["run_id"]
    sender = server.connect()
    try:
        get = (
            f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {server.token}\r\n\r\n"
        )
        sender.sendall(get.encode())
        first = sender.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        time.sleep(2.5)  # past the body's bound: the stream is still the client's
        sender.setblocking(False)
        try:
            more = sender.recv(65536)
        except BlockingIOError:
            more = None  # open, nothing new: the run waits for its answer
        assert more != b"", "the server closed the event stream"
        assert more is None or b"RequestTimeout" not in more
    finally:
        sender.close()
