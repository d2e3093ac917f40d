"""Every route by every role: allowed, or 403 naming the role needed (issue 29, must show 2).

The routes are read from the app itself (its route table, the page, its
files, ``/openapi.json``, the sign-in's routes), so a route added later is
checked here too; a route outside the API's table is a reader's (viewer).
Each role calls each route with a named token of its own; below the
route's role the answer is 403 with a message naming the role needed and
nothing changes; at or above it the route runs (whatever it then answers:
404 for a run that does not exist, 400 for a bad body). Revoked and
expired tokens are refused; no token is kept or echoed in clear.
"""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from starlette.routing import Mount, Route

from server.conftest import TOKEN, serving
from treadle._server._app import ENDPOINTS, create_app
from treadle._server._identity import SignIn
from treadle._server._settings import ServerSettings
from treadle._stores._tokens import token_hash
from treadle._values._actors import Role

_SAMPLE = {
    "run_id": "some-run",
    "request_id": "req-1",
    "name": "approval",
    "path": "app.js",
    "schedule_id": "some-schedule",
}
_SIGN_IN = SignIn(issuer="http://127.0.0.1:9", client_id="treadle")
_OPEN = {"/auth/login", "/auth/callback"}  # reached before anyone is signed in
_LINKS = "/answer/"  # an answer link is its own credential (test_server_answer_links.py)


def _routes() -> list[tuple[str, str, str, Role]]:
    """(method, template, path, role needed) of every route the app has, with sign-in on."""
    app = create_app(ServerSettings(token=TOKEN, apps=("server_app",), sign_in=_SIGN_IN))
    needed = {(e.method, e.path): e.role for e in ENDPOINTS}
    found = []
    for route in app.routes:
        if isinstance(route, Route):
            if route.path in _OPEN or route.path.startswith(_LINKS):
                continue
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    role = needed.get((method, route.path), Role.VIEWER)
                    found.append((method, route.path, route.path.format(**_SAMPLE), role))
        elif isinstance(route, Mount):
            found.append(("GET", route.path, f"{route.path}/{_SAMPLE['path']}", Role.VIEWER))
    return found


ROUTES = _routes()


def test_the_table_holds_every_kind_of_route_and_role():
    assert {role for *_, role in ROUTES} == set(Role)
    assert ("POST", "/api/runs/{run_id}/requests/{request_id}") in {r[:2] for r in ROUTES}
    assert ("DELETE", "/api/runs/{run_id}", "/api/runs/some-run", Role.ADMIN) in ROUTES
    assert ("POST", "/api/runs/{run_id}/cancel", "/api/runs/some-run/cancel", Role.OPERATOR) in (
        ROUTES
    )
    assert ("GET", "/api/me", "/api/me", Role.VIEWER) in ROUTES
    assert ("POST", "/auth/logout", "/auth/logout", Role.VIEWER) in ROUTES


def _secret(role: Role) -> str:
    return f"tdl_{role.label}-secret-0123456789"


async def _with_tokens(api) -> None:
    for role in Role:
        await api.store.add_token(
            f"{role.label}-bot", role.label, token_hash(_secret(role)), created_by="test"
        )


async def _call(api, method: str, path: str, secret: str) -> tuple[int, str]:
    """The status and body of one call (an event stream's body is not waited for)."""
    async with api.client.stream(
        method,
        path,
        headers={"Authorization": f"Bearer {secret}"},
        json={"workflow": "approval", "input": {"topic": "y", "words": 1}},
    ) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response.status_code, ""
        return response.status_code, (await response.aread()).decode()


async def _runs(api) -> list[tuple[str, str]]:
    return [(r.run_id, r.status) for r in await api.store.list_runs()]


