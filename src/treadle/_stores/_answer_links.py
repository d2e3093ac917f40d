"""Answer links' values: the link a store keeps, the token that names it, an endpoint's offer.

A link's token is ``PAYLOAD.SIGNATURE``: the payload names the run, the
request, the principal, the expiry, the nonce and (when any) the groups the
answer counts in; the signature is an HMAC-SHA256 of it under a secret the
store keeps, so a changed token is refused. The store keeps each link's
nonce and marks it used by its one use (:mod:`treadle._stores._outbox`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LinkOffer:
    """What an endpoint's ``request.created`` messages carry: an answer link for one person.

    Attributes:
        principal: Who the link answers as.
        groups: The groups the link's answer counts in.
        lifetime: Seconds the link works, from the request's asking.
        base_url: The server's address the link points at.
    """

    principal: str
    groups: tuple[str, ...] = ()
    lifetime: float = 86400.0
    base_url: str = ""

    def to_json(self) -> dict[str, Any]:
        """The offer as plain data (kept in the store as JSON)."""
        return {
            "principal": self.principal,
            "groups": list(self.groups),
            "lifetime": self.lifetime,
            "base_url": self.base_url,
        }

    @classmethod
    def from_json(cls, text: str | None) -> LinkOffer | None:
        """The offer kept as JSON (``None``: the endpoint offers none)."""
        if not text:
            return None
        data = json.loads(text)
        return cls(
            str(data["principal"]),
            tuple(data.get("groups", ())),
            float(data.get("lifetime", 86400.0)),
            str(data.get("base_url", "")),
        )


@dataclass(frozen=True, slots=True)
class AnswerLink:
    """A signed, single-use link to answer one request as one principal.

    Attributes:
        nonce: Its unique part (the store's key for it).
        run_id: The run.
        request_id: The request it answers.
        principal: Who it answers as (the actor's name).
        expires_at: After this it is refused.
        created_at: When it was made.
        created_by: Who made it (an actor's label).
        used_at: When its one use was (``None``: unused).
        used_by: Who used it.
        groups: The principal's groups its answer counts with (a request
            naming ``group:finance`` as its approvers), signed into the
            token rather than kept in the store: read back from the token.
    """

    nonce: str
    run_id: str
    request_id: str
    principal: str
    expires_at: float
    created_at: float
    created_by: str
    used_at: float | None = None
    used_by: str | None = None
    groups: tuple[str, ...] = ()


LINK_COLUMNS = (
    "nonce, run_id, request_id, principal, expires_at, created_at, created_by, used_at, used_by"
)


def link_token(link: AnswerLink, key: bytes) -> str:
    """The link's token: its signed payload, ``PAYLOAD.SIGNATURE`` in URL-safe base64."""
    body = {
        "r": link.run_id,
        "q": link.request_id,
        "p": link.principal,
        "e": link.expires_at,
        "n": link.nonce,
    }
    if link.groups:
        body["g"] = sorted(link.groups)
    payload = b64(json.dumps(body, separators=(",", ":")).encode())
    return f"{payload}.{b64(_mac(key, payload))}"


def link_claims(token: str, key: bytes) -> tuple[str, tuple[str, ...]] | None:
    """The nonce and groups a token signs, if its signature holds under ``key``; else ``None``."""
    payload, _, signature = token.partition(".")
    try:
        # The signature's text itself, as link_token wrote it: decoding it first would let
        # characters base64 skips (``!``, ``*``) into a changed link that still verified.
        if not hmac.compare_digest(signature.encode(), b64(_mac(key, payload)).encode()):
            return None
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, TypeError):
        return None
    nonce = body.get("n") if isinstance(body, dict) else None
    if not isinstance(nonce, str):
        return None
    groups = body.get("g") or []
    return nonce, tuple(str(g) for g in groups) if isinstance(groups, list) else ()


def link_nonce(token: str, key: bytes) -> str | None:
    """The nonce of a token whose signature holds under ``key``; ``None``: tampered or not one."""
    claims = link_claims(token, key)
    return None if claims is None else claims[0]


def new_nonce() -> str:
    """A fresh link nonce."""
    return secrets.token_urlsafe(18)


def new_key() -> str:
    """A fresh signing key for answer links (hex)."""
    return secrets.token_hex(32)


def _mac(key: bytes, payload: str) -> bytes:
    return hmac.new(key, payload.encode(), hashlib.sha256).digest()


def b64(data: bytes) -> str:
    """``data`` in URL-safe base64 without its padding."""
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
