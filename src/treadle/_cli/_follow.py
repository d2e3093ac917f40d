"""Following a run's event log from the command line: ``watch`` and ``--follow``.

Every process that advances a run writes its events to the run's log in
the store, so this process can draw a run it does not run: one started by
another ``treadle run``, by a worker, by the server. Three ways:

* :func:`watch`: from the log's start (or ``after``), until the run ends or
  rests; Ctrl-C (or SIGTERM, SIGHUP, a closed output) stops watching and
  leaves the run alone.
* :func:`while_working`: while this process continues the run itself
  (``resume``, ``respond``, ``send`` with ``--follow`` on SQLite), the
  events it commits, until it is done.
* :func:`until_settled`: after this process handed the run to someone else
  (``start``, or an answer delivered for a worker on PostgreSQL), until
  the run next rests or ends.

:func:`continue_run` and :func:`follow_new` are what the commands call.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._cli._live import LiveView
from treadle._cli._stopping import Stop, stopping
from treadle._cli._views import out
from treadle._engine._result import RunStatus
from treadle._exceptions import TreadleError
from treadle._operations import _commands as commands
from treadle._operations._requests import requests_of
from treadle._operations._run_view import RunView, show_run
from treadle._workflow._following import (
    ENDED_STATUSES,
    POLL_INTERVAL,
    SETTLED_STATUSES,
    follow,
    logged_after,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._cli._flags import RunFlags
    from treadle._engine._result import RunResult
    from treadle._stores._store import EventLog, LoggedEvent, RunReads, RunRecord, Store
    from treadle._workflow._workflow import Workflow

T = TypeVar("T")
RUNNING = RunStatus.RUNNING.value


async def last_seq(store: EventLog, run_id: str) -> int:
    """The ``seq`` of the run's newest event (0: none yet): where following starts."""
    return await store.last_event_seq(run_id)


async def watch(
    store: Store,
    run_id: str,
    shown: Callable[[LoggedEvent], None],
    *,
    after: int = 0,
    poll: float = POLL_INTERVAL,
    until_end: bool = False,
    idle: Callable[[RunRecord], Awaitable[None]] | None = None,
) -> Stop | None:
    """Show the run's events until it ends or rests; what stopped watching first, if anything.

    Its live events (token deltas, progress: ``seq`` 0) come between the
    logged ones as they are raised, wherever the run runs.

    ``until_end``: follow it through its rests (awaiting input, waiting on a
    timer, paused) until it ends. ``idle``: see :func:`follow`.

    Ctrl-C, SIGTERM, SIGHUP or a closed output only stop this loop: the run
    is not this process's, and nothing is written to it.
    """

    async def consume() -> None:
        async for event in follow(
            store, run_id, after=after, poll=poll, stop_at_rest=not until_end, idle=idle, live=True
        ):
            shown(event)

    task = asyncio.create_task(consume())
    stopped: Stop | None = None

    def stop(why: Stop) -> None:
        nonlocal stopped
        stopped = why
        task.cancel()

    with stopping(stop):
        try:
            await task
        except asyncio.CancelledError:
            if stopped is None:
                raise  # cancelled from outside, not by a stop
    return stopped


def under_way(
    store: Store, run_id: str, drawer: LiveView, workflow: Workflow | None
) -> Callable[[RunRecord], Awaitable[None]]:
    """What :func:`watch` says between commits of a run driven elsewhere (its ``idle``).

    A superstep's events reach the log when it commits, so while one runs
    in another process its log is silent. What can be known meanwhile is
    drawn instead: the superstep under way (the one after the last
    committed, while an owner holds the run), since when, and, when the
    run's code is here (``workflow``), the executors it runs: those its
    last checkpoint holds messages for.
    """
    planned: dict[int, list[str] | None] = {}

    async def idle(run: RunRecord) -> None:
        if run.status != RUNNING or not run.owned(time.time()):
            return  # resting, or nobody advances it: nothing is under way
        if drawer.last_superstep > run.superstep:
            return  # the log is ahead of the row read before it: look again
        superstep = run.superstep + 1
        if superstep not in planned:
            planned[superstep] = await _planned(store, run_id, workflow)
        since = drawer.last_at if drawer.last_at is not None else run.updated_at
        drawer.superstep_running(superstep, planned[superstep], since)

    return idle


