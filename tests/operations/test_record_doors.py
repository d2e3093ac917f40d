"""Every door records what it does once, with its actor (issue 29, must show 3).

One script, one run per door: an answer, then pause, unpause, resume, fork
(a new run), cancel, and delete of the fork, each where the door offers it,
through the Python API, the ``treadle`` command, a real ``treadle serve``
with a named token, the workers' client on PostgreSQL, and a signed answer
link POSTed to the server. Each action is in the run's log once with the
door's actor (label and door), in the store's audit log once in the same
order, the deleted fork's entries stay, and ``treadle audit --verify``
exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from record_app import record

import forked
from postgres import drop_schemas, fresh_schema, postgres_dsn
from server.conftest import ServeProcess
from treadle import Actor
from treadle._operations._links import create_link
from treadle._workflow import _actions as door
from treadle.stores import PostgresStore, SqliteStore
from treadle.workers import connect

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from treadle.stores import Store

pytestmark = pytest.mark.integration

APP = str(Path(__file__).parent / "record_app.py")
TREADLE = str(Path(sys.executable).parent / "treadle")
# What a door may do to a run, in the order the script does it.
EVERY = ("pause", "unpause", "resume", "fork", "cancel", "delete")


class Door:
    """A way in: its actor's label and door, what it offers, and how it acts."""

    label: str
    door: str
    offers: tuple[str, ...] = EVERY

    def __init__(self, store: Store, where: str, env: dict[str, str]) -> None:
        self.store, self.where, self.env = store, where, env

    async def answer(self, run_id: str, request_id: str, value: Any) -> None:
        raise NotImplementedError

    async def act(self, action: str, run_id: str, checkpoint_id: str) -> str | None:
        """Take ``action`` on ``run_id``; a fork gives its new run's id."""
        raise NotImplementedError

    def treadle(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The command in a process of its own, forked with the command line imported."""
        argv = [TREADLE, *args]
        with forked.start("treadle._cli._app:main", env=self.env, argv=argv) as command:
            return subprocess.CompletedProcess(argv, *command.finish(60))

    async def close(self) -> None:
        return None


class PythonDoor(Door):
    label, door = Actor.python().label, "python"

    async def answer(self, run_id: str, request_id: str, value: Any) -> None:
        await record.respond(run_id, {request_id: value}, store=self.store)

    async def act(self, action: str, run_id: str, checkpoint_id: str) -> str | None:
        if action == "fork":
            return await record.fork(run_id, checkpoint_id, new_run_id="f", store=self.store)
        if action == "delete":
            await door.delete(self.store, run_id, actor=Actor.python())
        elif action == "resume":
            await record.resume(run_id, store=self.store)
        else:
            await getattr(record, action)(run_id, store=self.store)
        return None


class CliDoor(Door):
    label, door = Actor.cli().label, "cli"

    def _done(self, *args: str) -> str:
        done = self.treadle(*args)
        assert done.returncode in (0, 3), (args, done.stdout, done.stderr)  # 3: waits for input
        return done.stdout

    async def answer(self, run_id: str, request_id: str, value: Any) -> None:
        self._done("respond", run_id, request_id, json.dumps(value), "--app", APP)

    async def act(self, action: str, run_id: str, checkpoint_id: str) -> str | None:
        if action == "fork":
            shown = self._done(
                "fork", run_id, "--checkpoint", checkpoint_id, "--app", APP, "--json"
            )
            return str(json.loads(shown)["run_id"])
        if action == "delete":
            self._done("delete", run_id, "--yes")
        elif action == "resume":
            self._done("resume", run_id, "--app", APP)
        else:
            self._done(action, run_id)
        return None


class HttpDoor(Door):
    """``treadle serve`` on the SQLite file, called with a named token (``token:ops``)."""

    label, door = "token:ops", "api"

    def __init__(self, store: Store, where: str, env: dict[str, str]) -> None:
        super().__init__(store, where, env)
        made = self.treadle("tokens", "create", "ops", "--role", "admin", "--json")
        assert made.returncode == 0, made.stderr
        self.auth = {"Authorization": f"Bearer {json.loads(made.stdout)['token']}"}
        cwd = Path(where).parent
        self.serve = ServeProcess(cwd, where, "--app", APP).start()
        self.serve.ready()
        self.client = httpx.AsyncClient(base_url=self.serve.base, headers=self.auth, timeout=20)

    async def _sent(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        answered = await self.client.request(method, path, json=body)
        assert answered.status_code < 300, (method, path, answered.text)
        return answered.json() if answered.content else {}

    async def answer(self, run_id: str, request_id: str, value: Any) -> None:
        await self._sent("POST", f"/api/runs/{run_id}/requests/{request_id}", {"answer": value})

    async def act(self, action: str, run_id: str, checkpoint_id: str) -> str | None:
        if action == "fork":
            body = {"checkpoint_id": checkpoint_id, "run_id": "f"}
            return str(
                (await self._sent("POST", f"/api/runs/{run_id}/fork", body))["run"]["run_id"]
            )
        if action == "delete":
            await self._sent("DELETE", f"/api/runs/{run_id}")
        else:
            await self._sent("POST", f"/api/runs/{run_id}/{action}")
        if action == "resume":  # the server drives it on in the background, until it rests
            await _rests(self.store, run_id)
        return None

    async def close(self) -> None:
        await self.client.aclose()
        code, _, log = self.serve.stop()
        assert code == 0, log


class ClientDoor(Door):
    """``treadle.workers.connect(actor=...)``: its actor comes in by the door ``client``."""

    label, door = "service:billing", "client"
    offers = ("pause", "unpause", "cancel")  # the client neither resumes, forks nor deletes

    def __init__(self, store: Store, where: str, env: dict[str, str]) -> None:
        super().__init__(store, where, env)
        self.client = connect(
            where, schema=env["TREADLE_SCHEMA"], actor=Actor.service("billing", "client")
        )

    async def answer(self, run_id: str, request_id: str, value: Any) -> None:
        await self.client.respond(run_id, {request_id: value})

    async def act(self, action: str, run_id: str, checkpoint_id: str) -> str | None:
        await getattr(self.client, action)(run_id)
        return None

    async def close(self) -> None:
        await self.client.close()


class LinkDoor(HttpDoor):
    """A signed answer link for maria, POSTed to ``treadle serve`` without any token."""

    label, door = "link:maria", "link"
    offers = ()  # a link answers its one request, nothing else

    async def answer(self, run_id: str, request_id: str, value: Any) -> None:
        token, _ = await create_link(
            self.store, run_id, request_id, "maria", expires_in=600, created_by="cli:test"
        )
        async with httpx.AsyncClient(base_url=self.serve.base, timeout=20) as bare:
            answered = await bare.post(f"/answer/{token}", json={"answer": value})
        assert answered.status_code == 202, answered.text


DOORS = {
    "python": PythonDoor,
    "cli": CliDoor,
    "http": HttpDoor,
    "client": ClientDoor,
    "link": LinkDoor,
}


async def _rests(store: Store, run_id: str) -> None:
    """Wait until no process drives the run (it waits again, or has ended)."""
    for _ in range(500):
        run = await store.get_run(run_id)
        if run.status != "running":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{run_id} never came to rest")


@pytest.fixture(params=list(DOORS))
async def opened(request, tmp_path: Path) -> AsyncIterator[Door]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    env = {**inherited, "PYTHONPATH": str(Path(__file__).parents[1] / "server")}
    if request.param == "client":
        where, schema = postgres_dsn(), fresh_schema()
        store: Store = PostgresStore(where, schema=schema)
        env |= {"TREADLE_STORE": where, "TREADLE_SCHEMA": schema}
    else:
        where, schema = str(tmp_path / "runs.sqlite"), None
        store = SqliteStore(where)
        env["TREADLE_STORE"] = where
    await record.run("t", run_id="a", store=store)  # made ahead: every door acts on it
    chosen = DOORS[request.param](store, where, env)
    try:
        yield chosen
    finally:
        await chosen.close()
        await store.close()
        if schema:
            await drop_schemas([schema])


def _acted(events: list[Any]) -> list[tuple[str, str, str]]:
    """The run's log's actions (each with its actor) as (kind, label, door), in order."""
    return [
        (e.kind, e.data["actor"]["label"], e.data["actor"]["door"])
        for e in events
        if isinstance(e.data.get("actor"), dict) and e.kind != "run_started"
    ]


async def test_each_door_logs_an_answer_and_each_control_action_once_with_its_actor(
    opened: Door,
) -> None:
    store, label, way = opened.store, opened.label, opened.door
    asked = next(e for e in await store.read_events("a") if e.kind == "request")
    first = (await record.history("a", store=store)).checkpoints[0].checkpoint_id
    started = Actor.python().label

    await opened.answer("a", asked.data["request_id"], True)
    forked = None
    for action in opened.offers:
        if action == "delete":
            await opened.act("delete", forked or "a", first)
        else:
            forked = await opened.act(action, "a", first) or forked
        await _rests(store, "a")

    kinds = {
        "pause": "run_paused",
        "unpause": "run_unpaused",
        "resume": "run_resumed",
        "cancel": "run_cancelled",
    }
    expected = [("run_created", started, "python"), ("request_answered", label, way)]
    expected += [(kinds[a], label, way) for a in opened.offers if a in kinds]
    assert _acted(await store.read_events("a")) == expected
    answered = next(e for e in await store.read_events("a") if e.kind == "request_answered")
    assert answered.data["answer"] is True

    audit = await store.read_audit()
    on_a = [(e.action, e.actor["label"], e.door) for e in audit if e.run_id == "a"]
    assert on_a == expected  # the same actions, once, in the same order
    if "fork" in opened.offers:
        assert forked is not None
        kept = [(e.action, e.actor["label"], e.door) for e in await store.read_audit(forked)]
        assert kept[0] == ("run_forked", label, way)
        if "delete" in opened.offers:  # the fork is gone; its entries stay
            assert kept == [("run_forked", label, way), ("run_deleted", label, way)]
            assert forked not in {r.run_id for r in await store.list_runs()}
    verified = opened.treadle("audit", "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"{len(audit)} entries" in verified.stdout
