"""Signing people in with an OpenID Connect provider: authorization code with PKCE.

``GET /auth/login`` sends the browser to the provider's authorization
endpoint (found in its discovery document) with a fresh ``state``,
``nonce`` and PKCE ``code_challenge`` (S256), kept meanwhile in a short
signed cookie (``treadle_signin``, SameSite=Lax so that it comes back with
the provider's redirect; Secure, as the session's, when that redirect is
https). ``GET /auth/callback`` checks the state, trades the code and the
PKCE verifier for tokens at the token endpoint, checks the ID token
(signature against the provider's published keys, issuer, audience,
expiry, nonce: joserfc), maps its claims to an actor
(:meth:`~treadle._server._identity.SignIn.actor_of`) and sets the session
cookie. ``POST /auth/logout`` clears it. ``GET /api/me`` says who the
caller is, for the page.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
from itsdangerous import BadSignature, URLSafeTimedSerializer
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from treadle._server._endpoints import Endpoint, actor_of
from treadle._server._identity import SESSION_PREFIX
from treadle._server._json import ApiError, JsonResponse
from treadle._server._principals import SESSION_COOKIE, TOKEN_COOKIE, bearer_credentials

if TYPE_CHECKING:
    from starlette.requests import Request

    from treadle._server._identity import Sessions, SignIn

SIGNIN_COOKIE = "treadle_signin"
"""The cookie holding a sign-in's state, nonce and PKCE verifier until the provider answers."""

_SIGNIN_SECONDS = 600
_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")


class Provider:
    """One OpenID Connect provider, as this server talks to it.

    Args:
        sign_in: The configuration.
        sessions: Where a signed-in person's session is made.
        secret: What the sign-in cookie is signed with.
    """

    def __init__(self, sign_in: SignIn, sessions: Sessions, secret: str) -> None:
        self.sign_in = sign_in
        self.sessions = sessions
        self._pending = URLSafeTimedSerializer(secret, salt="treadle-signin")
        self._metadata: dict[str, Any] | None = None

    async def metadata(self) -> dict[str, Any]:
        """The provider's discovery document (read once it holds what sign-in needs).

        Raises:
            ApiError: 502, the provider cannot be reached, or its document
                is not JSON or lacks an endpoint sign-in uses.
        """
        if self._metadata is None:
            url = f"{self.sign_in.issuer}/.well-known/openid-configuration"
            found = await _get_json(url)
            for needed in _ENDPOINTS_USED:
                if not isinstance(found.get(needed), str):
                    raise ApiError(502, f"the sign-in provider's {url} has no {needed!r}")
            self._metadata = found
        return self._metadata

    def routes(self) -> list[Route]:
        """``/auth/login``, ``/auth/callback`` and ``/auth/logout``."""
        return [
            Route("/auth/login", self.login, methods=["GET"]),
            Route("/auth/callback", self.callback, methods=["GET"], name="oidc_callback"),
            Route("/auth/logout", self.logout, methods=["POST"]),
        ]

    def _redirect_uri(self, request: Request) -> str:
        return self.sign_in.redirect_uri or str(request.url_for("oidc_callback"))

    def _secure(self, request: Request) -> bool:
        """Whether the sign-in's cookies are ``Secure``: when the browser comes back over https.

        The cookies come back with the provider's redirect to the redirect
        URI, so that address says how the browser reaches this server: the
        configured one (a TLS-terminating proxy's public address, while the
        request here arrived over plain http), else this server's as the
        request gave it, https when the request was (uvicorn takes a
        proxy's ``X-Forwarded-Proto`` from the addresses it trusts:
        docs/server.md).
        """
        return self._redirect_uri(request).startswith("https://")

    async def login(self, request: Request) -> Response:
        """Send the browser to the provider, with a fresh state, nonce and PKCE challenge."""
        metadata = await self.metadata()
        verifier = secrets.token_urlsafe(48)
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = {
            "response_type": "code",
            "client_id": self.sign_in.client_id,
            "redirect_uri": self._redirect_uri(request),
            "scope": " ".join(self.sign_in.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
        }
        response = RedirectResponse(
            f"{metadata['authorization_endpoint']}?{urlencode(query)}", status_code=303
        )
        pending = self._pending.dumps({"state": state, "nonce": nonce, "verifier": verifier})
        response.set_cookie(
            SIGNIN_COOKIE,
            pending,
            max_age=_SIGNIN_SECONDS,
            httponly=True,
            samesite="lax",
            secure=self._secure(request),
        )
        response.headers["cache-control"] = "no-store"
        return response

    async def callback(self, request: Request) -> Response:
        """Trade the code for tokens, check the ID token, set the session, go to the page."""
        pending = self._pending_of(request)
        if request.query_params.get("error"):
            raise _refused(f"the provider refused: {request.query_params['error']}")
        if not secrets.compare_digest(request.query_params.get("state", ""), pending["state"]):
            raise _refused("the sign-in's state does not match: start again at /auth/login")
        code = request.query_params.get("code")
        if not code:
            raise _refused("the provider sent no code: start again at /auth/login")
        claims = await self._claims(request, code, pending)
        actor = self.sign_in.actor_of(claims)
        if isinstance(actor, str):
            raise ApiError(403, actor, kind="Forbidden")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self.sessions.issue(actor),
            max_age=int(self.sign_in.session_seconds),
            httponly=True,
            samesite="lax",  # sent on the provider's redirect back to the page
            secure=self._secure(request),
        )
        response.delete_cookie(SIGNIN_COOKIE, secure=self._secure(request), httponly=True)
        response.headers["cache-control"] = "no-store"
        return response

    def _pending_of(self, request: Request) -> dict[str, str]:
        try:
            pending: dict[str, str] = self._pending.loads(
                request.cookies.get(SIGNIN_COOKIE, ""), max_age=_SIGNIN_SECONDS
            )
        except BadSignature:
            raise _refused(
                "no sign-in is under way in this browser: start again at /auth/login"
            ) from None
        return pending

    async def _claims(self, request: Request, code: str, pending: dict[str, str]) -> dict[str, Any]:
        metadata = await self.metadata()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self._redirect_uri(request),
            "code_verifier": pending["verifier"],
            "client_id": self.sign_in.client_id,
        }
        endpoint = metadata["token_endpoint"]
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                if self.sign_in.client_secret is None:  # a public client: PKCE alone
                    answer = await client.post(endpoint, data=form)
                else:
                    secret = (self.sign_in.client_id, self.sign_in.client_secret)
                    answer = await client.post(endpoint, data=form, auth=secret)
        except httpx.HTTPError as error:
            msg = f"the sign-in provider cannot be reached at {endpoint}: {error}"
            raise ApiError(502, msg) from None
        if answer.status_code != 200:  # noqa: PLR2004 - the token endpoint's success
            raise _refused(f"the provider refused the code ({answer.status_code})")
        id_token = _json_of(answer, endpoint).get("id_token")
        if not isinstance(id_token, str):
            raise _refused("the provider sent no ID token")
        keys = KeySet.import_key_set(await _get_json(metadata["jwks_uri"]))  # type: ignore[arg-type]
        try:
            token = jwt.decode(id_token, keys, algorithms=_ALGORITHMS)
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": metadata.get("issuer", self.sign_in.issuer)},
                aud={"essential": True, "value": self.sign_in.client_id},
                nonce={"essential": True, "value": pending["nonce"]},
                sub={"essential": True},
            ).validate(token.claims)
        except (JoseError, ValueError) as error:
            raise _refused(f"the provider's ID token does not hold: {error}") from None
        return dict(token.claims)

    async def logout(self, request: Request) -> Response:
        """Sign the session out and clear its cookie; say where the provider signs out too.

        The session the request carries (the page's bearer and its cookie)
        names nobody from now on, whoever copied it, in every process that
        serves the store (the store keeps it: :meth:`Sessions.end`). ``end_session``: the
        provider's own sign-out (its ``end_session_endpoint``), where the
        page goes next, so that its next sign-in asks again rather than
        passing through the provider's live session; ``null`` if it has none.
        """
        bearer = bearer_credentials(request.headers.get("authorization", "")) or ""
        store = getattr(getattr(request.app.state, "served", None), "store", None)
        for value in (bearer, request.cookies.get(SESSION_COOKIE, "")):
            if value.startswith(SESSION_PREFIX):
                await self.sessions.end(value, store)
        end_session = (self._metadata or {}).get("end_session_endpoint")
        if isinstance(end_session, str):
            home = str(request.base_url)  # this server's page, as the browser reached it
            back = {"client_id": self.sign_in.client_id, "post_logout_redirect_uri": home}
            end_session = f"{end_session}?{urlencode(back)}"
        else:
            end_session = None
        response = JsonResponse({"signed_out": True, "end_session": end_session})
        secure = self._secure(request)
        response.delete_cookie(SESSION_COOKIE, secure=secure, httponly=True)
        response.delete_cookie(TOKEN_COOKIE, secure=secure, httponly=True)
        return response


