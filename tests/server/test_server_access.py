"""Who may use the server and how much they may send, on every route of its table.

The routes are read from the app itself (its API table, ``/openapi.json``,
the page and its files, and a path no route has), so a route added later is
checked here without anyone remembering to: each refuses a missing or wrong
token (401), a change authorized by the page's cookie alone (401), and a
body over the limit (413), declared or streamed. Errors never echo the
token or a store password.
"""

from __future__ import annotations

import pytest
from starlette.routing import Mount, Route

from server.conftest import TOKEN, serving
from treadle._server._app import create_app
from treadle._server._auth import LINK_PATHS
from treadle._server._json import Redactor
from treadle._server._settings import ServerSettings

_SAMPLE = {
    "run_id": "some-run",
    "request_id": "req-1",
    "name": "approval",
    "path": "app.js",
    "schedule_id": "some-schedule",
}


def _routes() -> list[tuple[str, str]]:
    """(method, path) of every route the app has, its parameters filled in."""
    app = create_app(ServerSettings(token=TOKEN, apps=("server_app",)))
    found = []
    for route in app.routes:
        if isinstance(route, Route):
            if route.path.startswith(LINK_PATHS):  # its own credential: test_server_answer_links
                continue
            path = route.path.format(**_SAMPLE)
            found += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
        elif isinstance(route, Mount) and not route.path.startswith(LINK_PATHS):
            found.append(("GET", f"{route.path}/{_SAMPLE['path']}"))
    return [*found, ("GET", "/no/such/route"), ("POST", "/no/such/route")]


ROUTES = _routes()
CHANGES = [(method, path) for method, path in ROUTES if method not in ("GET", "HEAD")]


def test_the_table_holds_every_kind_of_route():
    paths = {path for _, path in ROUTES}
    assert {"/", "/openapi.json", "/api/runs", "/api/runs/some-run/events"} <= paths
    assert ("POST", "/api/runs/some-run/requests/req-1") in ROUTES
    assert ("DELETE", "/api/runs/some-run") in ROUTES
    assert any(path.startswith("/static/") for path in paths)


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_route_refuses_a_missing_or_wrong_token(sqlite_url, method, path):
    async with serving(sqlite_url, headers={}) as api:
        before = await api.store.list_runs()
        for headers, cookies in (
            ({}, {}),
            ({"Authorization": "Bearer wrong-token-0123456789"}, {}),
            ({"Authorization": f"Basic {TOKEN}"}, {}),
            ({"Authorization": f"Bearer {TOKEN}x"}, {}),
            ({}, {"treadle_token": "wrong-token-0123456789"}),
            ({"Authorization": "Bearer wrong-token"}, {"treadle_token": TOKEN}),
        ):
            api.client.cookies.clear()
            for name, value in cookies.items():
                api.client.cookies.set(name, value)
            response = await api.request(
                method, path, headers=headers, json={"workflow": "approval"}
            )
            assert response.status_code == 401, (headers, cookies, response.text)
            error = response.json()["error"]
            assert error["type"] == "Unauthorized"
            assert TOKEN not in response.text
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert await api.store.list_runs() == before  # nothing was changed


