"""How a ``treadle`` command runs: one event loop, errors as exit codes, a stop as detach.

Every ``treadle`` command hands its work to :func:`execute`
(or :func:`execute_sync`), so that errors read and exit the same way
everywhere: one line on stderr and the exit codes documented in
:mod:`treadle._cli._exits`. Commands that advance a run (``run``, ``resume``,
``respond``, ``send``) also get the handling of a stop here (Ctrl-C,
SIGTERM, SIGHUP, a closed output: :mod:`treadle._cli._stopping`): it
*detaches* from the run, which stays resumable, rather than cancelling it,
since only ``treadle cancel`` should ever cancel; commands that follow a
run stop following and leave it alone.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

from treadle._checkpoints._leases import LeaseKeeper
from treadle._cli._stopping import CLOSED_OUTPUT, Stop, stopping
from treadle._engine._errors import RunCancelledError, WorkflowRunError
from treadle._engine._result import RunStatus
from treadle._exceptions import SerializationError, TreadleError
from treadle._operations._inputs import opened_store
from treadle._tasks import group_leaves

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._stores._store import RunReads, RunRecord, Store

T = TypeVar("T")

EXIT_REFUSED = 2
"""Bad input: the command refused and changed nothing."""

EXIT_INTERRUPTED = 130
"""Ctrl-C: the command detached from its run (128 + SIGINT, as shells report it)."""


def execute(
    store_url: str | None,
    work: Callable[[Store], Awaitable[T]],
    *,
    drives: str | bool = False,
    lease: float | None = None,
    creates: bool = False,
    follows: bool = False,
    connections: int | None = None,
) -> T:
    """Run one command against the store, turning errors into one line and an exit code.

    Args:
        store_url: ``--store``.
        work: The command, given the opened store.
        drives: For commands that advance a run (``True``, or the id of the
            run they name): Ctrl-C detaches from the runs this process owns
            instead of cancelling them, says so and exits with 130; so do
            SIGTERM (143), SIGHUP (129) and a closed output (141).
        lease: The store's lease in seconds (``None``: ``TREADLE_LEASE`` or 30).
        creates: The command may create the store (it starts runs); every
            other command refuses a SQLite file that does not exist.
        follows: For commands that follow a run they do not drive: Ctrl-C,
            SIGTERM, SIGHUP or a closed output stops following, leaves the
            run alone, and exits with 128 plus the signal's number.
        connections: A PostgreSQL store's pool size (``None``:
            ``TREADLE_CONNECTIONS`` or 10).
    """

    async def main() -> T:
        store = await opened_store(store_url, lease=lease, create=creates, connections=connections)
        try:
            if drives is not False:
                return await _detach_on_interrupt(store, work, drives)
            if follows:
                return await _stop_following(work(store))
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except Detached as detached:
        say(escape(str(detached)))
        raise typer.Exit(detached.stop.exit_code) from None
    except Interrupted as interrupted:
        if interrupted.stop is not CLOSED_OUTPUT:  # a reader that went away wants no more
            say(f"interrupted by {interrupted.stop.cause}: stopped; nothing was changed")
        raise typer.Exit(interrupted.stop.exit_code) from None
    except KeyboardInterrupt:  # a second Ctrl-C while detaching (or one before it could)
        say("interrupted: stopped at once; nothing was cancelled")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except WorkflowRunError as error:
        say(f"[red]run failed:[/red] {escape(str(error))}")
        raise typer.Exit(1) from None
    except SerializationError as error:
        if drives is False:
            refuse(escape(str(error)))
        # Driving a run, it is the run's checkpoint that could not be written: the run failed.
        say(f"[red]run failed:[/red] {escape(str(error))}")
        raise typer.Exit(1) from None
    except RunCancelledError as error:
        if drives is False:  # e.g. fork: a refusal, as any other
            refuse(escape(str(error)))
        say(f"[yellow]cancelled:[/yellow] {escape(str(error))}")  # the run's outcome
        raise typer.Exit(1) from None
    except TreadleError as error:
        refuse(escape(str(error)))
    except BaseExceptionGroup as group:  # a refusal raised inside a task group (a worker's)
        refusal = _only_refusal(group)
        if refusal is None:
            raise
        refuse(escape(str(refusal)))


def _only_refusal(group: BaseExceptionGroup[BaseException]) -> TreadleError | None:
    """The first of ``group``'s errors if they are all treadle's own (a refusal), else ``None``."""
    leaves = group_leaves(group)
    if leaves and all(isinstance(e, TreadleError) for e in leaves):
        first = leaves[0]
        assert isinstance(first, TreadleError)  # noqa: S101 - checked above
        return first
    return None


def execute_sync(work: Callable[[], T]) -> T:
    """Run a synchronous step of a command, with the same error handling."""
    try:
        return work()
    except TreadleError as error:
        refuse(escape(str(error)))


def say(markup: str) -> None:
    """``markup`` (rich markup) as one line on stderr.

    The views, and rich, are imported only when a command has something to
    say this way: a worker serving without a hitch never loads them (they
    were a tenth of its start-up).
    """
    from treadle._cli._views import err  # noqa: PLC0415 - see above

    err.print(markup)


def escape(text: str) -> str:
    """``text`` shown as it is in rich markup (rich imported only now: see :func:`say`)."""
    from rich.markup import escape as escaped  # noqa: PLC0415 - see say()

    return escaped(text)


def refuse(message: str) -> NoReturn:
    """Refuse the command: ``message`` (rich markup) as one line on stderr, and exit with 2."""
    say(f"[red]error:[/red] {message}")
    raise typer.Exit(EXIT_REFUSED)


class Detached(Exception):  # noqa: N818 - an outcome, not a failure
    """A stop detached the command from its run; the message says where the run stands.

    Args:
        message: Where each run detached from stands, and how to continue it.
        stop: What stopped the command (its exit code is the command's).
    """

    def __init__(self, message: str, stop: Stop) -> None:
        super().__init__(message)
        self.stop = stop


class Interrupted(Exception):  # noqa: N818 - an outcome, not a failure
    """A stop ended a command that drives no run (it follows one): nothing was changed."""

    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.cause)
        self.stop = stop


async def _stop_following(work: Awaitable[T]) -> T:
    """``work``, cancelled by the first Ctrl-C, SIGTERM, SIGHUP or closed output.

    Raises:
        Interrupted: A stop came before the work finished.
    """
    task = asyncio.ensure_future(work)
    stopped: Stop | None = None

    def on_stop(stop: Stop) -> None:
        nonlocal stopped
        stopped = stop
        task.cancel()

    with stopping(on_stop):
        try:
            return await task
        except asyncio.CancelledError:
            if stopped is None:
                raise
    raise Interrupted(stopped)


async def _detach_on_interrupt(
    store: Store, work: Callable[[Store], Awaitable[T]], named: str | bool
) -> T:
    """``work``, with a stop detaching from the runs this process owns rather than cancelling.

    A stop is Ctrl-C, SIGTERM, SIGHUP or the output closing (``| head -1``):
    the first detaches every run the command drives (their writes are refused
    from then on, so nothing, not even ``cancelled``, is recorded) and
    cancels the work; each run's task unwinds and gives its lease up, so
    ``resume`` or a worker can take it over at once. A second Ctrl-C stops
    at once (the lease then runs out by itself).

    Raises:
        Detached: A stop came before the work finished.
    """
    async with asyncio.TaskGroup() as group:
        leases = LeaseKeeper(group)
        try:
            with leases.driving():  # the task, and the runs it opens, are the command's
                task = asyncio.ensure_future(work(store))
            stopped, detached = await _until_done_or_stopped(task, leases)
        finally:
            await leases.close()
    if stopped is None:  # out of the task group, which would wrap its error in a group
        return task.result()
    rows = [await _row_or_none(store, run_id) for run_id in detached]
    if not detached and isinstance(named, str):  # it let go of the run before the stop came
        row = await _row_or_none(store, named)
        if row is not None and RunStatus(row.status).is_stopped:
            detached, rows = [named], [row]
    raise Detached(_detached_message(detached, rows, named), stopped)


async def _until_done_or_stopped(
    task: asyncio.Future[T], leases: LeaseKeeper
) -> tuple[Stop | None, list[str]]:
    """Await ``task``; a stop detaches the runs ``leases`` holds and cancels it.

    Returns what stopped it (``None``: it finished, maybe failing: its
    result says, once out of the task group) and the runs detached.
    """
    stopped: Stop | None = None
    detached: list[str] = []

    def on_stop(stop: Stop) -> None:
        nonlocal stopped, detached
        stopped = stop
        detached = leases.detach(f"detached by {stop.cause}: the run stays as last committed")
        task.cancel()

    with stopping(on_stop):
        try:
            await task
        except BaseException:
            if stopped is None and not task.done():
                raise  # the command itself was cancelled
            # Its error (raised by its result), the cancellation, or a write
            # refused while unwinding: the runs stay as committed.
    return stopped, detached


async def _row_or_none(store: RunReads, run_id: str) -> RunRecord | None:
    try:
        return await store.get_run(run_id)
    except TreadleError:  # never stored (interrupted while being created), or the store failed
        return None


def _detached_message(run_ids: list[str], rows: list[RunRecord | None], named: str | bool) -> str:
    lines = []
    for run_id, row in zip(run_ids, rows, strict=True):
        if row is None:
            lines.append(f"interrupted before run {run_id} was stored; nothing was started")
        elif RunStatus(row.status).is_stopped:
            lines.append(f"run {run_id} is {row.status}; treadle show {run_id} to look at it")
        else:
            lines.append(
                f"detached from run {run_id} at superstep {row.superstep} (its last checkpoint); "
                f"it stays resumable: treadle resume {run_id} "
                f"(or let `treadle worker` take it over); treadle show {run_id} to look at it"
            )
    if lines:
        return "\n".join(lines)
    if isinstance(named, str):
        return (
            f"interrupted before this command took run {named} over; nothing was cancelled: "
            f"treadle show {named} to look at it"
        )
    return "interrupted before a run was started; nothing was stored"
