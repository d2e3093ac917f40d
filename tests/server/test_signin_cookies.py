"""The page's cookies are ``Secure`` whenever the browser reaches the server over https.

Behind a TLS-terminating proxy the server sees plain http: the session
cookie's flag followed the request's scheme, so it went without ``Secure``
there, and the sign-in's own cookie (state, nonce, PKCE verifier) never had
it. A sign-in whose redirect URI is https, or a request that is https (as
uvicorn makes one a trusted proxy forwarded with ``X-Forwarded-Proto:
https``), now sets both with it.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey

from server.conftest import ServeProcess, signing_in
from treadle._server._identity import SignIn

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import httpx

KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)


class _Provider(http.server.BaseHTTPRequestHandler):
    """A provider that signs in whoever comes: its document, its keys, an ID token."""

    issuer = ""
    nonce: ClassVar[list[str]] = []  # the nonce of the sign-in under way (set by the test)

    def _answer(self, data: dict[str, Any]) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.endswith("/openid-configuration"):
            self._answer(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": f"{self.issuer}/authorize",
                    "token_endpoint": f"{self.issuer}/token",
                    "jwks_uri": f"{self.issuer}/keys",
                }
            )
        else:
            self._answer({"keys": [KEY.as_dict(private=False)]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": "treadle",
            "sub": "maria-1",
            "preferred_username": "maria",
            "nonce": self.nonce[-1],
            "iat": now,
            "exp": now + 300,
        }
        self._answer({"id_token": jwt.encode({"alg": "RS256", "kid": "k1"}, claims, KEY)})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def issuer() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    _Provider.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    _Provider.nonce.clear()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _Provider.issuer
    server.shutdown()
    server.server_close()


def _set_cookie(response: httpx.Response, name: str) -> str:
    found = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    assert len(found) == 1, response.headers
    return found[0]


@pytest.mark.parametrize(
    ("base_url", "redirect_uri"),
    [
        # the proxy's public address configured; the request here is plain http
        ("http://testserver", "https://treadle.example.com/auth/callback"),
        # the request is https: what uvicorn makes of a trusted proxy's X-Forwarded-Proto
        ("https://testserver", None),
    ],
    ids=["https-redirect-uri", "https-request"],
)
async def test_the_sign_in_and_session_cookies_are_secure_behind_a_tls_proxy(
    sqlite_url, issuer, base_url, redirect_uri
):
    sign_in = SignIn(issuer=issuer, client_id="treadle", redirect_uri=redirect_uri)
    async with signing_in(sign_in, sqlite_url, base_url) as client:
        login = await client.get("/auth/login")
        assert login.status_code == 303, login.text
        sent = parse_qs(urlsplit(login.headers["location"]).query)
        _Provider.nonce.append(sent["nonce"][0])
        pending = _set_cookie(login, "treadle_signin")
        back = await client.get(  # as the browser comes back: over https, the cookie sent
            "/auth/callback",
            params={"code": "the-code", "state": sent["state"][0]},
            headers={"Cookie": pending.partition(";")[0]},
        )
        assert back.status_code == 303, back.text
    assert "; secure" in pending.lower(), f"the sign-in's cookie has no Secure: {pending}"
    session = _set_cookie(back, "treadle_session")
    assert "; secure" in session.lower(), f"the session's cookie has no Secure: {session}"


async def test_over_plain_http_the_cookies_are_not_secure(sqlite_url, issuer):
    # Secure over http would make a browser drop the cookie: a sign-in on a plain
    # http address (127.0.0.1, a trusted network) must still work.
    async with signing_in(SignIn(issuer=issuer, client_id="treadle"), sqlite_url) as client:
        login = await client.get("/auth/login")
    assert "secure" not in _set_cookie(login, "treadle_signin").lower()


def test_treadle_serve_takes_https_from_a_proxy_on_its_machine_for_the_cookie(tmp_path: Path):
    # uvicorn trusts X-Forwarded-Proto from 127.0.0.1 (FORWARDED_ALLOW_IPS for others):
    # the page's cookie set through a proxy on this machine carries Secure.
    with ServeProcess.running(tmp_path) as serve, serve.client() as client:
        direct = client.get("/", params={"token": serve.token})
        proxied = client.get(
            "/", params={"token": serve.token}, headers={"X-Forwarded-Proto": "https"}
        )
    assert direct.status_code == proxied.status_code == 303
    assert "secure" not in _set_cookie(direct, "treadle_token").lower()
    cookie = _set_cookie(proxied, "treadle_token")
    assert "; secure" in cookie.lower(), f"the page's cookie behind a proxy has no Secure: {cookie}"
