"""A run's token deltas reach followers in other processes before the turn's barrier (issue 34).

One process drives an agent run whose model streams slowly, held at gates
(``live_app``); ``treadle watch --json`` and ``treadle serve`` (its event
stream read over HTTP) follow it from two other processes. While the last
gate is shut the turn cannot end, so its barrier cannot commit: the deltas
they show by then came live. On PostgreSQL a ``treadle worker`` drives the
run; on SQLite ``treadle run`` does. Each ``treadle`` is a process of its own,
forked with the command line imported (``tests/forked.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from live_app import REPLY

import forked
import treadle.workers
from server.conftest import ServeProcess
from server.sse import messages
from store_backends import drop_schemas, fresh_schema, postgres_dsn

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

HERE = Path(__file__).parent
TREADLE = str(Path(sys.executable).parent / "treadle")
PATHS = os.pathsep.join(str(p) for p in (HERE, HERE.parent))
QUESTION = '"Where is my parcel?"'


def environment(store: str, gates: Path, schema: str | None = None) -> dict[str, str]:
    """A `treadle` subprocess's environment: the test app importable, the gates, the store."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    env = {**inherited, "PYTHONPATH": PATHS, "TREADLE_STORE": store, "LIVE_GATES": str(gates)}
    if schema is not None:
        env["TREADLE_SCHEMA"] = schema
    return env


def treadle_process(*args: str, env: dict[str, str], cwd: Path | None = None) -> forked.Forked:
    """``treadle args``, forked with the command line imported; its stdout and stderr piped."""
    return forked.start("treadle._cli._app:main", env=env, cwd=cwd, argv=[TREADLE, *args])