@pytest.mark.parametrize(("method", "path"), CHANGES)
async def test_a_change_authorized_by_the_cookie_alone_is_refused(sqlite_url, method, path):
    async with serving(sqlite_url, headers={}) as api:
        api.client.cookies.set("treadle_token", TOKEN)
        response = await api.request(
            method, path, json={"workflow": "approval", "input": {"topic": "x", "words": 1}}
        )
        assert response.status_code == 401, response.text
        assert "cookie alone" in response.json()["error"]["message"]
        assert await api.store.list_runs() == []


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_every_route_refuses_an_oversized_body(sqlite_url, method, path):
    limit = 64
    async with serving(sqlite_url, max_body=limit) as api:
        body = b'{"workflow": "approval", "input": "' + b"x" * limit + b'"}'
        declared = await api.request(
            method, path, content=body, headers={"Content-Type": "application/json"}
        )
        assert declared.status_code == 413, declared.text
        assert declared.json()["error"]["type"] == "PayloadTooLarge"

        async def chunks():  # no Content-Length: counted as it streams in
            for start in range(0, len(body), 16):
                yield body[start : start + 16]

        streamed = await api.request(
            method, path, content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert streamed.status_code == 413, streamed.text
        assert await api.store.list_runs() == []


async def test_a_body_at_the_limit_is_read(sqlite_url):
    body = b'{"workflow": "approval", "input": {"topic": "t", "words": 1}}'
    async with serving(sqlite_url, max_body=len(body)) as api:
        response = await api.post(
            "/api/runs", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 201, response.text


async def test_the_address_with_the_token_sets_the_cookie_and_leaves_the_token_out_of_the_url(
    sqlite_url,
):
    async with serving(sqlite_url, headers={}) as api:
        wrong = await api.get("/?token=wrong-token-0123456789")
        assert wrong.status_code == 401
        assert "set-cookie" not in wrong.headers

        signed_in = await api.get(f"/?token={TOKEN}")
        assert signed_in.status_code == 303
        assert signed_in.headers["location"] == "/"
        cookie = signed_in.headers["set-cookie"]
        assert cookie.startswith(f"treadle_token={TOKEN};")
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attribute in cookie

        api.client.cookies.set("treadle_token", TOKEN)
        assert (await api.get("/api/workflows")).status_code == 200  # reads: the cookie will do
        page = await api.get("/")
        assert page.status_code == 200
        refused = await api.post("/api/runs", json={"workflow": "approval", "input": None})
        assert refused.status_code == 401  # a change: only with the header


async def test_errors_never_echo_the_token_or_a_store_password(sqlite_url):
    async with serving(sqlite_url) as api:
        response = await api.get(f"/api/runs/{TOKEN}")
        assert response.status_code == 404
        assert TOKEN not in response.text
        assert "***" in response.json()["error"]["message"]

        unknown = await api.post("/api/runs", json={"workflow": f"wf-{TOKEN}", "input": 1})
        assert unknown.status_code == 404
        assert TOKEN not in unknown.text

    redact = Redactor.of(TOKEN, "postgresql://treadle:s3cr%40t-pw@db.example/runs")
    for text in (
        "could not connect to postgresql://treadle:s3cr%40t-pw@db.example/runs",
        "password was s3cr@t-pw",
        f"Bearer {TOKEN}",
        "dsn host=db password=other-secret user=x",
        "see mysql://me:hunter2@h/db",
    ):
        shown = redact(text)
        for secret in ("s3cr%40t-pw", "s3cr@t-pw", TOKEN, "other-secret", "hunter2"):
            assert secret not in shown, shown


@pytest.mark.timeout(60)  # unbounded, the first of these took minutes, blocking every caller
async def test_a_long_path_or_text_is_refused_or_redacted_in_time_linear_in_its_length(api):
    # Every message the server sends or logs goes through the redactor, the path of a
    # request (the access log) and ids it repeats included; its URL-password pattern
    # used to take time growing with the square of a run of letters.
    missing = await api.get(f"/api/runs/{'a' * 60_000}")  # as long as a client sends
    assert missing.status_code == 404
    unknown = await api.post("/api/runs", json={"workflow": "w" * 1_000_000, "input": 1})
    assert unknown.status_code == 400, unknown.text  # a text field too long: refused at once
    redact = Redactor.of(TOKEN, None)
    for text in ("a" * 300_000, "a://x" * 60_000, "a://:" * 60_000, "a://x:y" * 40_000):
        assert redact(text) == text  # no password in any: nothing hidden
    assert redact("x" * 1000 + " postgresql://u:pw@h " * 3) == "x" * 1000 + (
        " postgresql://u:***@h " * 3
    )


async def test_bodies_must_be_json_objects_with_known_fields(api):
    as_text = await api.post("/api/runs", content=b'{"workflow": "approval"}')
    assert as_text.status_code == 415
    form = await api.post("/api/runs", data={"workflow": "approval"})
    assert form.status_code == 415
    for body, expected in (
        (b"[1, 2]", "must be a JSON object"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe\xfd", "not valid JSON"),
        (b"[" * 5000 + b"]" * 5000, "levels deep"),
    ):
        response = await api.post(
            "/api/runs", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400, response.text
        assert expected in response.json()["error"]["message"]
    typo = await api.post("/api/runs", json={"workflow": "approval", "inputs": {}})
    assert typo.status_code == 400
    assert typo.json()["error"]["fields"][0]["loc"] == "inputs"
    assert await api.store.list_runs() == []


def test_the_server_listens_on_this_machine_only_unless_told():
    settings = ServerSettings(token=TOKEN)
    assert settings.host == "127.0.0.1"
    assert settings.page_url().startswith("http://127.0.0.1:8420/?token=")
    for bad in ("short", "has space in it", "semi;colon-0123"):
        with pytest.raises(ValueError, match="token"):
            ServerSettings(token=bad)
