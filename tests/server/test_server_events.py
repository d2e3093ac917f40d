"""A run's events as Server-Sent Events: every event exactly once, in order, across reconnects.

The main test runs `treadle serve` as a real process and a run of many
supersteps that waits, at superstep 21, for a file the test creates: the
client reads part of the stream, disconnects while the run is held (so
mid-run, whatever the timing), lets the run go on, and reconnects with
``Last-Event-ID``. What it read across both connections is the run's whole
log: ids 1, 2, 3, ... with none missing or repeated, equal to a fresh read.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
from sse import Message, messages

from gates import file_appears
from server.conftest import TREADLE, ServeProcess, cli_env, serving
from treadle._server import _sse
from treadle._stores._tokens import token_hash

pytestmark = pytest.mark.integration

TO, HOLD_AT = 40, 20


def _read(response, *, until=None) -> list[Message]:
    """The messages of a stream up to ``end`` (or until ``until`` says stop)."""
    read = []
    for message in messages(response.iter_lines()):
        read.append(message)
        if message.event == "end" or (until is not None and until(message)):
            break
    return read


def test_a_client_that_reconnects_with_last_event_id_gets_every_event_once_in_order(tmp_path):
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite")).start()
    gate = tmp_path / "gate"
    try:
        server.ready()
        with server.client(headers=server.auth) as http:
            started = http.post(
                "/api/runs",
                json={
                    "workflow": "counting",
                    "input": {"to": TO, "gate": str(gate), "hold_at": HOLD_AT},
                    "run_id": "k1",
                },
            )
            assert started.status_code == 201, started.text

            def held(message: Message) -> bool:  # well into the run, which cannot pass HOLD_AT
                return (
                    message.data["type"] == "superstep_completed"
                    and message.data["superstep"] >= 10
                )

            with http.stream("GET", "/api/runs/k1/events") as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                first = _read(response, until=held)
            assert first[-1].event == "superstep_completed"
            assert http.get("/api/runs/k1").json()["run"]["status"] == "running"

            gate.touch()  # the run goes on while nobody listens
            resumed_at = first[-1].id
            with http.stream(
                "GET", "/api/runs/k1/events", headers={"Last-Event-ID": str(resumed_at)}
            ) as response:
                second = _read(response)
            assert second[-1].event == "end"
            assert second[-1].id is None

            with http.stream("GET", "/api/runs/k1/events") as response:
                fresh = _read(response)
            with http.stream("GET", f"/api/runs/k1/events?after={resumed_at}") as response:
                after = _read(response)
    finally:
        code, _, log = server.stop()
    assert code == 0, log

    # Progress is also sent live, before its superstep commits: without an id, not resumed.
    live = [m for m in first + second if m.event != "end" and m.id is None]
    assert all(m.event == "progress" and m.data["seq"] is None for m in live)
    seen = [m for m in first + second if m.event != "end" and m.id is not None]
    ids = [m.id for m in seen]
    assert ids == list(range(1, len(ids) + 1))  # each once, in order, none missing
    assert [m.data for m in seen] == [m.data for m in fresh[:-1]]  # the whole log
    assert after[:-1] == [m for m in second[:-1] if m.id is not None]
    for message in seen:
        assert message.event == message.data["type"]
        assert message.id == message.data["seq"]
        assert message.data["run_id"] == "k1"
    kinds = [m.event for m in seen]
    assert kinds[0] == "run_started"
    assert kinds.count("superstep_completed") == TO + 1  # one superstep per number, 0..TO
    assert kinds[-1] == "status_changed"
    assert seen[-1].data["data"]["status"] == "completed"
    outputs = [m.data["data"]["value"] for m in seen if m.event == "output"]
    assert outputs == [TO]


async def test_an_ended_run_streams_its_log_and_ends(api):
    await api.start("failing", "why", run_id="f1")
    await api.wait_for("f1", {"failed"})
    whole = list(messages((await api.get("/api/runs/f1/events")).text.splitlines()))
    assert whole[-1] == Message(None, "end", {})
    ids = [m.id for m in whole[:-1]]
    assert ids == list(range(1, len(ids) + 1))
    failed = [m for m in whole if m.event == "executor_failed"]
    assert failed
    assert "raise Boom" in failed[-1].data["data"]["error"]["traceback"]

    tail = list(
        messages((await api.get("/api/runs/f1/events", params={"after": 2})).text.splitlines())
    )
    assert [m.id for m in tail[:-1]] == ids[2:]
    # The header is where the client got to: it wins over the URL's ?after=.
    resumed = await api.get(
        "/api/runs/f1/events", params={"after": 1}, headers={"Last-Event-ID": str(ids[-2])}
    )
    assert [m.id for m in messages(resumed.text.splitlines())] == [ids[-1], None]
    for headers, params in (
        ({"Last-Event-ID": "x"}, {}),
        ({"Last-Event-ID": "1_0"}, {}),  # int() reads it as 10
        ({}, {"after": "-1"}),
        ({}, {"after": " 2"}),
        ({}, {"from": "1"}),
    ):
        refused = await api.get("/api/runs/f1/events", headers=headers, params=params)
        assert refused.status_code == 400, refused.text
    assert (await api.get("/api/runs/nope/events")).status_code == 404


def test_serve_prints_its_address_with_a_new_token_and_stops_on_sigterm(tmp_path):
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite")).start()
    try:
        server.ready()
        assert len(server.token) >= 32
        with server.client() as http:
            assert http.get("/api/runs").status_code == 401
            signed_in = http.get(server.url, follow_redirects=True)  # keeps the cookie
            assert signed_in.status_code == 200
            assert signed_in.url.query == b""
            assert f'content="{server.token}"' in signed_in.text
            assert http.get("/api/runs").json() == {"runs": [], "next_cursor": None}
            refused = http.post("/api/runs", json={"workflow": "failing", "input": "x"})
            assert refused.status_code == 401
    finally:
        code, _, log = server.stop()
    assert code == 0, log
    assert server.token not in log  # the access log hides it (GET /?token=...)
    assert "***" in log


def test_serve_refuses_what_it_cannot_serve_before_it_listens(tmp_path):
    env = cli_env(str(tmp_path / "runs.sqlite"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = str(taken.getsockname()[1])
        for args, expected in (
            (("--app", "no_such_module"), "cannot import 'no_such_module'"),
            (("--app", "server_app", "--token", "short"), "the token must be"),
            (("--app", "server_app", "--port", busy), f"cannot listen on 127.0.0.1:{busy}"),
        ):
            done = subprocess.run(
                [TREADLE, "serve", *args],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert done.returncode == 2, done.stderr
            assert expected in done.stderr
            assert "open http" not in done.stdout


def test_a_token_from_the_environment_is_the_one_required(tmp_path):
    token = "from-the-environment-0123456789"  # noqa: S105
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite"), TREADLE_TOKEN=token).start()
    try:
        assert server.token == token
        server.ready()
        with server.client() as http:
            assert (
                http.get("/openapi.json", headers={"Authorization": f"Bearer {token}"}).status_code
                == 200
            )
    finally:
        server.stop()


def test_the_access_log_hides_the_token_in_any_encoding_and_answer_links(tmp_path):
    """Whoever reads the log must not find a credential: the token, or a link's token."""
    token = "q8V+3mRk/Zt5+Lw0Xp2/Hs9=aB7+cD1eF4gH6iJ8kL0mN2oP4qR6="  # noqa: S105 - base64, with + / =
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite"), "--token", token).start()
    auth = {"Authorization": f"Bearer {token}"}
    try:
        with server.client() as http:
            assert http.get(server.url, follow_redirects=True).status_code == 200
            started = http.post(
                "/api/runs", json={"workflow": "approval", "input": {"topic": "t", "words": 1}},
                headers=auth,
            )  # fmt: skip
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
            for _ in range(400):
                detail = http.get(f"/api/runs/{run_id}", headers=auth).json()
                if detail["pending_requests"]:
                    break
            (request,) = detail["pending_requests"]
            made = http.post(
                f"/api/runs/{run_id}/requests/{request['request_id']}/links",
                json={"for": "maria"}, headers=auth,
            )  # fmt: skip
            assert made.status_code == 201, made.text
            link = made.json()["url"]
            link_token = link.rsplit("/", 1)[-1]
            assert http.get(link.removeprefix(server.base)).status_code == 200
    finally:
        code, _, log = server.stop()
    assert code == 0, log
    assert f"/api/runs/{run_id}" in log  # the access log is there, and says the rest
    for secret in (token, quote(token), quote(token, safe=""), link_token):
        assert secret not in log
    assert "GET /?token=*** " in log
    assert "GET /answer/*** " in log