async def _planned(store: RunReads, run_id: str, workflow: Workflow | None) -> list[str] | None:
    """The executors the superstep after the last checkpoint runs, by rank (``None``: unknown)."""
    if workflow is None:
        return None
    try:
        restored = workflow.codec.decode(await store.load_checkpoint(run_id), run_id=run_id)
    except TreadleError:  # a checkpoint this code cannot read: say less
        return None
    rank = {executor_id: n for n, executor_id in enumerate(workflow.executor_ids)}
    waiting = [executor_id for executor_id, inbox in restored.pending.items() if inbox]
    return sorted(waiting, key=lambda executor_id: rank.get(executor_id, len(rank)))


async def while_working(
    store: Store, run_id: str, work: Awaitable[T], drawer: LiveView, *, after: int
) -> T:
    """``work`` (which advances the run here), drawing each event it commits as it commits.

    Ends when ``work`` does, with every event it committed drawn. If this is
    cancelled (Ctrl-C detaching), ``work`` is cancelled too and unwinds first.
    """
    task = asyncio.ensure_future(work)
    last = after
    try:
        while True:
            finished = task.done()  # before reading: what it committed is then in the log
            async for event in logged_after(store, run_id, last):
                drawer.draw(event)
                last = event.seq
            if finished:
                return task.result()
            await asyncio.wait({task}, timeout=POLL_INTERVAL)
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def until_settled(
    store: Store, run_id: str, drawer: LiveView, *, after: int, poll: float = POLL_INTERVAL
) -> RunRecord:
    """Draw the run's events after ``after`` until it comes to a new rest, or ends; its row then.

    The run may rest already (an answer was just delivered to it, for a
    worker to apply): it is followed until its log records it moving to a
    resting or ended status, or it is seen ended with every event drawn.
    """
    last, settled = after, False
    while True:
        run = await store.get_run(run_id)  # before the events: as follow() does
        async for event in logged_after(store, run_id, last):
            drawer.draw(event)
            last = event.seq
            settled = settled or (
                event.kind == "status_changed" and event.data.get("status") in SETTLED_STATUSES
            )
        if settled or run.status in ENDED_STATUSES:
            return await store.get_run(run_id)
        await asyncio.sleep(poll)


@dataclass(frozen=True, slots=True)
class Continued:
    """How ``resume``, ``respond`` or ``send`` left the run.

    Attributes:
        result: The run's state, when this process continued it.
        requests: Its pending requests, described (with answer schemas).
        view: With ``--follow``, the run as it settled after a worker
            applied what was delivered (on PostgreSQL).
    """

    result: RunResult | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    view: RunView | None = None


async def continue_run(
    store: Store,
    run_id: str,
    work: Callable[[Store], Awaitable[RunResult | None]],
    flags: RunFlags,
    app: str | None,
) -> Continued:
    """Continue a run through ``work``; with ``--follow``, draw its events as they commit.

    ``work`` returns the run's state, or ``None`` when it delivered to the
    run's inbox for a worker to apply: then, following, the run is followed
    until that worker brings it to rest or to its end.
    """
    if not flags.follow:
        result = await work(store)
    else:
        run_id = (await commands.get_run(store, run_id)).run_id
        after = await last_seq(store, run_id)
        with LiveView(out, quiet=flags.as_json) as drawer:
            result = await while_working(store, run_id, work(store), drawer, after=after)
            if result is None:
                await until_settled(store, run_id, drawer, after=drawer.last_seq or after)
        if result is None:
            return Continued(view=await show_run(store, run_id, app))
    if result is None:
        return Continued()
    return Continued(result=result, requests=await requests_of(store, result, app))


async def follow_new(store: Store, run_id: str, *, quiet: bool, app: str | None = None) -> RunView:
    """A run just queued (``treadle start --follow``), drawn from its first event to its rest."""
    with LiveView(out, quiet=quiet) as drawer:
        await until_settled(store, run_id, drawer, after=0)
    return await show_run(store, run_id, app)
