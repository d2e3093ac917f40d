"""The commands layer: what the CLI (and later the client and HTTP API) can do.

Each command that changes a run takes the ``actor`` acting (the CLI's
``cli:USER@HOST``, the server's signed-in principal) and goes through the
one door (:mod:`treadle._workflow._actions`), which checks its right and
has the store record it with the action.

Every operation is a coroutine over a store that returns plain data; the
typer app only parses arguments and prints. Nothing here prints or exits.
Errors are :class:`CommandError` (bad input: unknown run, malformed JSON, an
import path that does not load) or the runtime's own ``TreadleError``s.
What the command line gives (a store URL, an app path, JSON) is turned into
a store, a workflow and values by :mod:`treadle._operations._inputs`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from treadle._checkpoints._graph_description import decode_description
from treadle._checkpoints._ownership import owner_is_dead
from treadle._exceptions import CommandError, RunBusyError, SessionBusyError
from treadle._graph._input_policy import InputPolicy
from treadle._operations._inputs import load_version, parse_json, versions_beside
from treadle._operations._run_names import runs_named, several
from treadle._operations._shapes import iso_time
from treadle._operations._starting import NO_CHOICE, StartChoice
from treadle._values._actors import Actor
from treadle._workflow import _actions as door
from treadle._workflow._history import fork_on_its_version
from treadle._workflow._start_policy import NO_START_POLICY

if TYPE_CHECKING:
    from treadle._engine._options import RunOptions
    from treadle._engine._result import RunResult
    from treadle._scaleout._client import Client
    from treadle._stores._pausing import PauseOutcome
    from treadle._stores._store import CheckpointInfo, RunReads, RunRecord, Store
    from treadle._workflow._workflow import Workflow


QUEUED = "run '{run_id}' is queued: no worker has taken it up yet"
"""What a command says of a run no worker has started (nothing committed to read)."""


def uncommitted(run: RunRecord) -> str:
    """What is said of a run with nothing committed to read: queued, or ended before its start.

    A run queued by ``treadle start`` waits for a worker; one a worker took
    up and failed (its input did not fit) or one cancelled in line never
    committed a superstep, and is not said to be queued.
    """
    if run.status in ("pending", "queued"):
        return QUEUED.format(run_id=run.run_id)
    return (
        f"run '{run.run_id}' {run.status} before its first checkpoint: "
        f"it has no state or requests to read"
    )


async def workflow_of(store: RunReads, run_id: str, app: str | None) -> Workflow:
    """The workflow that wrote a run: ``app`` if given, else the run's stored origin.

    Of the version the run goes on with, when the module holds it.
    """
    row = await store.get_run(run_id)
    return load_version(await _spec_of(store, row, app), row.workflow, row.version)


async def _spec_of(store: RunReads, row: RunRecord, app: str | None) -> str:
    """Where a run's workflow is found: ``app`` if given, else the run's stored origin."""
    if app is not None:
        return app
    run_id = row.run_id
    stored = await store.get_graph(run_id)
    if not stored:  # queued by `treadle start`: no worker has stored its graph yet
        raise CommandError(uncommitted(row))
    origin = decode_description(run_id, stored).get("origin")
    if not origin:
        msg = (
            f"run {run_id!r} does not record where its workflow lives "
            f"(it was started from Python); pass --app pkg.module:workflow"
        )
        raise CommandError(msg)
    return str(origin)


async def get_run(store: Store, run_id: str) -> RunRecord:
    """The run a command names: by its id, or by a prefix of it that names one run.

    Ids are long and cut short in a narrow terminal, so any prefix that
    picks out one run will do (``RunRecord.run_id`` is its full id); but
    not the whole id of a run that is gone (its audit entries say so),
    which is refused rather than taken as the prefix of another.

    Raises:
        CommandError: No run has that id or prefix (naming the store), or
            several share the prefix (listing them).
    """
    named = await runs_named(store, run_id)
    if named is None:
        # A run's own id, the run gone: never taken as the prefix of another's id (a
        # delete racing another for it would delete a run nobody named).
        msg = f"run {run_id!r} is no longer in {store_label(store)} (treadle audit {run_id})"
        raise CommandError(msg)
    if not isinstance(named, list):
        return named
    if len(named) == 1:
        return named[0]
    if not named:
        raise CommandError(f"no run {run_id!r} in {store_label(store)} (treadle runs lists them)")
    raise CommandError(several(run_id, named))


def store_label(store: Store) -> str:
    """The store, as an error names it: a SQLite file's full path, else its repr (no password)."""
    path = getattr(store, "path", None)
    return repr(str(Path(path).resolve())) if isinstance(path, str) else repr(store)


