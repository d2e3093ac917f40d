"""What a run's event log says of it, for when its code does not load here.

``treadle show`` and ``Client.result`` read a run's outputs, state and
pending requests from its latest checkpoint, which only the run's workflow
can decode. A run started elsewhere (a worker on PostgreSQL, another
machine's app) may have no importable code here, yet its log holds its
outputs and requests as plain data: enough to see what it produced and
what it asks, and to answer it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._engine._waits import PendingRequest

if TYPE_CHECKING:
    from treadle._stores._store import RunRecord, Store

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
    for event in events:
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
