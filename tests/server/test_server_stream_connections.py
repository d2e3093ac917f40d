"""Event streams on PostgreSQL share one listening connection, never one each.

Each stream of ``GET /api/runs/{id}/events`` on a PostgreSQL server opened a
connection of its own to ``LISTEN`` for live events: 110 streams (an
ordinary page left open in 110 tabs) used up the database's
``max_connections`` (100 by default), and every other client of the
database (the server's own pool growing, each worker, ``psql``) was refused
with "too many clients already". Here streams are counted by their
listening connections on the database, with far fewer streams than that.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

import psycopg

from postgres import postgres_dsn
from server.conftest import ServeProcess
from treadle._stores._postgres_live import channel_of

if TYPE_CHECKING:
    import socket

STREAMS = 12


def _listening(dsn: str, schema: str) -> int:
    """How many backends listen on the schema's live channel now."""
    statement = f'LISTEN "{channel_of(schema)}"'
    with psycopg.connect(dsn) as db:
        found = db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query = %s", (statement,)
        ).fetchone()
    return int(found[0]) if found else 0


def _open_stream(serve: ServeProcess, run_id: str) -> socket.socket:
    """A stream, read until its first event came: its follower is listening by then."""
    connection = serve.connect()
    request = (
        f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: test\r\n"
        f"Authorization: Bearer {serve.token}\r\n\r\n"
    )
    connection.sendall(request.encode())
    seen = b""
    while b"\nid: 1\r\n" not in seen and b"\nid: 1\n" not in seen:
        chunk = connection.recv(65536)
        assert chunk, seen
        seen += chunk
    return connection


def test_many_event_streams_hold_one_listening_connection_between_them(tmp_path, pg_schema):
    dsn = postgres_dsn()
    serve = ServeProcess(tmp_path, dsn).start()
    streams: list[socket.socket] = []
    try:
        serve.ready()
        with serve.client() as client:
            started = client.post(
                "/api/runs",
                json={"workflow": "approval", "input": {"topic": "t", "words": 3}},
                headers=serve.auth,
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
            streams = [_open_stream(serve, run_id) for _ in range(STREAMS)]
            assert _listening(dsn, pg_schema) == 1
            # The server still answers meanwhile, and starts another run.
            again = client.post(
                "/api/runs",
                json={"workflow": "approval", "input": {"topic": "u", "words": 3}},
                headers=serve.auth,
            )
            assert again.status_code == 201, again.text
            for stream in streams:
                stream.close()
            streams = []
            for _ in range(500):  # the last stream gone, its listening connection goes too
                if _listening(dsn, pg_schema) == 0:
                    break
                time.sleep(0.02)
            assert _listening(dsn, pg_schema) == 0
    finally:
        for stream in streams:
            with contextlib.suppress(OSError):
                stream.close()
        serve.stop()
