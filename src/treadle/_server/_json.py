"""What the API answers with: JSON bodies, the one error shape, and secrets kept out of both.

Every error, whatever raised it, reaches the client as
``{"error": {"type", "message"[, "fields"]}}`` with the status
:func:`status_of` gives its class (bad input 400, unknown things 404,
conflicts 409, values that do not fit their type 422), and every message
passes through a :class:`Redactor` first, so neither the server's token nor
a store password is ever echoed back, whatever an error happened to quote.
Values a run holds (outputs, state, payloads) may be any type its workflow
allows; :func:`plain` makes them JSON, never failing on one it cannot.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from starlette.responses import Response

from treadle._engine._errors import RunCancelledError
from treadle._exceptions import (
    ActionRefusedError,
    AppLoadError,
    CheckpointCorruptError,
    CheckpointNotFoundError,
    CommandError,
    DurabilityError,
    EventLogCorruptError,
    GraphChangedError,
    InvalidResponseError,
    LeaseLostError,
    RequestAlreadyAnsweredError,
    RequestError,
    RequestExpiredError,
    RunExistsError,
    RunHasForksError,
    RunNotFoundError,
    ScheduleExistsError,
    ScheduleNotFoundError,
    SerializationError,
    StartRefusedError,
    TreadleError,
    UnknownRequestError,
)
from treadle._operations._plain import plain as to_plain

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

HIDDEN = "***"
"""What a secret is replaced with in any message the server sends."""

# A URL's userinfo password (scheme://user:password@host): hidden wherever one appears.
# Linear in the text, whatever it holds: a scheme starts only where a run of scheme
# characters does, and each part is bounded, so no start scans the rest of the text
# (unbounded, a URL of 100,000 letters took the server 40 s to refuse, every other
# request waiting; any request's path reaches here through the access log).
_URL_PASSWORD = re.compile(
    r"(?<![a-zA-Z0-9+.-])(?P<head>[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^:/@\s]{0,256}:)"
    r"[^@\s]{1,256}(?=@)"
)
# A libpq key=value password (password=secret).
_KEY_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)


class ApiError(Exception):
    """A request the API refuses, with the HTTP status and error type to answer with.

    For what the server itself checks (the body, a query parameter, an id
    prefix); the runtime's own errors are mapped by :func:`status_of`. It
    never leaves the server (it *is* the response), so it stands outside
    the ``TreadleError`` tree that callers of treadle catch.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "CommandError",
        fields: list[dict[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.fields = fields
        self.headers = dict(headers or {})


# Most specific first: RequestAlreadyAnsweredError and RequestExpiredError are
# UnknownRequestErrors, which are RequestErrors; RunNotFoundError is a DurabilityError.
_STATUSES: tuple[tuple[type[BaseException], int], ...] = (
    (ActionRefusedError, 403),  # the actor may not: the message names who may
    (RequestAlreadyAnsweredError, 409),
    (RequestExpiredError, 409),  # its timeout was kept as its answer first
    (UnknownRequestError, 404),
    (InvalidResponseError, 422),
    (RunNotFoundError, 404),
    (CheckpointNotFoundError, 404),
    (RunExistsError, 409),
    (ScheduleNotFoundError, 404),
    (ScheduleExistsError, 409),
    (RunHasForksError, 409),
    (StartRefusedError, 409),  # its start policy's key or queue is taken: the message names by whom
    (LeaseLostError, 409),
    (SerializationError, 422),  # a value the run's workflow cannot store
    (RunCancelledError, 409),
    (RequestError, 409),  # ended, busy, paused: the run's state does not allow it
    (GraphChangedError, 409),
    (CheckpointCorruptError, 409),
    (EventLogCorruptError, 409),
    (AppLoadError, 422),  # an input that fits none of the start executor's types
    (CommandError, 400),
    (DurabilityError, 503),  # the store is unreachable or failing
    (TreadleError, 400),  # raised on purpose: what was asked cannot be done
)


def status_of(error: BaseException) -> int:
    """The HTTP status an error is answered with (500: a bug, never bad input)."""
    if isinstance(error, ApiError):
        return error.status
    for cls, status in _STATUSES:
        if isinstance(error, cls):
            return status
    return 500


class Redactor:
    """Hides secrets (the token, store passwords) in text the server sends or logs.

    Args:
        secrets: Strings that must never appear: the token, passwords.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret containing another is hidden whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    @classmethod
    def of(cls, token: str, store_url: str | None) -> Redactor:
        """The redactor of a server: its token and its store URL's password."""
        secrets = [token]
        if store_url:
            try:
                password = urlsplit(store_url).password
            except ValueError:
                password = None
            if password:
                secrets += [password, unquote(password)]
            secrets += [m.group(2).strip("'") for m in _KEY_PASSWORD.finditer(store_url)]
        return cls(secrets)

    def __call__(self, text: str) -> str:
        """``text`` with every secret and URL or key=value password replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, HIDDEN)
        text = _URL_PASSWORD.sub(lambda m: m.group("head") + HIDDEN, text)
        return _KEY_PASSWORD.sub(lambda m: m.group("head") + HIDDEN, text)


def error_body(
    kind: str, message: str, fields: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The one error shape: ``{"error": {"type", "message"[, "fields"]}}``."""
    error: dict[str, Any] = {"type": kind, "message": message}
    if fields:
        error["fields"] = fields
    return {"error": error}


def plain(value: Any) -> Any:
    """A value as JSON-ready data for an answer: NaN and infinities as null (strict JSON)."""
    return to_plain(value, nan="null")


class JsonResponse(Response):
    """A JSON response of any value :func:`plain` can make JSON (never a serialization error)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """The body: compact UTF-8 JSON."""
        return json.dumps(
            plain(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode()
