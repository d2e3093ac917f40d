"""A session signed out on one ``treadle serve`` is refused by every other serving the store.

Two servers on one store is a documented deployment (docs/deploy.md). A
session is a signed value with no row behind it, and signing out was kept
in the serving process alone: the other server took the session for live
for the rest of its hours (up to 12). Here two apps share one SQLite file,
or one PostgreSQL schema, and the same session secret, as two processes do.
"""

from __future__ import annotations

import pytest

from postgres import postgres_dsn
from server.conftest import signing_in
from treadle._server._identity import Sessions, SignIn
from treadle._values._actors import Actor, Role

SECRET = "s3cret-shared-by-both"  # noqa: S105 - a test session secret
SIGN_IN = SignIn(issuer="http://127.0.0.1:9", client_id="treadle", secret=SECRET)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if request.param == "sqlite":
        return sqlite_url
    request.getfixturevalue("pg_schema")  # TREADLE_SCHEMA: the test's own, dropped after it
    return postgres_dsn()


async def test_a_session_signed_out_on_one_server_is_refused_by_the_other(shared_store):
    maria = Actor("user", "maria", "page", Role.VIEWER)
    session = Sessions(SECRET, SIGN_IN.session_seconds, SIGN_IN).issue(maria)
    as_maria = {"Authorization": f"Bearer {session}"}
    async with signing_in(SIGN_IN, shared_store) as one, signing_in(SIGN_IN, shared_store) as other:
        for server in (one, other):
            me = await server.get("/api/me", headers=as_maria)
            assert me.status_code == 200, me.text
            assert me.json()["actor"]["name"] == "maria"
        out = await one.post("/auth/logout", headers=as_maria)
        assert out.status_code == 200, out.text
        assert (await one.get("/api/me", headers=as_maria)).status_code == 401
        by_bearer = await other.get("/api/me", headers=as_maria)
        assert by_bearer.status_code == 401, (
            f"signed out on one server, the session still works on the other: {by_bearer.text}"
        )
        other.cookies.set("treadle_session", session)
        by_cookie = await other.get("/api/me")
        assert by_cookie.status_code == 401, (
            f"signed out on one server, its cookie still reads on the other: {by_cookie.text}"
        )
    async with signing_in(
        SIGN_IN, shared_store
    ) as restarted:  # a process started since: refused too
        assert (await restarted.get("/api/me", headers=as_maria)).status_code == 401