def is_orphaned(run: RunRecord, now: float | None = None) -> bool:
    """Whether the run was left mid-run: ``running`` with nobody advancing it.

    That is :meth:`RunRecord.orphaned` (no current lease), or an owner on
    this host whose process is gone although its lease has not run out yet
    (``treadle resume`` takes such a run over at once, too).
    """
    if run.orphaned(time.time() if now is None else now):
        return True
    return run.status == "running" and run.owner is not None and owner_is_dead(run.owner)


def is_unstarted_fork(run: RunRecord) -> bool:
    """Whether the run is a fork nobody has taken up yet (not a run whose process died).

    Made ``running`` at the checkpoint it branched from and left for a
    ``resume`` (or a worker) to take up: no owner, and never moved on since.
    """
    return run.parent_run_id is not None and run.owner is None and run.updated_at == run.created_at


def _busy(error: RunBusyError) -> CommandError:
    """The one line a busy run gets on the command line (it names ``--wait``)."""
    until = iso_time(error.lease_until, timespec="seconds")
    msg = (
        f"run {error.run_id!r} is owned by {error.owner} (lease until {until}); "
        f"nothing was changed: add --wait to wait for it, or try again later"
    )
    return CommandError(msg)


async def history(
    store: Store, run_id: str
) -> tuple[RunRecord, list[CheckpointInfo], list[RunRecord]]:
    """A run's row, its checkpoints (oldest first) and its forks."""
    run = await get_run(store, run_id)
    forks = await store.list_runs(parent_run_id=run.run_id)
    return run, await store.list_checkpoints(run.run_id), forks


async def resume(
    store: Store,
    run_id: str,
    checkpoint_id: str | None,
    app: str | None,
    *,
    wait: bool = False,
    options: RunOptions | None = None,
    superstep: int | None = None,
    actor: Actor | None = None,
) -> RunResult:
    """Continue a stored run; with ``wait``, once its current owner lets go of it.

    Raises:
        CommandError: No such run, or (without ``wait``) another process owns it.
    """
    run_id = (await get_run(store, run_id)).run_id  # given a prefix, its run's full id
    workflow = await workflow_of(store, run_id, app)
    checkpoint_id = await resolve_checkpoint(store, run_id, checkpoint_id, superstep)
    try:
        return await workflow.resume(
            run_id, checkpoint_id, store=store, wait=wait, options=options, actor=_who(actor)
        )
    except RunBusyError as error:
        raise _busy(error) from None


def served_by_workers(store: Store) -> bool:
    """Whether ``treadle worker`` processes run this store's runs (PostgreSQL), not this one.

    Then commands that would continue a run here deliver to its inbox
    instead, so a run is only ever driven under a worker's lease.
    """
    postgres = sys.modules.get("treadle._stores._postgres")
    return postgres is not None and isinstance(store, postgres.PostgresStore)


def client_of(store: Store, actor: Actor | None = None) -> Client:
    """A client over the store (PostgreSQL) of this command, acting as ``actor`` (the CLI's)."""
    from treadle._scaleout._client import Client  # noqa: PLC0415 - PostgreSQL commands only

    return Client(store, actor=_who(actor))  # type: ignore[arg-type]


def _who(actor: Actor | None) -> Actor:
    """The actor of a command: the one given (a server's principal), else the CLI's user."""
    return actor if actor is not None else Actor.cli()


async def start(
    store: Store,
    workflow: str,
    raw_input: str,
    run_id: str | None,
    *,
    actor: Actor | None = None,
    policy: StartChoice = NO_CHOICE,
) -> str:
    """Queue a run for the workers; return its id (idempotent with ``run_id``).

    ``policy``: the start policy it asks for; without the workflow's code
    here, a policy with a key needs the key given (``--key``).
    """
    if not served_by_workers(store):
        msg = "treadle start queues runs for workers on PostgreSQL; on SQLite use treadle run"
        raise CommandError(msg)
    client = client_of(store, actor)
    value = parse_json(raw_input, "input")
    chosen = policy.policy(NO_START_POLICY)
    try:
        return await client.start(
            workflow, value, run_id=run_id, start_policy=chosen, deduplication_id=policy.dedup_id
        )
    except ValueError as error:  # the key could not be computed
        raise CommandError(str(error)) from None