class Seen:
    """What a follower in another process showed, gathered by a thread as it arrives."""

    def __init__(self, lines: Iterator[Any]) -> None:
        self.items: queue.Queue[Any] = queue.Queue()
        self.all: list[Any] = []
        self._thread = threading.Thread(target=self._read, args=(lines,), daemon=True)
        self._thread.start()

    def _read(self, lines: Iterator[Any]) -> None:
        for item in lines:
            self.items.put(item)

    def join(self) -> None:
        """Wait until what it reads has ended (its process has exited)."""
        self._thread.join(10)

    def everything(self) -> list[Any]:
        """All it showed, once its source has ended (20 s at most)."""
        self._thread.join(20)
        assert not self._thread.is_alive(), self.all
        while not self.items.empty():
            self.all.append(self.items.get())
        return list(self.all)

    def until(self, done: Callable[[list[Any]], bool], what: str) -> list[Any]:
        """Everything shown so far, once ``done`` says enough was (20 s at most)."""
        deadline = time.monotonic() + 20
        while not done(self.all):
            try:
                self.all.append(self.items.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                pytest.fail(f"never shown: {what}; shown: {self.all}")
        return list(self.all)


def watch_lines(process: forked.Forked) -> Iterator[dict[str, Any]]:
    assert process.stdout is not None
    for line in process.stdout:
        yield json.loads(line)


def sse_events(base: str, token: str, run_id: str) -> Iterator[dict[str, Any]]:
    """The run's event stream: each message's event, with its SSE ``id`` and ``event`` added."""
    headers = {"Authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=base, timeout=60) as client,
        client.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as stream,
    ):
        for message in messages(stream.iter_lines()):
            yield {**message.data, "sse_id": message.id, "sse_event": message.event}
            if message.event == "end":
                return


def client_events(dsn: str, schema: str, run_id: str) -> Iterator[dict[str, Any]]:
    """The run's events through ``treadle.workers`` (``Client.events``) in this process."""
    items: queue.Queue[dict[str, Any] | None] = queue.Queue()

    async def read() -> None:
        try:
            async with treadle.workers.connect(dsn, schema=schema) as client:
                async for event in client.events(run_id, poll_interval=0.05):
                    items.put({**event.to_json(), "seq": event.seq or None})
        finally:
            items.put(None)

    threading.Thread(target=asyncio.run, args=(read(),), daemon=True).start()
    while (item := items.get()) is not None:
        yield item


def deltas(shown: list[dict[str, Any]]) -> list[str]:
    """The text of the live token deltas among what a follower showed."""
    return [e["data"]["delta"] for e in shown if e.get("type") == "agent_delta"]


def committed_turn(shown: list[dict[str, Any]]) -> bool:
    """Whether what a follower showed holds the turn's end (its barrier committed)."""
    return any(
        e.get("type") == "executor_completed" and e["executor_id"] == "courier" for e in shown
    )


def follow_from_two_processes(
    store: str, schema: str | None, tmp_path: Path, driver: forked.Forked
) -> None:
    """The shared body: watch and serve follow the run ``r1`` that ``driver`` drives.

    ``driver`` is ``treadle run`` (which ends with the run) or ``treadle
    worker`` (which serves on, and is stopped by the caller).
    """
    gates = tmp_path / "gates"
    env = environment(store, gates, schema)
    deadline = time.monotonic() + 30
    while not (gates / "reached").exists():  # the reply's first chunk went out, unseen
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the model never started streaming"
        time.sleep(0.02)
    watch = treadle_process("watch", "r1", "--json", env=env, cwd=tmp_path)
    watched = Seen(watch_lines(watch))
    schemas = {} if schema is None else {"TREADLE_SCHEMA": schema}
    serve = ServeProcess(
        tmp_path, store, PYTHONPATH=PATHS, app="live_app", LIVE_GATES=str(gates), **schemas
    )
    serve.start()
    try:
        serve.ready()
        streamed = Seen(sse_events(serve.base, serve.token, "r1"))
        # Each follows once it has shown the log so far (it listens before it reads the log).
        watched.until(lambda shown: len(shown) >= 1, "the log's first event (watch)")
        streamed.until(lambda shown: any(m["sse_id"] for m in shown), "the log's first event (SSE)")
        clients = [] if schema is None else [Seen(client_events(store, schema, "r1"))]
        for client in clients:
            client.until(lambda shown: len(shown) >= 1, "the log's first event (client)")
        (gates / "followed").touch()  # the reply streams on, up to its last chunk

        enough = 4  # deltas; the model holds before its last chunk until `finish`
        early_watch = watched.until(lambda s: len(deltas(s)) >= enough, "deltas (watch)")
        early_stream = streamed.until(lambda s: len(deltas(s)) >= enough, "deltas (SSE)")
        early_clients = [
            client.until(lambda s: len(deltas(s)) >= enough, "deltas (client)")
            for client in clients
        ]
        # The turn is still open: its barrier has not committed, and the log keeps no delta.
        with treadle_process("logs", "r1", "--json", env=env) as logs:
            code, out, err = logs.finish(60)
        assert code == 0, err
        logged = [json.loads(line) for line in out.splitlines()]
        assert not committed_turn(logged), logged
        assert "agent_delta" not in {e["type"] for e in logged}
        assert not committed_turn(early_watch)
        assert not committed_turn(early_stream)
        assert not any(committed_turn(early) for early in early_clients)
        for live in (early_watch, early_stream, *early_clients):
            assert all(e["seq"] is None for e in live if e["type"] == "agent_delta")
        assert all(m["sse_id"] is None for m in early_stream if m["type"] == "agent_delta")
        for early in (deltas(early_watch), deltas(early_stream), *map(deltas, early_clients)):
            text = "".join(early)
            assert text in REPLY  # in order, none repeated
            assert not REPLY.startswith(text)  # the first chunk went before they followed

        (gates / "finish").touch()
        assert watch.wait(timeout=60) == 0, watch.communicate()  # 0: the run completed
        whole = watched.until(lambda s: watch.poll() is not None and watched.items.empty(), "end")
        ended = streamed.until(lambda s: s[-1]["sse_event"] == "end", "the stream's end")
        ran_out = [client.everything() for client in clients]
    finally:
        if watch.poll() is None:
            watch.kill()
        watch.wait()
        watched.join()
        for pipe in (watch.stdout, watch.stderr):
            pipe.close()
        serve.stop()
    # Then the committed events replace the live ones: the reply, whole, from the log.
    for shown in (whole, [m for m in ended if m["sse_event"] != "end"], *ran_out):
        kinds = [e["type"] for e in shown]
        first_delta = kinds.index("agent_delta")
        turn_end = next(
            n
            for n, e in enumerate(shown)
            if e["type"] == "executor_completed" and e["executor_id"] == "courier"
        )
        assert first_delta < turn_end
        assert [e["data"]["value"] for e in shown if e["type"] == "output"] == [REPLY]
        assert [e["seq"] for e in shown if e["seq"] is not None] == list(
            range(1, len([e for e in shown if e["seq"] is not None]) + 1)
        )


def test_a_worker_on_postgresql_streams_deltas_to_watch_and_serve_before_the_barrier(tmp_path):
    dsn, schema = postgres_dsn(), fresh_schema()
    gates = tmp_path / "gates"
    gates.mkdir()
    env = environment(dsn, gates, schema)
    worker = treadle_process(
        "worker", "--app", "live_app", "--poll-interval", "0.05", env=env, cwd=tmp_path
    )
    try:
        with treadle_process(
            "start", "courier", "-i", QUESTION, "--run-id", "r1", env=env
        ) as start:
            code, _, err = start.finish(60)
        assert code == 0, err
        follow_from_two_processes(dsn, schema, tmp_path, worker)
    finally:
        (gates / "followed").touch()  # a failure left the run held: let it go
        (gates / "finish").touch()
        worker.send_signal(signal.SIGTERM)
        worker.finish(60)
        asyncio.run(drop_schemas([schema]))


def test_a_run_on_sqlite_streams_deltas_to_watch_and_serve_in_two_other_processes(tmp_path):
    store = str(tmp_path / "runs.sqlite")
    gates = tmp_path / "gates"
    gates.mkdir()
    with treadle_process(
        "run", "live_app:courier", "-i", QUESTION, "--run-id", "r1", "--json",
        env=environment(store, gates), cwd=tmp_path,
    ) as driver:  # fmt: skip
        follow_from_two_processes(store, None, tmp_path, driver)
        code, out, err = driver.finish(30)
    assert code == 0, err
    assert json.loads(out)["outputs"] == [REPLY]