def _refused(message: str) -> ApiError:
    """A sign-in refused: 401, typed as every refusal to say who someone is (``Unauthorized``)."""
    return ApiError(401, message, kind="Unauthorized")


_ENDPOINTS_USED = ("authorization_endpoint", "token_endpoint", "jwks_uri")
"""What of a provider's discovery document sign-in uses (its ``issuer`` has a default)."""


async def _get_json(url: str) -> dict[str, Any]:
    """The JSON object at ``url`` of the provider.

    Raises:
        ApiError: 502, the provider cannot be reached, answers with an
            error, or answers what is not a JSON object: a sign-in that
            cannot go on for now, never a 500 (a bug).
    """
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(url)
    except httpx.HTTPError as error:
        raise ApiError(502, f"the sign-in provider cannot be reached at {url}: {error}") from None
    if response.status_code != 200:  # noqa: PLR2004 - success
        raise ApiError(502, f"the sign-in provider answered {response.status_code} at {url}")
    return _json_of(response, url)


def _json_of(response: httpx.Response, url: str) -> dict[str, Any]:
    """The JSON object a provider answered, or a 502 saying it answered something else."""
    try:
        found = response.json()
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise ApiError(502, f"the sign-in provider answered what is not a JSON object at {url}")
    return found


async def who_am_i(request: Request) -> Response:
    """``GET /api/me``: who the caller is, by which door, with which role."""
    actor = actor_of(request)
    sign_in = getattr(request.app.state, "sign_in", None) is not None
    return JsonResponse({"actor": actor.to_json(), "sign_in": sign_in})


ENDPOINTS = (
    Endpoint("GET", "/api/me", who_am_i, "Who the caller is, and with which role", response="Me"),
)
