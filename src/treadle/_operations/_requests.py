"""The questions runs are waiting on, across runs: an approver's inbox.

``treadle requests`` and ``GET /api/requests`` list them; ``treadle run``,
``resume`` and ``respond`` describe those a run ends up waiting on. Each is
the ``<request>`` JSON of the HTTP API (:func:`~._schemas.describe_request`),
with the JSON schema its answer must fit.

A run's requests are in its latest checkpoint, which only its workflow can
read (payloads may be its own types), so listing them loads each run's
workflow: the one given, else the one the run records. A run whose workflow
does not load is left out of the listing and named in :attr:`Pending.unread`
rather than failing the whole listing.

Given an actor, the listing is that actor's inbox: only the requests the
one door would let it answer (:func:`~treadle._values._actors.answer_refusal`
with the request's approvers, its four eyes and the run's starter), so
nobody is shown a question only to be refused its answer; the others are
counted in :attr:`Pending.others`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._engine._result import RunStatus
from treadle._exceptions import RunNotFoundError, TreadleError
from treadle._operations._commands import workflow_of
from treadle._operations._schemas import answered_in_inbox, describe_request, describe_requests
from treadle._values._actors import answer_refusal
from treadle._workflow._rights import starter_of

if TYPE_CHECKING:
    from treadle._engine._result import RunResult
    from treadle._engine._waits import PendingRequest
    from treadle._stores._store import RunRecord, Store
    from treadle._values._actors import Actor
    from treadle._workflow._versions import Hosted
    from treadle._workflow._workflow import Workflow

ASKING = (RunStatus.AWAITING_INPUT.value,)
"""The statuses of runs that may have requests pending.

A run rests as ``awaiting_input`` while anything of it waits for an answer,
an approval or input, whatever else it waits for (a timer, a sub-workflow):
one resting as ``waiting`` asks nothing, and reading its checkpoint to find
so cost every listing a decode per run parked on a timer.
"""


@dataclass(slots=True)
class Pending:
    """Pending requests across runs, and the runs that could not be read.

    Attributes:
        requests: ``<request>`` dicts, the newest run's first, each run's
            in the order they were asked.
        unread: One line per run left out: its id and why it could not be read.
        others: How many pending requests were left out as not the actor's to answer.
    """

    requests: list[dict[str, Any]] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    others: int = 0


async def pending_requests(
    store: Store,
    *,
    workflow: str | None = None,
    limit: int | None = None,
    app: str | None = None,
    workflows: Hosted | None = None,
    actor: Actor | None = None,
) -> list[dict[str, Any]]:
    """The requests pending in runs that await input, then in runs that wait; newest run first.

    A request whose answer was delivered but not yet applied is answered: it
    is left out.

    Args:
        store: Where the runs are.
        workflow: Only runs of the workflow of this name.
        limit: At most this many requests.
        app: The app path of every run's workflow (else each run's recorded one).
        workflows: Loaded workflows (a server's ``--app``), used
            before anything is imported for a run.
        actor: Only the requests this actor may answer (``None``: all).
    """
    found = await scan_pending(
        store, workflow=workflow, limit=limit, app=app, workflows=workflows, actor=actor
    )
    return found.requests


async def scan_pending(
    store: Store,
    *,
    workflow: str | None = None,
    limit: int | None = None,
    app: str | None = None,
    workflows: Hosted | None = None,
    actor: Actor | None = None,
) -> Pending:
    """:func:`pending_requests`, and which runs could not be read (for the listing to say so)."""
    # Newest first; a listing with a limit stops once it has enough.
    runs: list[RunRecord] = []
    for status in ASKING:
        found = await store.list_runs(status=status, workflow=workflow)
        runs += sorted(found, key=lambda r: (r.updated_at, r.run_id), reverse=True)
    pending = Pending()
    for run in runs:
        if limit is not None and len(pending.requests) >= limit:
            break
        try:
            loaded = await workflow_for(store, run, app, workflows)
            waiting = await _open_requests(store, loaded, run.run_id)
        except TreadleError as error:
            pending.unread.append(f"{run.run_id}: {error}")
            continue
        if actor is not None:
            mine = [r for r in waiting if may_answer(actor, run, r)]
            pending.others += len(waiting) - len(mine)
            waiting = mine
        pending.requests.extend(describe_request(loaded, run.run_id, r) for r in waiting)
    if limit is not None:
        del pending.requests[limit:]
    return pending


_READS = 3
"""How many times a run's checkpoint and inbox are read while commits keep moving it on."""


async def _open_requests(store: Store, loaded: Workflow, run_id: str) -> list[PendingRequest]:
    """The requests a run's latest checkpoint asks that no answer in its inbox settles.

    The checkpoint and the inbox are two reads, and the commit that applies
    an answer (the request gone from the checkpoint, the answer from the
    inbox, at once) may come between them: the request would then look
    open, and the page's inbox count stay up after an answer. So where one
    looks open, the run's row says whether its checkpoint is still the one
    read; if not, both are read again (a few times at most: a run that keeps
    committing shows what it asked a moment ago).
    """
    waiting: list[PendingRequest] = []
    for _ in range(_READS):
        record = await store.load_checkpoint(run_id)
        asked = loaded.codec.decode(record, run_id=run_id).waits.pending_requests()
        if not asked:
            return []
        answered = await answered_in_inbox(store, run_id)
        waiting = [r for r in asked if r.request_id not in answered]
        if not waiting:
            return []
        try:
            if (await store.get_run(run_id)).checkpoint_id == record.info.checkpoint_id:
                return waiting
        except RunNotFoundError:
            return []  # deleted meanwhile: it asks nobody
    return waiting


def may_answer(actor: Actor, run: RunRecord, request: PendingRequest) -> bool:
    """Whether the door would take ``actor``'s answer to ``request`` (its inbox holds it)."""
    refusal = answer_refusal(
        actor, request.approvers, starter=starter_of(run), four_eyes=request.four_eyes
    )
    return refusal is None


async def requests_of(
    store: Store, result: RunResult, app: str | None = None, loaded: Workflow | None = None
) -> list[dict[str, Any]]:
    """The requests a run's result waits on, described (with their answer schemas).

    ``loaded``: the run's workflow, when the caller has it; else it is found
    as every command finds it. ``[]`` when it cannot be: the result stands
    without its schemas.
    """
    if not result.pending_requests:
        return []
    try:
        workflow = loaded or await workflow_of(store, result.run_id, app)
    except TreadleError:
        return []
    return await describe_requests(workflow, store, result.run_id, result.pending_requests)


async def workflow_for(
    store: Store, run: RunRecord, app: str | None, workflows: Hosted | None
) -> Workflow:
    """The workflow to read ``run`` with: the hosted one, unless ``app`` names where it lives."""
    hosted = workflows.get(run.workflow, run.version) if workflows is not None else None
    if app is None and hosted is not None:
        return hosted
    return await workflow_of(store, run.run_id, app)