# How many of the store's newest runs `treadle start` reads for another run of the name it
# started. treadle_runs has no index on workflow (one would cost every run's write), so asking
# the store for the name's runs reads all of its runs when the name has no other: the very typo
# the note is for, in time that grows with the store. The newest runs come in order from the
# index on created_at, and a name in use has had a run among its newest 10,000.
NEWEST_RUNS_READ = 10_000
# Runs per read, the first page small: a name in use is mostly found among the newest few,
# and a page is decoded whole (10,000 runs cost about 0.1 s, more than a scan by PostgreSQL
# of 300,000). Each page after is ten times the one before, up to the last.
_RUNS_PAGE = 100


async def alone_of_its_workflow(store: Store, workflow: str, run_id: str) -> int | None:
    """How many of the store's newest runs were read, none of them another run of ``workflow``.

    ``None`` when one of them is. A run queued by name waits for a worker
    that serves the name: the first of its name may be the first of a new
    workflow, or a typo that nothing will ever serve. ``treadle start``
    then says so rather than leave it to wait unremarked. It reads at most
    :data:`NEWEST_RUNS_READ` runs, newest first (fewer: the whole store),
    so the note is bounded in time however big the store.
    """
    read = 0
    page_size = _RUNS_PAGE
    before: tuple[float, str] | None = None
    while read < NEWEST_RUNS_READ:
        asked = min(page_size, NEWEST_RUNS_READ - read)
        page_size *= 10
        page = await store.list_runs(limit=asked, before=before)
        if any(run.workflow == workflow and run.run_id != run_id for run in page):
            return None
        read += len(page)
        if len(page) < asked:  # the store's oldest run is read
            break
        before = (page[-1].created_at, page[-1].run_id)
    return read


async def respond(
    store: Store,
    run_id: str,
    request_id: str,
    raw_value: str,
    app: str | None,
    *,
    wait: bool = False,
    options: RunOptions | None = None,
    actor: Actor | None = None,
) -> RunResult | None:
    """Answer one pending request and continue the run (``None``: a worker will).

    With ``wait``, a run another process owns is waited for; without, that
    is refused before anything is delivered.

    Raises:
        CommandError: No such run, bad JSON, or (without ``wait``) a busy run.
        RequestAlreadyAnsweredError: Another answer won (the error names it).
    """
    run_id = (await get_run(store, run_id)).run_id  # given a prefix, its run's full id
    value = parse_json(raw_value, "answer")
    if served_by_workers(store):
        _refuse_options_for_workers(options)
        await client_of(store, actor).respond(run_id, {request_id: value})
        return None
    workflow = await workflow_of(store, run_id, app)
    try:
        return await workflow.respond(
            run_id, {request_id: value}, store=store, wait=wait, options=options, actor=_who(actor)
        )
    except RunBusyError as error:
        raise _busy(error) from None


async def send(
    store: Store,
    run_id: str,
    raw_message: str,
    app: str | None,
    *,
    wait: bool = False,
    options: RunOptions | None = None,
    actor: Actor | None = None,
    policy: str | None = None,
) -> RunResult | None:
    """Deliver a session message and continue the run (``None``: a worker will).

    ``policy``: how it meets a running turn, by name (``enqueue``, ``debounce:2``).

    Raises:
        CommandError: No such run, bad JSON, a policy that is not one or that
            the workflow does not let a sender choose, or (without ``wait``)
            a busy run.
    """
    run_id = (await get_run(store, run_id)).run_id  # given a prefix, its run's full id
    message = parse_json(raw_message, "message")
    chosen = _policy(policy)
    if served_by_workers(store):
        _refuse_options_for_workers(options)
        await client_of(store, actor).send_message(run_id, message, policy=chosen)
        return None
    workflow = await workflow_of(store, run_id, app)
    try:
        return await workflow.send_message(
            run_id,
            message,
            store=store,
            wait=wait,
            options=options,
            actor=_who(actor),
            policy=chosen,
        )
    except SessionBusyError as error:
        raise CommandError(str(error)) from None
    except RunBusyError as error:
        raise _busy(error) from None
    except ValueError as error:  # a policy this workflow does not let a sender choose
        raise CommandError(f"--policy: {error}") from None


def _policy(name: str | None) -> InputPolicy | None:
    """The input policy ``--policy`` names (``None``: the workflow's).

    Raises:
        CommandError: it names none.
    """
    if name is None:
        return None
    try:
        return InputPolicy.parse(name)
    except ValueError as error:
        raise CommandError(f"--policy: {error}") from None


