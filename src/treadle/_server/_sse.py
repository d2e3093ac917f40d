"""A run's event log as Server-Sent Events, resumable with nothing missed or repeated.

``GET /api/runs/{run_id}/events`` sends one SSE message per logged event:
``id: <seq>``, ``event: <kind>``, ``data: <the event as JSON>``. The log is
the store's (:mod:`treadle._workflow._following`), so a run started
anywhere (another process, a worker) is followed the same way, and since
each event's ``seq`` is its place in the run's log, a client that
reconnects with ``Last-Event-ID: N`` (as a browser's ``EventSource`` does
by itself) gets exactly the events after N, in order. ``?after=N`` does the
same for a first connection; the header wins when both are given, since it
is where the client actually got to. Once the run has ended and every event
is sent, a last message ``event: end`` (with no id) closes the stream: a
client should then stop rather than reconnect.

Live events of the run, wherever it runs (an agent's token deltas, never
logged; progress, logged at its barrier), are sent too, as they are raised,
between the logged ones: each with its ``event:`` kind and ``"seq": null``,
and no ``id``, since a reconnecting client cannot get them back (the final
message deltas add up to is logged, and so is progress once it commits).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError

from treadle._exceptions import TreadleError
from treadle._operations._shapes import event_json
from treadle._server._body import check_query, int_query, whole_number
from treadle._server._endpoints import Endpoint, Param
from treadle._server._json import ApiError, error_body, plain, status_of
from treadle._server._state import served_of
from treadle._workflow._following import follow

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from starlette.requests import Request
    from starlette.responses import Response

    from treadle._server._state import Served
    from treadle._stores._store import LoggedEvent

_MAX_SEQ = 2**53
"""The largest event id a client may name (JSON's largest exact integer)."""

_PING = 15
"""Seconds between keep-alive comments on a quiet stream."""

READMIT_EVERY = 5.0
"""Seconds a stream goes on before its caller's credential is checked again.

A token revoked (``treadle tokens revoke``) or a sign-in ended stops the
streams it opened before they send any event past this: a stream is one
request, which the server's guard admitted once, and one on a run that
lasts days would have gone on for days.
"""


def _resume_point(request: Request) -> int:
    """Where the stream starts: after ``Last-Event-ID``, else after ``?after=``, else 0.

    Raises:
        ApiError: 400 either is not a whole number from 0 up.
    """
    after = int_query(request, "after", 0, low=0, high=_MAX_SEQ)
    last = request.headers.get("last-event-id")
    if last is None or not last.strip():
        return after
    seq = whole_number(last.strip())
    if seq is None or seq > _MAX_SEQ:
        message = "must be the id of an event this stream sent (a whole number)"
        raise ApiError(
            400, f"Last-Event-ID: {message}", fields=[{"loc": "Last-Event-ID", "message": message}]
        )
    return seq


async def run_events(request: Request) -> Response:
    """``GET /api/runs/{run_id}/events``: the run's events as they commit (see the module)."""
    served = served_of(request)
    check_query(request, ("after",))
    run = await served.find_run(request.path_params["run_id"])
    after = _resume_point(request)
    readmit = getattr(request.state, "readmit", None)
    return EventSourceResponse(
        _messages(served, run.run_id, after, readmit),
        ping=_PING,
        # A client that takes nothing for this long is let go, and with it the events
        # held for it: a page of the log, as large as a commit's events are.
        send_timeout=served.settings.send_seconds,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _messages(
    served: Served,
    run_id: str,
    after: int,
    readmit: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """The run's logged events, with its live ones (no ``id``) between them as they come.

    ``readmit``: who sent the request, asked again (a sentence: no longer
    admitted), every :data:`READMIT_EVERY` seconds before an event is sent.
    """
    following = follow(
        served.store, run_id, after=after, poll=served.settings.event_poll, live=True
    )
    admitted_at = asyncio.get_running_loop().time()
    # Closed whichever way this ends: a client gone while this waits at a yield (sending)
    # left the follower, and the store connection it reads live events on, open until
    # the garbage collector found it: hundreds of them under streams opened and dropped.
    try:
        async with contextlib.aclosing(following) as events:
            async for event in events:
                now = asyncio.get_running_loop().time()
                if readmit is not None and now - admitted_at >= READMIT_EVERY:
                    refused = await readmit()
                    if isinstance(refused, str):
                        body = error_body("Unauthorized", refused)
                        body["error"]["status"] = 401
                        yield ServerSentEvent(json.dumps(body), event="error")
                        return
                    admitted_at = now
                if not event.seq:
                    yield _live_message(event)
                    continue
                data = json.dumps(plain(event_json(event)), ensure_ascii=False, allow_nan=False)
                yield ServerSentEvent(data, event=event.kind, id=str(event.seq))
                # Let the loop run between events: a client gone mid-burst is noticed
                # at once, rather than after writing a page of events to a closed socket.
                await asyncio.sleep(0)
    except TreadleError as error:  # deleted meanwhile, or the store failed
        yield _error_message(served, error)
        return
    yield ServerSentEvent("{}", event="end")


def let_go(error: BaseException | None) -> bool:
    """Whether ``error`` ended a stream whose client took nothing for ``--send-timeout`` s.

    That is the client's doing, not a failure of the server's: said in one
    line, at info level (sse-starlette raises it out of the response, perhaps
    in a group of one).
    """
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return isinstance(error, SendTimeoutError)


def _error_message(served: Served, error: TreadleError) -> ServerSentEvent:
    """Why the stream stops early (the run was deleted, the store failed), as an event."""
    body = error_body(type(error).__name__, served.redactor(str(error)))
    body["error"]["status"] = status_of(error)
    return ServerSentEvent(json.dumps(body), event="error")


def _live_message(event: LoggedEvent) -> ServerSentEvent:
    """A live event (a token delta, progress before its barrier): no ``id``, not in the log."""
    body = plain(event_json(event))
    body["seq"] = None
    return ServerSentEvent(json.dumps(body, ensure_ascii=False), event=event.kind)


ENDPOINTS = (
    Endpoint(
        "GET",
        "/api/runs/{run_id}/events",
        run_events,
        "A run's events as Server-Sent Events (Last-Event-ID resumes)",
        response="EventStream",
        query=(Param("after", {"type": "integer", "minimum": 0}, "Start after this event id."),),
        errors=(400, 404),
        stream=True,
    ),
)