async def test_a_revoked_tokens_open_event_stream_stops_before_its_next_event(
    sqlite_url, tmp_path, monkeypatch
):
    monkeypatch.setattr(_sse, "READMIT_EVERY", 0.2, raising=False)
    secret = "tdl_watcher-secret-0123456789"  # noqa: S105 - the test's own
    viewer = {"Authorization": f"Bearer {secret}"}
    gate = tmp_path / "gate"
    async with serving(sqlite_url) as api:
        await api.store.add_token("watcher", "viewer", token_hash(secret), created_by="test")
        body = {"workflow": "counting", "input": {"to": 6, "gate": str(gate), "hold_at": 2}}
        run_id = (await api.post("/api/runs", json=body)).json()["run"]["run_id"]
        streaming = asyncio.create_task(api.get(f"/api/runs/{run_id}/events", headers=viewer))
        await file_appears(Path(f"{gate}.reached"))
        await api.store.revoke_token("watcher")
        await asyncio.sleep(0.5)  # past READMIT_EVERY: the next event checks again
        gate.touch()  # the run goes on to its end
        streamed = await asyncio.wait_for(streaming, 30)
        refused = await api.get("/api/runs", headers=viewer)
        ended = await api.wait_for(run_id, {"completed"})
    assert refused.status_code == 401
    assert ended["run"]["status"] == "completed"  # the run went on to its end, its stream did not
    kinds = [line for line in streamed.text.splitlines() if line.startswith("event:")]
    assert streamed.status_code == 200, streamed.text
    assert kinds[-1] == "event: error", kinds  # the stream's last word: no longer admitted
    assert '"Unauthorized"' in streamed.text
    assert "event: run_completed" not in kinds
    assert "event: end" not in kinds
