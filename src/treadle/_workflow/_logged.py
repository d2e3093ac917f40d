"""What a run's event log says of it, for when its code does not load here.

``treadle show`` and ``Client.result`` read a run's outputs, state and
pending requests from its latest checkpoint, which only the run's workflow
can decode. A run started elsewhere (a worker on PostgreSQL, another
machine's app) may have no importable code here, yet its log holds its
outputs and requests as plain data: enough to see what it produced and
what it asks, and to answer it: who may answer a request, and who did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._engine._waits import PendingRequest
from treadle._exceptions import RequestAlreadyAnsweredError, RunNotFoundError, UnknownRequestError

if TYPE_CHECKING:
    from treadle._stores._events import LoggedEvent
    from treadle._stores._store import EventLog, RunRecord, Store

_ASKING = ("awaiting_input", "waiting", "paused")


async def logged_outputs_and_requests(
    store: Store, run: RunRecord
) -> tuple[list[Any], list[PendingRequest]]:
    """The outputs the run's log holds, and its requests no answer was kept for.

    A request is pending when the run rests and the store kept no answer to
    it (the store decides answers: see ``Store.answer_of``). Its deadline is
    not in the log: ``deadline_at`` is ``None``.
    """
    events = await store.read_events(run.run_id)
    outputs = [event.data.get("value") for event in events if event.kind == "output"]
    pending: list[PendingRequest] = []
    if run.status not in _ASKING:
        return outputs, pending
    for event in [*await _inherited(store, run), *events]:
        if event.kind != "request":
            continue
        request_id = event.data.get("request_id")
        if not isinstance(request_id, str) or any(p.request_id == request_id for p in pending):
            continue
        if await store.answer_of(run.run_id, request_id) is None:
            pending.append(
                PendingRequest(
                    request_id,
                    event.executor_id or "",
                    event.data.get("payload"),
                    event.data.get("response_type"),
                    approvers=tuple(str(a) for a in event.data.get("approvers") or ()),
                    four_eyes=bool(event.data.get("four_eyes")),
                )
            )
    return outputs, pending


async def _inherited(store: Store, run: RunRecord) -> list[LoggedEvent]:
    """The ``request`` events a fork's first checkpoint waits on, from its ancestors' logs.

    A fork's log starts with ``run_forked``; what its checkpoint waits on was
    asked in its parent's log (or further up), and still open at the
    checkpoint it was forked at: asked before that checkpoint's
    ``checkpoint_saved``, and not answered or timed out before it. A parent
    whose log says nothing of that checkpoint (no log kept) gives none.
    """
    if run.parent_run_id is None or run.parent_checkpoint_id is None:
        return []
    try:
        parent = await store.get_run(run.parent_run_id)
    except RunNotFoundError:
        return []
    events = await store.read_events(parent.run_id)
    cut = next(
        (
            at
            for at, event in enumerate(events)
            if event.kind == "checkpoint_saved"
            and event.data.get("checkpoint_id") == run.parent_checkpoint_id
        ),
        None,
    )
    if cut is None:
        return []
    before = [*await _inherited(store, parent), *events[: cut + 1]]
    settled = {
        event.data.get("request_id")
        for event in before
        if event.kind in ("request_answered", "request_timed_out")
    }
    return [e for e in before if e.kind == "request" and e.data.get("request_id") not in settled]


async def named_winner(
    store: EventLog, refused: RequestAlreadyAnsweredError
) -> RequestAlreadyAnsweredError:
    """``refused``, naming who sent the answer that won, as the run's log records it.

    The winner's ``request_answered`` was written in the transaction that
    kept its answer, so it is there whenever the store refuses another.
    """
    for event in reversed(await store.read_events(refused.run_id)):
        if event.kind == "request_answered" and event.data.get("request_id") == refused.request_id:
            actor = event.data.get("actor") or {}
            by = f"{actor.get('label', '?')} ({actor.get('door', '?')})"
            return RequestAlreadyAnsweredError(
                refused.run_id,
                refused.request_id,
                refused.answer,
                refused.answered_at,
                answered_by=by,
            )
    return refused


async def logged_rules(
    store: Store, run: RunRecord, request_id: str
) -> tuple[tuple[str, ...], bool]:
    """A request's rules from its ``request`` event (no workflow code here).

    Read from the run's log, else from the log of the run it was forked
    from (and so on up): a fork's log starts with ``run_forked``, and the
    requests its checkpoint inherits were asked in its parent's. A request
    no log shows asked has no rules to read: it is refused rather than
    left to anyone.

    Raises:
        UnknownRequestError: No log of the run or its ancestors asked it.
    """
    asked = await asked_event(store, run, request_id)
    if asked is None:
        msg = f"run {run.run_id!r} never asked {request_id!r}"
        raise UnknownRequestError(msg)
    return tuple(str(a) for a in asked.get("approvers") or ()), bool(asked.get("four_eyes"))


async def asked_event(store: Store, run: RunRecord, request_id: str) -> dict[str, Any] | None:
    """The data of the ``request`` event asking ``request_id`` (``None``: none did).

    The run's own log's last, else (a fork) the one it inherited: asked in an
    ancestor's log and still open where it was forked (:func:`_inherited`).
    """
    for event in reversed([*await _inherited(store, run), *await store.read_events(run.run_id)]):
        if event.kind == "request" and event.data.get("request_id") == request_id:
            return dict(event.data)
    return None
