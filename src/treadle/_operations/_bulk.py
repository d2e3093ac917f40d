"""Bulk actions: cancel, pause, unpause, resume, answer or delete every run a filter keeps.

After an incident, cancelling or resuming 500 runs must not be a shell loop.
A bulk action is one frozen :class:`BulkAction` (what, which runs, how
fast, a dry run or not) taken by one actor, run the same way from every door
(``treadle bulk``, ``POST /api/bulk``):

1. The actor's right to the action is checked before anything is read
   (an answer's right is its request's, checked per run by the door).
2. The runs the filter keeps *now* are listed from the index, newest first.
   A dry run stops here and counts them: exactly the runs a real action
   would then try.
3. Each listed run is read again just before it is acted on; one that no
   longer passes the filter (its status or fields moved on, or it is gone)
   is reported as skipped, never acted on. The action itself goes through
   the one door (:mod:`treadle._workflow._actions`): its right, its decision
   in the store, its record with the actor in the run's log and the audit
   log; a refusal there (the run ended in between) is reported too.
4. ``rate`` paces the actions (at most that many runs a second), so a bulk
   action does not crowd out the workers; they start in the listed order,
   at most :data:`IN_FLIGHT` at a time, and are reported in that order.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._exceptions import AppLoadError, CommandError, RunNotFoundError, TreadleError
from treadle._operations._commands import workflow_of as stored_workflow
from treadle._operations._search import matching_ids
from treadle._values._filter_match import matches
from treadle._workflow import _actions as door
from treadle._workflow._logged import logged_outputs_and_requests
from treadle._workflow._rights import check_right

LONGEST_BULK = 900.0
"""The most seconds a bulk action may take at its ``rate``: its caller waits that long."""

NO_ANSWER: Any = object()
"""What a ``BulkAction`` holds until an answer is given (JSON ``null`` is one)."""

if TYPE_CHECKING:
    from collections.abc import Callable

    from treadle._operations._search import SearchableStore
    from treadle._stores._store import RunReads, RunRecord, Store
    from treadle._values._actors import Actor
    from treadle._values._filter import RunFilter
    from treadle._workflow._workflow import Workflow

ACTIONS = ("cancel", "pause", "unpause", "resume", "respond", "delete")
"""What a bulk action may do to each run."""

_RIGHTS = MappingProxyType({"respond": None, "resume": "resume"})

IN_FLIGHT = 8
"""How many runs a bulk action acts on at once (each its own transactions), started in order."""


@dataclass(frozen=True, slots=True)
class BulkAction:
    """One bulk action, as asked: checked where it is made.

    Attributes:
        action: One of :data:`ACTIONS`.
        where: The filter that picks the runs.
        dry_run: Only count the runs it would act on.
        rate: At most this many runs a second (``None``: as fast as the store goes).
        executor: For ``respond``: the executor whose pending request is answered.
        answer: For ``respond``: the answer (plain JSON), the same for every run;
            it must be given (JSON ``null`` is an answer, nothing is not).
        confirmed: The runs a person agreed to (the ones its dry run listed),
            or ``None``: then it acts on what the filter keeps when it acts.
            A run the filter keeps by then but the person was not shown is
            skipped, named, never acted on.
    """

    action: str
    where: RunFilter
    dry_run: bool = False
    rate: float | None = None
    executor: str | None = None
    answer: Any = NO_ANSWER
    confirmed: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            msg = f"a bulk action is one of {', '.join(ACTIONS)}, got {self.action!r}"
            raise ValueError(msg)
        if self.rate is not None and not self.rate > 0:
            msg = f"a bulk action's rate is a number of runs a second above 0, got {self.rate!r}"
            raise ValueError(msg)
        if (self.action == "respond") != (self.executor is not None):
            msg = "respond needs the executor whose request it answers, and only respond takes one"
            raise ValueError(msg)
        if (self.action == "respond") == (self.answer is NO_ANSWER):
            # A person's decision is never taken by a default value.
            msg = "respond needs the answer it gives, and only respond takes one"
            raise ValueError(msg)


@dataclass(slots=True)
class BulkReport:
    """What a bulk action did.

    Attributes:
        action: The action.
        matched: How many runs the filter kept when they were listed.
        acted: The runs acted on, in order (empty for a dry run).
        skipped: The runs not acted on, each with why: it no longer passed
            the filter, or the door refused the action (it ended meanwhile...).
        dry_run: Whether nothing was done.
        listed: For a dry run, the runs a real action would try, in order
            (what a person confirms: ``BulkAction.confirmed``).
    """

    action: str
    matched: int
    dry_run: bool
    acted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    listed: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The report as the API and ``--json`` give it."""
        return {
            "action": self.action,
            "dry_run": self.dry_run,
            "matched": self.matched,
            "acted": len(self.acted),
            "skipped": [{"run_id": run_id, "reason": why} for run_id, why in self.skipped],
        }


