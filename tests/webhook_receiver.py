"""A real webhook receiver on 127.0.0.1 for the webhook tests, and how they check what it took.

:class:`Receiver` is an HTTP server of the standard library that fails its
first ``failures`` deliveries (500) and keeps every POST; it is down
(nothing listening on its port) until :meth:`Receiver.start`.
:func:`verified` checks each message's signature with the
``standardwebhooks`` reference library.
"""

from __future__ import annotations

import http.server
import random
import socket
import threading
import time
from pathlib import Path

from standardwebhooks.webhooks import Webhook


class Receiver:
    """A webhook receiver: fails its first ``failures`` deliveries, keeps every one it took."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.deliveries: list[tuple[dict[str, str], bytes]] = []  # every POST, taken or not
        self.taken: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    receiver.deliveries.append((headers, body))
                    ok = len(receiver.deliveries) > receiver.failures
                    if ok:
                        receiver.taken.append((headers, body))
                self.send_response(204 if ok else 500)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.port = _port_nobody_is_given()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.server_close()  # down until start(): the port refuses connections

    def start(self) -> None:
        handler = self.server.RequestHandlerClass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _port_nobody_is_given() -> int:
    """A free port below the kernel's range for ``bind(port 0)``.

    A receiver is down (its port closed) until it starts, and may stop and
    start again. A port from the kernel's range could meanwhile be given to
    another test's receiver, which then took this test's deliveries (12 where
    8 were due) while this one could not bind again. Below the range, only
    another receiver choosing at random could take it.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free port below the ephemeral range")


def verified(secret: str, taken: list[tuple[dict[str, str], bytes]]) -> list[dict]:
    hook = Webhook(secret)
    found = []
    for headers, body in taken:
        payload = hook.verify(body, headers)  # raises on a bad signature
        found.append({**payload, "id": headers["webhook-id"]})
    return found


def until(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.1)
