"""A sign-in whose provider is down or answers wrongly is a 502 saying so, never a 500.

The page sends a visitor without a session to ``/auth/login``, which reads
the provider's discovery document: a provider not listening, one answering
HTML, or one whose document lacks an endpoint was a 500 ("the server
failed") with httpx's, json's or a KeyError's traceback in the log.
"""

from __future__ import annotations

import http.server
import threading

import pytest

from server.conftest import signing_in
from treadle._server._identity import Sessions, SignIn
from treadle._values._actors import Actor, Role

_FULL = (
    b'{"issuer": "x", "authorization_endpoint": "http://127.0.0.1:9/a",'
    b' "token_endpoint": "http://127.0.0.1:9/t", "jwks_uri": "http://127.0.0.1:9/k",'
    b' "end_session_endpoint": "http://127.0.0.1:9/end"}'
)
DOCUMENTS = {
    "/full/.well-known/openid-configuration": (_FULL, "application/json"),
    "/html/.well-known/openid-configuration": (b"<html>down for maintenance</html>", "text/html"),
    "/partial/.well-known/openid-configuration": (
        b'{"issuer": "x", "token_endpoint": "http://127.0.0.1:9/t", "jwks_uri": "http://127.0.0.1:9/k"}',
        "application/json",
    ),
}


class _Provider(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body, kind = DOCUMENTS.get(self.path, (b"{}", "application/json"))
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("dead", "the sign-in provider cannot be reached at http://127.0.0.1:9/"),
        ("html", "answered what is not a JSON object"),
        ("partial", "has no 'authorization_endpoint'"),
    ],
)
async def test_a_provider_down_or_wrong_is_a_502_naming_it(sqlite_url, provider, where, said):
    issuer = "http://127.0.0.1:9" if where == "dead" else f"{provider}/{where}"
    async with signing_in(SignIn(issuer=issuer, client_id="treadle"), sqlite_url) as client:
        login = await client.get("/auth/login")
    assert login.status_code == 502, login.text
    assert said in login.json()["error"]["message"]


async def test_signing_out_ends_the_session_and_says_where_the_provider_signs_out(
    sqlite_url, provider
):
    # After "Sign out" the session's value still answered as maria for its 12 hours, and the
    # provider's live session signed her straight back in.
    secret = "s3cret"  # noqa: S105 - a test session secret
    sign_in = SignIn(issuer=f"{provider}/full", client_id="treadle", secret=secret)
    maria = Actor("user", "maria", "page", Role.VIEWER)
    session = Sessions(secret, 3600.0, sign_in).issue(maria)
    as_maria = {"Authorization": f"Bearer {session}"}
    async with signing_in(sign_in, sqlite_url) as client:
        assert (await client.get("/auth/login")).status_code == 303  # reads the document
        me = await client.get("/api/me", headers=as_maria)
        assert me.json()["actor"]["name"] == "maria"
        out = await client.post("/auth/logout", headers=as_maria)
        assert out.status_code == 200, out.text
        assert out.json() == {
            "signed_out": True,
            "end_session": "http://127.0.0.1:9/end?client_id=treadle"
            "&post_logout_redirect_uri=http%3A%2F%2Ftestserver%2F",
        }
        again = await client.get("/api/me", headers=as_maria)
        assert again.status_code == 401, again.text


async def test_a_sign_in_refused_is_typed_as_any_refusal_to_say_who_someone_is(sqlite_url):
    # Its 401s said "CommandError", where every other 401 says "Unauthorized".
    sign_in = SignIn(issuer="http://127.0.0.1:9", client_id="treadle")
    async with signing_in(sign_in, sqlite_url) as client:
        back = await client.get("/auth/callback", params={"code": "c", "state": "s"})
    assert back.status_code == 401
    assert back.json()["error"] == {
        "type": "Unauthorized",
        "message": "no sign-in is under way in this browser: start again at /auth/login",
    }
