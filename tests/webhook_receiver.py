"""A real webhook receiver on 127.0.0.1 for the webhook tests, and how they check what it took.

:class:`Receiver` is an HTTP server of the standard library that fails its
first ``failures`` deliveries (500) and keeps every POST; it is down
(nothing listening on its port) until :meth:`Receiver.start`.
:func:`verified` checks each message's signature with the
``standardwebhooks`` reference library.
"""

from __future__ import annotations

import http.server
import threading
import time

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

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.server.server_close()  # down until start(): the port refuses connections

    def start(self) -> None:
        handler = self.server.RequestHandlerClass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
