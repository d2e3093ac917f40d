"""Reading what a request says: its JSON body and its query parameters, checked strictly.

A body must be a JSON object sent as ``application/json`` (else 415), no
deeper than the commands layer accepts (:data:`MAX_JSON_DEPTH`), with
exactly the keys its route knows: an unknown key is refused by name rather
than ignored, so a misspelt ``"run-id"`` is never silently dropped. Query
parameters are checked the same way. Every refusal is an :class:`ApiError`
naming the field at fault; nothing from a request is ever evaluated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from treadle._exceptions import CommandError
from treadle._operations import _shapes as shapes
from treadle._operations._inputs import MAX_JSON_DEPTH, json_depth_exceeds
from treadle._server._json import ApiError
from treadle._values import _strict_json as strict_json

if TYPE_CHECKING:
    from collections.abc import Iterable

    from starlette.requests import Request

T = TypeVar("T")

MAX_LIMIT = 1000
"""The most items one listing returns."""


def _refuse(loc: str, message: str, status: int = 400) -> ApiError:
    return ApiError(status, f"{loc}: {message}", fields=[{"loc": loc, "message": message}])


async def json_object(
    request: Request, known: Iterable[str], *, optional: bool = False
) -> dict[str, Any]:
    """The request's body: a JSON object with no key outside ``known``.

    With ``optional``, an empty body is ``{}``.

    Raises:
        ApiError: 415 not ``application/json``; 400 not JSON, not an object,
            nested too deep, or with unknown keys (each named).
    """
    body = await request.body()
    if not body.strip() and optional:
        return {}
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":
        shown = media or "none"
        raise ApiError(
            415,
            f"the body must be a JSON object sent as Content-Type: application/json (got {shown})",
            kind="UnsupportedMediaType",
        )
    try:
        value = strict_json.loads(body)
    except RecursionError:
        raise _too_deep() from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ApiError(400, f"the body is not valid JSON: {error}") from None
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep()
    if not isinstance(value, dict):
        raise ApiError(400, f"the body must be a JSON object, not {_kind(value)}")
    allowed = set(known)
    strangers = [key for key in value if key not in allowed]
    if strangers:
        listed = ", ".join(sorted(allowed)) or "none"
        raise ApiError(
            400,
            f"unknown field(s) {', '.join(map(repr, strangers))} (this accepts: {listed})",
            fields=[
                {"loc": key, "message": f"no such field (accepts: {listed})"} for key in strangers
            ],
        )
    return value


def _too_deep() -> ApiError:
    return ApiError(
        400, f"the body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep"
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "an array"
    )


def text_field(
    body: dict[str, Any], name: str, *, required: bool = False, longest: int = 1024
) -> str | None:
    """A string field of a body (``None`` when absent and not required), of ``longest`` at most.

    A field is left out to mean "none" (the OpenAPI document types none of
    them as nullable): a ``null`` is refused by name, never read as absent,
    so ``{"checkpoint_id": null}`` cannot quietly resume from the latest.

    Raises:
        ApiError: 400 it is missing though required, or not a non-empty string.
    """
    if name not in body:
        if required:
            raise _refuse(name, "required")
        return None
    value = body[name]
    if not isinstance(value, str) or not value or len(value) > longest:
        raise _refuse(name, f"must be a non-empty string of at most {longest} characters")
    return value


def optional_field(body: dict[str, Any], name: str, *, default: Any = None) -> Any:
    """An optional field of a body as given, ``default`` when left out; ``null`` is refused.

    For the fields whose type the route checks itself: as :func:`text_field`
    says, a ``null`` is refused by name, never read as the field left out.

    Raises:
        ApiError: 400 the field is ``null``.
    """
    if name not in body:
        return default
    if body[name] is None:
        raise _refuse(name, "leave it out for none; null is not a value of it")
    return body[name]


def version_field(body: dict[str, Any], name: str = "version") -> int | None:
    """A workflow version field of a body (``None`` when absent; ``null`` is refused).

    Raises:
        ApiError: 400 it is not an integer from 1.
    """
    if name not in body:
        return None
    value = body[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(name, "must be an integer from 1")
    return value


def check_query(request: Request, known: Iterable[str]) -> None:
    """Refuse query parameters a route does not know, and repeated ones.

    Raises:
        ApiError: 400 naming each.
    """
    allowed = set(known)
    seen: set[str] = set()
    for key, _ in request.query_params.multi_items():
        if key not in allowed:
            listed = ", ".join(sorted(allowed)) or "none"
            raise _refuse(key, f"unknown query parameter (this accepts: {listed})")
        if key in seen:
            raise _refuse(key, "given more than once")
        seen.add(key)


def int_query(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    """An integer query parameter between ``low`` and ``high``.

    Raises:
        ApiError: 400 it is not such a number.
    """
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = whole_number(raw)
    if value is None or not low <= value <= high:
        raise _refuse(name, f"must be a whole number from {low} to {high}")
    return value


def whole_number(text: str) -> int | None:
    """``text`` as a whole number written in ASCII digits alone, else ``None``.

    Python's ``int`` takes more: ``1_0`` (10), ``+5``, `` 7 `` and digits of
    other scripts (``'٣'``: 3). A number in a URL or a header is what a
    client wrote, read one way, and ``int``'s extras only make two spellings
    of one value (or one unexpected to whoever reads the log). Negative
    numbers are refused too: none of the API's counts, limits or event ids
    is below zero.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > _LONGEST_NUMBER:
        return None
    return int(text)


_LONGEST_NUMBER = 30
"""Digits a whole number of a query or header may have (every bound the API sets is shorter)."""


def choice_query(request: Request, name: str, choices: Iterable[str]) -> str | None:
    """A query parameter that must be one of ``choices`` (``None``: not given).

    Raises:
        ApiError: 400 it is another value (the choices listed).
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    allowed = list(choices)
    if raw not in allowed:
        raise _refuse(name, f"must be one of {', '.join(allowed)}")
    return raw


def text_query(request: Request, name: str) -> str | None:
    """A free-text query parameter (``None`` when absent or empty)."""
    raw = request.query_params.get(name)
    return raw or None


def decode_cursor(cursor: str) -> tuple[float, str]:
    """Where a page of runs starts: what a listing's ``next_cursor`` says.

    Raises:
        ApiError: 400 it is not a cursor this server gave.
    """
    try:
        return shapes.decode_cursor(cursor)
    except CommandError:
        raise _refuse(
            "cursor", "not a cursor this server gave (use next_cursor as returned)"
        ) from None