def _refuse_options_for_workers(options: RunOptions | None) -> None:
    """Run options apply where a run runs; on PostgreSQL that is a worker.

    Raises:
        CommandError: options were given for a run a worker will continue.
    """
    if options is not None:
        msg = (
            "run options apply where the run runs: on PostgreSQL a treadle worker "
            "continues it, with the workflow's own options"
        )
        raise CommandError(msg)


async def fork(
    store: Store,
    run_id: str,
    checkpoint_id: str | None,
    raw_patch: str | None,
    app: str | None,
    superstep: int | None = None,
    *,
    actor: Actor | None = None,
) -> str:
    """Branch a new run from a checkpoint; return its id."""
    row = await get_run(store, run_id)
    run_id = row.run_id  # given a prefix, its run's full id
    chosen = await resolve_checkpoint(store, run_id, checkpoint_id, superstep)
    if chosen is None:
        msg = "fork needs --checkpoint ID (or a prefix of it) or --superstep N"
        raise CommandError(msg)
    patch = parse_json(raw_patch, "state patch") if raw_patch else None
    if patch is not None and not isinstance(patch, dict):
        msg = "the state patch must be a JSON object of key: value"
        raise CommandError(msg)
    spec = await _spec_of(store, row, app)
    workflow = load_version(spec, row.workflow, row.version)
    return await fork_on_its_version(
        workflow,
        lambda: versions_beside(spec, workflow),
        run_id,
        chosen,
        patch,
        store=store,
        actor=_who(actor),
    )


async def resolve_checkpoint(
    store: RunReads, run_id: str, given: str | None, superstep: int | None
) -> str | None:
    """The checkpoint a command names: its id, a prefix of it, or ``--superstep N``.

    Ids are 32 hex digits, cut short in a narrow terminal: any prefix that
    names one checkpoint of the run will do. ``None``: neither was given.

    Raises:
        CommandError: both or neither fits one checkpoint; the message lists
            what would.
    """
    if given is None and superstep is None:
        return None
    if given is not None and superstep is not None:
        msg = "give --checkpoint or --superstep, not both"
        raise CommandError(msg)
    checkpoints = await store.list_checkpoints(run_id)
    if superstep is not None:
        found = [c.checkpoint_id for c in checkpoints if c.superstep == superstep]
        what = f"at superstep {superstep}"
    else:
        assert given is not None  # noqa: S101 - one of the two, checked above
        if any(c.checkpoint_id == given for c in checkpoints):
            return given
        found = [c.checkpoint_id for c in checkpoints if c.checkpoint_id.startswith(given)]
        what = f"whose id starts {given!r}"
    if len(found) == 1:
        return found[0]
    if not found:
        steps = sorted({c.superstep for c in checkpoints})
        seen = f"its supersteps: {steps}; see treadle history"
        msg = f"run {run_id!r} has no checkpoint {what} ({seen})"
    else:
        msg = f"run {run_id!r} has {len(found)} checkpoints {what}: {', '.join(found)}"
    raise CommandError(msg)


async def cancel(store: Store, run_id: str, *, actor: Actor | None = None) -> str:
    """Cancel a run wherever it is (a process advancing it commits nothing more); return its id."""
    run_id = (await get_run(store, run_id)).run_id  # given a prefix, its run's full id
    await door.cancel(store, run_id, actor=_who(actor))
    return run_id


async def pause(
    store: Store, run_id: str, *, actor: Actor | None = None
) -> tuple[PauseOutcome, RunRecord]:
    """Pause a run wherever it is (the store decides: now, or at its owner's next barrier).

    Returns what the store did and the run's row after it (whose owner, if
    the pause was only asked, pauses it).

    Raises:
        CommandError: No such run.
        RequestError: It has ended.
    """
    run_id = (await get_run(store, run_id)).run_id  # given a prefix, its run's full id
    outcome = await door.pause(store, run_id, actor=_who(actor))
    return outcome, await store.get_run(run_id)


async def unpause(
    store: Store, run_id: str, *, actor: Actor | None = None
) -> tuple[bool, RunRecord]:
    """Let a paused run go on (a worker, a timer service or ``resume`` takes it up).

    Returns whether it was paused (else a pause asked of it was withdrawn)
    and its row after.

    Raises:
        CommandError: No such run.
        RequestError: It has ended, or is neither paused nor asked to pause.
    """
    run_id = (await get_run(store, run_id)).run_id  # given a prefix, its run's full id
    unpaused = await door.unpause(store, run_id, actor=_who(actor))
    return not unpaused.withdrawn, await store.get_run(run_id)