async def run_bulk(
    store: Store,
    bulk: BulkAction,
    *,
    actor: Actor,
    workflow_of: Callable[[RunRecord], Workflow | None] | None = None,
) -> BulkReport:
    """Take ``bulk`` as ``actor`` (see the module docstring); return what was done.

    ``workflow_of``: the code each run goes on with (a server's), so that
    an answer is checked against its request's type before it is kept, as
    one given to that run alone is; a run whose code it lacks (``None``)
    is skipped, named.
    Without (a command line with no workflow code), answers are checked
    where the run is applied.

    Raises:
        ActionRefusedError: the actor's role does not allow the action (nothing was done).
    """
    searched: SearchableStore = store  # type: ignore[assignment]
    right = _RIGHTS.get(bulk.action, bulk.action)
    if right is not None:
        check_right(actor, right, None)
    listed = await matching_ids(searched, bulk.where)
    if bulk.rate is not None and (len(listed) - 1) / bulk.rate > LONGEST_BULK:
        msg = (
            f"rate: {len(listed)} runs at {bulk.rate:g} a second would take "
            f"{(len(listed) - 1) / bulk.rate:,.0f} s, more than the {LONGEST_BULK:,.0f} an "
            f"action may: raise the rate, or narrow the filter"
        )
        raise CommandError(msg)
    report = BulkReport(bulk.action, len(listed), bulk.dry_run)
    if bulk.dry_run:
        report.listed = listed
        return report
    outcomes: list[str | None] = [None] * len(listed)  # why each was skipped; None: acted on
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def one(index: int, run_id: str) -> None:
        try:
            if bulk.confirmed is not None and run_id not in bulk.confirmed:
                why: str | None = f"not among the {len(bulk.confirmed)} runs confirmed"
            else:
                why = await _still_matching(store, searched, bulk, run_id)
            if why is None:
                try:
                    await _act(store, bulk, run_id, actor, workflow_of)
                except TreadleError as refused:
                    why = f"refused: {refused}"
            outcomes[index] = why
        finally:
            slots.release()

    started = time.monotonic()
    async with asyncio.TaskGroup() as group:
        for index, run_id in enumerate(listed):
            if bulk.rate is not None:
                await asyncio.sleep(max(0.0, started + index / bulk.rate - time.monotonic()))
            await slots.acquire()
            group.create_task(one(index, run_id))
    for run_id, why in zip(listed, outcomes, strict=True):
        if why is None:
            report.acted.append(run_id)
        else:
            report.skipped.append((run_id, why))
    return report


async def _still_matching(
    store: RunReads, searched: SearchableStore, bulk: BulkAction, run_id: str
) -> str | None:
    """Why the run is not to be acted on now (``None``: it still passes the filter).

    A run the action would not change (pausing a paused run, or one whose
    owner was asked to pause it already) is not acted on either: nothing
    would be done, so nothing is said to be.
    """
    try:
        run = await store.get_run(run_id)
    except RunNotFoundError:
        return "gone: deleted since it was listed"
    fields = await searched.run_fields(run_id)
    columns = {
        "status": run.status,
        "outcome": run.outcome,
        "workflow": run.workflow,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }
    if not matches(bulk.where.tree, columns, fields):
        return f"changed: no longer passes the filter (now {run.status})"
    if bulk.action == "pause" and run.status == "paused":
        return "unchanged: it is paused already"
    if bulk.action == "pause" and run.pause_requested is not None and run.owned(time.time()):
        return "unchanged: its pause was asked already"  # its owner pauses it at its barrier
    return None


async def _act(
    store: Store,
    bulk: BulkAction,
    run_id: str,
    actor: Actor,
    workflow_of: Callable[[RunRecord], Workflow | None] | None,
) -> None:
    """One run's action, through the one door."""
    match bulk.action:
        case "cancel":
            await door.cancel(store, run_id, actor=actor)
        case "pause":
            await door.pause(store, run_id, actor=actor)
        case "unpause":
            await door.unpause(store, run_id, actor=actor)
        case "resume":
            await door.hand_back(store, run_id, actor=actor)
        case "delete":
            await door.delete(store, run_id, actor=actor)
        case "respond":
            await _answer(store, bulk, run_id, actor, workflow_of)


async def _answer(
    store: Store,
    bulk: BulkAction,
    run_id: str,
    actor: Actor,
    workflow_of: Callable[[RunRecord], Workflow | None] | None,
) -> None:
    """Answer the run's pending request from ``bulk.executor`` (found in its log)."""
    run = await store.get_run(run_id)
    if workflow_of is None:  # the command line's: the run's own code, from where it records
        try:
            workflow = await stored_workflow(store, run_id, None)
        except (AppLoadError, CommandError) as error:
            msg = f"its workflow does not load here to check the answer ({error})"
            raise CommandError(msg) from None
    else:
        found = workflow_of(run)
        if found is None:
            msg = (
                f"version {run.version} of {run.workflow!r} is not served here to check the answer"
            )
            raise CommandError(msg)
        workflow = found
    _, pending = await logged_outputs_and_requests(store, run)
    asked = [request for request in pending if request.executor_id == bulk.executor]
    if len(asked) != 1:
        msg = f"{len(asked)} pending requests from executor {bulk.executor!r}, not one"
        raise CommandError(msg)
    # Checked as one respond checks it: the request waits, the answer has its type.
    await door.answer(
        store, run_id, {asked[0].request_id: bulk.answer}, actor=actor, workflow=workflow
    )
