"""The server as the tests drive it: in process over ASGI, or as a real `treadle serve`.

In process, :func:`serving` runs the app's lifespan (the store opened, the
timer service and the runs' driver started) and gives an :class:`Api`: an
``httpx`` client that sends the token, plus waits for a run to reach a
status. PostgreSQL servers get a schema of their own (``TREADLE_SCHEMA``),
dropped after the test. :class:`ServeProcess` starts ``treadle serve`` as a
user would, on a free port, and reads the address and token it prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

import forked
from cli.treadle_cli import Cli
from postgres import postgres_dsn
from treadle._server._app import create_app
from treadle._server._settings import ServerSettings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from starlette.applications import Starlette

    from treadle._server._identity import SignIn

HERE = Path(__file__).parent
TREADLE = str(Path(sys.executable).parent / "treadle")
TOKEN = "test-token-0123456789abcdef"  # noqa: S105 - the tests' own
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ENDED = {"completed", "failed", "cancelled"}


class Api:
    """An ``httpx`` client of one in-process server, sending its token."""

    def __init__(self, client: httpx.AsyncClient, app: Starlette, store_url: str) -> None:
        self.client = client
        self.app = app
        self.store_url = store_url

    @property
    def store(self) -> Any:
        return self.app.state.served.store

    def __getattr__(self, name: str) -> Any:  # get, post, delete, request, stream
        return getattr(self.client, name)

    async def start(self, workflow: str, value: Any = None, run_id: str | None = None) -> dict:
        body: dict[str, Any] = {"workflow": workflow, "input": value}
        if run_id is not None:
            body["run_id"] = run_id
        response = await self.client.post("/api/runs", json=body)
        assert response.status_code == 201, response.text
        return response.json()["run"]

    async def wait_for(self, run_id: str, statuses: Iterable[str], limit: float = 20) -> dict:
        """The run's detail once its status is one of ``statuses`` (polled, bounded)."""
        wanted = set(statuses)
        async with asyncio.timeout(limit):
            while True:
                response = await self.client.get(f"/api/runs/{run_id}")
                assert response.status_code == 200, response.text
                detail = response.json()
                if detail["run"]["status"] in wanted:
                    return detail
                await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def signing_in(
    sign_in: SignIn, store_url: str, base_url: str = "http://testserver"
) -> AsyncIterator[httpx.AsyncClient]:
    """A server with ``sign_in`` on ``store_url``, its lifespan running, and a client of it.

    The client sends no credential of its own: what a visitor's browser has.
    """
    settings = ServerSettings(token=TOKEN, apps=("server_app",), store=store_url, sign_in=sign_in)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client


@contextlib.asynccontextmanager
async def serving(
    store_url: str,
    *,
    apps: tuple[str, ...] = ("server_app",),
    max_body: int = 1024 * 1024,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Api]:
    """A server on ``store_url``, its lifespan running, and a client of it."""
    settings = ServerSettings(
        token=TOKEN,
        apps=apps,
        store=store_url,
        max_body=max_body,
        poll_interval=0.05,
        event_poll=0.02,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://testserver",
            headers=AUTH if headers is None else headers,
        ) as client:
            yield Api(client, app, store_url)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "runs.sqlite")


@pytest.fixture
async def api(sqlite_url: str) -> AsyncIterator[Api]:
    """A server on a fresh SQLite file."""
    async with serving(sqlite_url) as client:
        yield client


