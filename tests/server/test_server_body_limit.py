"""A body over ``--max-body`` is answered 413 that the client gets to read.

urllib, ``http.client`` (and ``requests``) send the whole body before they
read a response. A server that answers 413 and closes at once, the body
unread, makes the client's kernel meet a reset: the client sees
"connection reset" or "broken pipe", never the 413. So the server reads and
discards what follows, within a bound (RFC 9112 §9.6), then closes; a
client sending an endless body is cut off at that bound and holds up no
one else.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING

import pytest

from server.conftest import ServeProcess

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

LIMIT = 1024
BODY = b'{"input": "' + b"x" * (2 * 1024 * 1024) + b'"}'  # 2 MiB: far past the limit


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    """``treadle serve --max-body 1024`` in a real process."""
    serving = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite"), "--max-body", str(LIMIT))
    serving.start().ready()
    try:
        yield serving
    finally:
        serving.stop()


def test_urllib_and_http_client_read_the_413_of_a_body_too_large(server: ServeProcess) -> None:
    headers = {**server.auth, "Content-Type": "application/json"}
    url = f"{server.base}/api/runs"
    request = urllib.request.Request(url, data=BODY, headers=headers, method="POST")  # noqa: S310 - the test's own server
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=20)  # noqa: S310 - the test's own server
    assert refused.value.code == 413
    assert json.loads(refused.value.read())["error"]["type"] == "PayloadTooLarge"

    host, port = server.base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        connection.request("POST", "/api/runs", body=BODY, headers=headers)
        response = connection.getresponse()
        assert response.status == 413
        assert b"larger than 1024 bytes" in response.read()
    finally:
        connection.close()
    # A body streamed in chunks, with no length declared, is refused as readably.
    connection = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        chunks = (BODY[i : i + 65536] for i in range(0, len(BODY), 65536))
        connection.request("POST", "/api/runs", body=chunks, headers=headers, encode_chunked=True)
        assert connection.getresponse().status == 413
    finally:
        connection.close()


def test_an_endless_body_is_cut_off_and_stalls_no_one(server: ServeProcess) -> None:
    host, port = server.base.removeprefix("http://").split(":")
    sender = socket.create_connection((host, int(port)), timeout=30)
    head = (
        f"POST /api/runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {server.token}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    sender.sendall(head.encode())
    cut_off = threading.Event()

    def send_forever() -> None:
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        try:
            while True:
                sender.sendall(chunk)
        except OSError:  # the server closed the connection: what this waits for
            cut_off.set()

    threading.Thread(target=send_forever, daemon=True).start()
    try:
        # Meanwhile everyone else is served (generous bounds: a shared machine).
        with server.client() as client:
            for _ in range(5):
                began = time.monotonic()
                assert client.get("/api/workflows", headers=server.auth).status_code == 200
                assert time.monotonic() - began < 5
        assert cut_off.wait(30), "the server kept reading an endless body"
    finally:
        sender.close()