@pytest.mark.parametrize(("method", "template", "path", "needed"), ROUTES)
async def test_every_route_admits_its_role_and_above_and_refuses_the_rest(
    sqlite_url, method, template, path, needed
):
    async with serving(sqlite_url) as api:  # the server's token starts a run; each role then
        await _with_tokens(api)
        run_id = (await api.start("approval", {"topic": "x", "words": 1}))["run_id"]
        await api.wait_for(run_id, {"awaiting_input"})
        if method != "GET":  # changes act on a real run; reads of some-run answer 404 at once
            path = path.replace("some-run", run_id)
        for role in Role:
            before = await _runs(api)
            status, text = await _call(api, method, path, _secret(role))
            assert status != 401, (role, text)
            assert _secret(role) not in text
            if role < needed:
                assert status == 403, (role, template, text)
                error = json.loads(text)["error"]
                assert error["type"] == "Forbidden"
                assert error["message"].startswith(f"token:{role.label}-bot is a {role.label}: ")
                assert f"needs the {needed.label} role" in error["message"]
                assert await _runs(api) == before  # nothing was changed
            else:
                assert status != 403, (role, template, text)


async def test_the_actor_is_the_tokens_name_and_role(sqlite_url):
    async with serving(sqlite_url, headers={}) as api:
        await _with_tokens(api)
        response = await api.get(
            "/api/me", headers={"Authorization": f"Bearer {_secret(Role.APPROVER)}"}
        )
        assert response.status_code == 200, response.text
        assert response.json()["actor"] == {
            "kind": "token",
            "name": "approver-bot",
            "label": "token:approver-bot",
            "door": "api",
            "role": "approver",
            "groups": [],
        }
        response = await api.get("/api/me", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.json()["actor"]["label"] == "token:server"
        assert response.json()["actor"]["role"] == "admin"
        assert response.json()["sign_in"] is False


async def test_revoked_and_expired_tokens_are_refused(sqlite_url):
    async with serving(sqlite_url, headers={}) as api:
        store = api.store
        await store.add_token("gone", "admin", token_hash("tdl_gone-0123456789"), created_by="t")
        await store.add_token(
            "old",
            "admin",
            token_hash("tdl_old-0123456789"),
            created_by="t",
            expires_at=time.time() - 1,
        )
        await store.add_token(
            "soon",
            "admin",
            token_hash("tdl_soon-0123456789"),
            created_by="t",
            expires_at=time.time() + 3600,
        )
        admitted = await api.get(
            "/api/runs", headers={"Authorization": "Bearer tdl_gone-0123456789"}
        )
        assert admitted.status_code == 200, admitted.text
        await store.revoke_token("gone")
        for given, why in (
            ("tdl_gone-0123456789", "the token 'gone' was revoked"),
            ("tdl_old-0123456789", "the token 'old' has expired"),
            ("tdl_never-made-0123456789", "no token of this server has this value"),
        ):
            response = await api.post(
                "/api/runs",
                headers={"Authorization": f"Bearer {given}"},
                json={"workflow": "approval", "input": {"topic": "x", "words": 1}},
            )
            assert response.status_code == 401, response.text
            assert why in response.json()["error"]["message"]
            assert given not in response.text
        assert await store.list_runs() == []
        response = await api.get(
            "/api/runs", headers={"Authorization": "Bearer tdl_soon-0123456789"}
        )
        assert response.status_code == 200
        used = {t.name: t.last_used_at for t in await store.list_tokens()}
        assert used["soon"] is not None
        assert used["old"] is None


async def test_with_sign_in_the_servers_own_token_admits_nobody(sqlite_url):
    settings = ServerSettings(token=TOKEN, apps=("server_app",), store=sqlite_url, sign_in=_SIGN_IN)
    app = create_app(settings)
    import httpx  # noqa: PLC0415

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            response = await client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code == 401
            assert "named token" in response.json()["error"]["message"]
            page = await client.get("/")
            assert page.status_code == 303
            assert page.headers["location"] == "/auth/login"
            page = await client.get(f"/?token={TOKEN}")
            assert page.status_code == 303
            assert page.headers["location"] == "/auth/login"


async def test_no_token_is_kept_in_clear(sqlite_url):
    async with serving(sqlite_url, headers={}) as api:
        await _with_tokens(api)
        for role in Role:
            await api.get("/api/runs", headers={"Authorization": f"Bearer {_secret(role)}"})
    with sqlite3.connect(sqlite_url) as db:
        rows = db.execute("SELECT * FROM treadle_tokens").fetchall()
    assert len(rows) == len(Role)
    dumped = repr(rows)
    for role in Role:
        assert _secret(role) not in dumped
        assert token_hash(_secret(role)) in dumped