@pytest.fixture
def pg_schema(schema: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's own PostgreSQL schema, named by ``TREADLE_SCHEMA`` for the test."""
    monkeypatch.setenv("TREADLE_SCHEMA", schema)
    return schema


@pytest.fixture
async def pg_api(pg_schema: str) -> AsyncIterator[Api]:
    """A server on PostgreSQL (its schema the test's own); runs go to workers."""
    async with serving(postgres_dsn()) as client:
        yield client


@contextlib.asynccontextmanager
async def worker_on(api: Api) -> AsyncIterator[None]:
    """A PostgreSQL worker in this process serving the test app, while the block runs."""
    import server_app  # noqa: PLC0415 - on the tests' path

    from treadle._scaleout._worker import Worker  # noqa: PLC0415

    workflows = [server_app.approval, server_app.counting, server_app.failing, server_app.chat]
    worker = Worker(api.store, workflows, lease=5, poll_interval=0.05)
    task = asyncio.create_task(worker.serve())
    try:
        yield
    finally:
        worker.stop()
        await task


def cli_env(store: str, **extra: str) -> dict[str, str]:
    """The environment of a `treadle` subprocess: the tests' app importable, no stray settings."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    schema = os.environ.get("TREADLE_SCHEMA")
    env = {**inherited, "PYTHONPATH": str(HERE), "TREADLE_STORE": store, **extra}
    if schema and store.startswith("postgres"):
        env["TREADLE_SCHEMA"] = schema
    return env


_ADDRESS = re.compile(r"open (http://127\.0\.0\.1:(\d+)/\?token=(\S+))")


class ServeProcess:
    """`treadle serve` in a process of its own on a free port; :meth:`start` reads what it prints.

    The process is forked with the command line imported (``tests/forked.py``):
    a real server process, without a Python start each.
    """

    def __init__(
        self, cwd: Path, store: str, *args: str, app: str = "server_app", **env: str
    ) -> None:
        self.cwd = cwd
        self.args = [
            "serve",
            "--app",
            app,
            "--port",
            "0",
            "--poll-interval",
            "0.05",
            *args,
        ]
        self.env = cli_env(store, **env)
        self.process: forked.Forked | None = None
        self.log = cwd / "serve.log"
        self.url = self.base = self.token = ""

    def start(self) -> ServeProcess:
        self.log = self.cwd / "serve.log"  # a file: a full pipe would stall the server
        self.log.write_text("")
        self.process = forked.start(
            "treadle._cli._app:main",
            env=self.env,
            cwd=self.cwd,
            argv=[TREADLE, *self.args],
            stderr=self.log,
        )
        seen = []
        for line in self.process.stdout:  # it prints the address before it serves
            seen.append(line)
            found = _ADDRESS.search(line)
            if found:
                self.url, port, self.token = found.group(1), found.group(2), found.group(3)
                self.base = f"http://127.0.0.1:{port}"
                break
        else:
            self.process.wait(timeout=10)
            raise AssertionError(f"treadle serve printed no address: {seen} {self.log.read_text()}")
        return self

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def cli(self, *args: str) -> str:
        """``treadle ARGS`` on its store, run in this process (no process of its own needed)."""
        mine = {k: v for k, v in self.env.items() if k.startswith("TREADLE_") or k == "PYTHONPATH"}
        done = Cli(self.cwd, **mine)(*args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=20, **kwargs)

    def connect(self) -> socket.socket:
        """A raw TCP connection to it, for what no HTTP client sends (half a request)."""
        host, port = self.base.removeprefix("http://").split(":")
        return socket.create_connection((host, int(port)), timeout=20)

    @classmethod
    @contextlib.contextmanager
    def running(cls, cwd: Path, *args: str) -> Iterator[ServeProcess]:
        """``treadle serve ARGS`` on a SQLite file in ``cwd``, ready; stopped after."""
        serving = cls(cwd, str(cwd / "runs.sqlite"), *args)
        serving.start().ready()
        try:
            yield serving
        finally:
            serving.stop()

    def ready(self) -> None:
        """Wait until it answers (uvicorn's lifespan has run)."""
        with self.client() as client:
            for _ in range(500):
                try:
                    if client.get("/api/workflows", headers=self.auth).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                with contextlib.suppress(subprocess.TimeoutExpired):
                    assert self.process is not None
                    self.process.wait(0.02)
                    raise AssertionError(f"treadle serve exited: {self.log.read_text()}")
        raise AssertionError("treadle serve never answered")

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM it; its exit code, the rest of its stdout, and its log."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code, out, _ = self.process.finish(20)
        return code, out, self.log.read_text()
