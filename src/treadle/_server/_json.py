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

import asyncio
import dataclasses
import json
import math
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


def _dumps(value: Any) -> str:
    """JSON-ready data as compact JSON text, strict: NaN and infinities as null.

    :func:`plain` makes them null, except in a pydantic model whose own
    settings keep them: such a value is written again with them made null
    (:func:`_finite`) rather than failing the answer.
    """
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # a NaN or an infinity that plain() kept
        return json.dumps(
            _finite(value), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )


def _finite(value: Any) -> Any:
    """JSON-ready data with each NaN and infinity as ``None``, copied level by level."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, dict):
            copied: Any = dict.fromkeys(item)
            stack.extend((copied, k, v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            copied = [None] * len(item)
            stack.extend((copied, index, v) for index, v in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            copied = None
        else:
            copied = item
        parent[key] = copied
    return root[0]


class JsonResponse(Response):
    """A JSON response of any value :func:`plain` can make JSON (never a serialization error)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """The body: compact UTF-8 JSON."""
        return _dumps(plain(content)).encode()


INLINE_WEIGHT = 16 * 1024
"""About how many characters of JSON a body (or a piece of one) may come to and be encoded
on the event loop: under a millisecond, less than a hop to a worker thread and back costs."""


async def json_response(
    content: Any, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON response of ``content``, a large one encoded on a worker thread, in pieces.

    Encoding holds whoever runs it: the event loop, for a run of 4 MB, for
    about 0.3 s, every other client of the server waiting. A small body is
    encoded inline (a thread hop costs more than encoding it); a large one
    on a worker thread, in pieces of :data:`INLINE_WEIGHT`
    (:func:`encode_in_pieces`), because ``json`` and pydantic encode a
    value whole in native code without letting go of the GIL: encoded
    whole, even on a thread, it would hold the loop just the same.
    Which is which is told by :func:`weight`, which walks no further into
    ``content`` than the bound.
    """
    if weight(content, INLINE_WEIGHT) <= INLINE_WEIGHT:
        return JsonResponse(content, status_code, headers)
    body = await asyncio.to_thread(encode_in_pieces, content)
    return Response(body, status_code, headers, media_type=JsonResponse.media_type)


def weight(value: Any, limit: int) -> int:
    """About how many characters ``value`` comes to as JSON, counted no further than past ``limit``.

    A text counts its length, a dict, list, tuple or set its entries (and
    then each of them), a dataclass or model its fields, anything else (a
    number, a time) a few characters. Never exact, and it need not be: it
    tells a body to encode at once from one worth a thread, and a piece to
    encode from one to split, at a cost bounded by ``limit`` however large
    ``value`` is.
    """
    total = 0
    stack = [value]
    while stack and total <= limit:
        item = stack.pop()
        if item is None or isinstance(item, int | float):  # bool too: the most common, first
            total += 8
        elif isinstance(item, str | bytes | bytearray):
            total += len(item) + 2
        elif isinstance(item, dict):
            total += 2 * len(item) + 2
            if total <= limit:
                stack += item.keys()
                stack += item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            total += len(item) + 2
            if total <= limit:
                stack += item
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            total += 2
            stack += (getattr(item, field.name) for field in dataclasses.fields(item))
        elif isinstance(fields := getattr(item, "__dict__", None), dict):  # a model's fields
            total += 2
            stack += fields.values()
        else:
            total += 8
    return total


class _Raw(str):
    """Text of the JSON being written, not a value to encode (a value's texts are ``str``).

    A bracket, a comma, a key, or entries encoded together.
    """

    __slots__ = ()


def encode_in_pieces(content: Any) -> bytes:
    """What :meth:`JsonResponse.render` gives, encoded about :data:`INLINE_WEIGHT` at a time.

    A dict, list or tuple heavier than that is written as its brackets
    around its entries, encoded a batch at a time (:func:`_split`); a heavy
    entry that is one itself is split in turn; anything else is encoded
    whole, as :func:`plain` and ``json`` make it. Between pieces the GIL
    can pass to the event loop's thread (this runs on a worker thread:
    :func:`json_response`). Without recursion: a deep value makes a long
    stack, never a deep one.
    """
    written: list[str] = []
    stack: list[Any] = [content]
    while stack:
        item = stack.pop()
        if type(item) is _Raw:
            written.append(item)
        elif _heavy(item):
            stack += reversed(_split(item))
        else:
            written.append(_dumps(plain(item)))
    return "".join(written).encode()


def _heavy(value: Any) -> bool:
    """Whether ``value`` is a dict, list or tuple to split: heavier than a piece."""
    return type(value) in (dict, list, tuple) and weight(value, INLINE_WEIGHT) > INLINE_WEIGHT


_FEW = 64
"""A container of at most this many entries has each weighed before it is batched (_split)."""


def _split(container: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[Any]:
    """A heavy container's parts in order: ``_Raw`` texts, and heavy entries to split further.

    Its entries are encoded in batches whose size follows what the last
    batch came to, so that each comes to about a piece. An entry is
    weighed first, so that a heavy one is split in turn rather than
    encoded whole, in a container of a few entries (a record: a run's
    detail, its state), or while a batch is one entry: weighing each of
    a long list's entries would walk all of it in Python, ten times what
    encoding it costs. So a heavy entry among many light ones of a long
    list is encoded with its batch, whole.
    """
    keyed = isinstance(container, dict)
    items: Any = list(container.items()) if isinstance(container, dict) else container
    few = len(items) <= _FEW
    entries: list[list[Any]] = []
    count = at = 0
    while at < len(items):
        value = items[at][1] if keyed else items[at]
        if (few or count <= 1) and _heavy(value):
            if keyed:  # the key as plain() writes it: {key: 0} is '{"key":0}'
                key = _dumps(plain({items[at][0]: 0}))[1:-3]
                entries.append([_Raw(f"{key}:"), value])
            else:
                entries.append([value])
            at += 1
            continue
        count = 1 if few else max(count, 1)
        batch = items[at : at + count]
        text = _dumps(plain(dict(batch) if keyed else batch))[1:-1]
        entries.append([_Raw(text)])
        at += count
        count = max(1, min(2 * count, count * INLINE_WEIGHT // max(len(text), 1)))
    parts: list[Any] = [_Raw("{" if keyed else "[")]
    for index, entry in enumerate(entries):
        if index:
            parts.append(_Raw(","))
        parts += entry
    parts.append(_Raw("}" if keyed else "]"))
    return parts
