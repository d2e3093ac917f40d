"""A sign-in whose provider is down or answers wrongly is a 502 saying so, never a 500.

The page sends a visitor without a session to ``/auth/login``, which reads
the provider's discovery document: a provider not listening, one answering
HTML, or one whose document lacks an endpoint was a 500 ("the server
failed") with httpx's, json's or a KeyError's traceback in the log.
"""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest

from server.conftest import TOKEN
from treadle._server._app import create_app
from treadle._server._identity import SignIn
from treadle._server._settings import ServerSettings

DOCUMENTS = {
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
    sign_in = SignIn(issuer=issuer, client_id="treadle")
    settings = ServerSettings(token=TOKEN, apps=("server_app",), store=sqlite_url, sign_in=sign_in)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            login = await client.get("/auth/login")
    assert login.status_code == 502, login.text
    assert said in login.json()["error"]["message"]
