"""The commands layer: what the CLI (and later the client and HTTP API) can do.

Every operation is a coroutine over a store that returns plain data; the
typer app only parses arguments and prints. Nothing here prints or exits.
Errors are :class:`CommandError` (bad input: unknown run, malformed JSON, an
import path that does not load) or the runtime's own ``TreadleError``s.

JSON given on the command line (an input, an answer, a message, a state
patch; inline or ``@file``) is bounded: at most :data:`MAX_JSON_BYTES` and
:data:`MAX_JSON_DEPTH` levels of nested arrays and objects. Beyond either it
is refused as bad input before anything is stored.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._ownership import owner_is_dead
from treadle._exceptions import AppLoadError, CommandError, RunBusyError, RunNotFoundError
from treadle._scaleout import _apps as apps
from treadle._scaleout._apps import import_here
from treadle._stores._store import DEFAULT_LEASE
from treadle._workflow._runs import cancel_run
from treadle._workflow._workflow import Workflow

if TYPE_CHECKING:
    from types import ModuleType

    from treadle._engine._options import RunOptions
    from treadle._engine._result import RunResult
    from treadle._scaleout._client import Client
    from treadle._stores._pausing import PauseOutcome
    from treadle._stores._store import CheckpointInfo, RunRecord, Store

DEFAULT_STORE = "treadle.sqlite"
"""The store used when neither ``--store`` nor ``TREADLE_STORE`` says otherwise."""

MAX_JSON_BYTES = 16 * 1024 * 1024
"""The largest JSON document (input, answer, message, state patch) a command accepts: 16 MiB."""

MAX_JSON_DEPTH = 256
"""How many levels deep arrays and objects may nest in JSON a command accepts."""

# Which argument of its command each kind of JSON comes from, for the error message.
_ARGUMENT = {"input": "--input", "answer": "VALUE", "message": "MESSAGE", "state patch": "--patch"}


def open_store(url: str | None, *, lease: float | None = None, create: bool = True) -> Store:
    """The store a URL names: a SQLite path (default) or ``postgresql://...``.

    ``create=False`` (every command that reads or acts on runs already
    stored) refuses a SQLite file that does not exist, naming it, rather
    than creating an empty store in whatever directory the command ran in.

    For PostgreSQL, ``TREADLE_SCHEMA`` names the schema holding the tables.
    On SQLite, ``lease`` (else ``TREADLE_LEASE``, else 30) is how many
    seconds this process's lease on a run lasts without a heartbeat: how
    soon a run whose process died counts as orphaned. (PostgreSQL workers
    take theirs from ``treadle worker --lease``.)

    Raises:
        CommandError: ``TREADLE_LEASE`` is not a positive number; with
            ``create=False``, the SQLite file does not exist.
    """
    url = url or os.environ.get("TREADLE_STORE") or DEFAULT_STORE
    if url.startswith(("postgresql://", "postgres://")):
        from treadle import stores  # noqa: PLC0415 - psycopg only when asked for

        postgres: Any = getattr(stores, "PostgresStore", None)
        if postgres is None:
            msg = "PostgreSQL stores need the postgres extra: pip install 'treadle[postgres]'"
            raise CommandError(msg)
        store: Store = postgres(url, schema=os.environ.get("TREADLE_SCHEMA") or None)
        return store
    from treadle._stores._sqlite import SqliteStore  # noqa: PLC0415 - a light import

    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    if not create and not Path(path).exists():
        msg = (
            f"no store at {str(Path(path).resolve())!r}: give --store (or set TREADLE_STORE) "
            f"to the file your runs are in; only `treadle run`, `start` and `worker` create one"
        )
        raise CommandError(msg)
    return SqliteStore(path, lease=lease if lease is not None else lease_from_environment())


def lease_from_environment() -> float:
    """``TREADLE_LEASE`` in seconds, or 30.

    Raises:
        CommandError: It is not a positive number.
    """
    raw = os.environ.get("TREADLE_LEASE")
    if not raw:
        return DEFAULT_LEASE
    try:
        lease = float(raw)
    except ValueError:
        lease = 0.0
    if not lease > 0 or lease == float("inf"):
        msg = f"TREADLE_LEASE must be a positive number of seconds, got {raw!r}"
        raise CommandError(msg)
    return lease


def load_workflow(spec: str) -> Workflow:
    """The workflow an app path names, its path kept as the workflow's origin.

    ``pkg.module:workflow``; ``pkg.module`` when the module holds exactly
    one workflow; or a file, ``path/to/app.py[:workflow]``. Later commands
    find a run's workflow by the origin it was started with.

    Raises:
        CommandError: It does not import, or names no single workflow; the
            message says what it holds and which name was perhaps meant.
    """
    where, _, attribute = spec.partition(":")
    if not where:
        msg = f"{spec!r} is not an app: write pkg.module:workflow, pkg.module or path/app.py"
        raise CommandError(msg)
    file = where.endswith(".py") or "/" in where
    try:
        module = _import_file(where) if file else import_here(where)
    except AppLoadError as error:
        raise CommandError(str(error)) from error
    found = {name: v for name, v in vars(module).items() if isinstance(v, Workflow)}
    if not attribute:
        if len(found) != 1:
            held = ", ".join(f"{where}:{name}" for name in found) or "none"
            msg = f"{where!r} holds {len(found)} workflows at its top level; name one ({held})"
            raise CommandError(msg)
        [attribute] = found
    workflow = getattr(module, attribute, None)
    if not isinstance(workflow, Workflow):
        what = "has no attribute" if workflow is None else f"has a {type(workflow).__name__} as"
        close = difflib.get_close_matches(attribute, list(found), n=1)
        hint = f"; did you mean {where}:{close[0]}?" if close else ""
        listed = ", ".join(found) or "none"
        msg = f"{where!r} {what} {attribute!r}, not a Workflow (its workflows: {listed}){hint}"
        raise CommandError(msg)
    workflow.origin = f"{str(Path(where).resolve()) if file else where}:{attribute}"
    return workflow


def _import_file(path: str) -> ModuleType:
    """Import a Python file as a module (its directory importable, as for a script).

    Raises:
        AppLoadError: There is no such file, or it does not import.
    """
    file = Path(path).resolve()
    if not file.is_file():
        msg = f"no file {str(file)!r}"
        raise AppLoadError(msg)
    name = file.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(file):
        return loaded
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        msg = f"cannot import {str(file)!r}: not a Python file"
        raise AppLoadError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        msg = f"cannot import {str(file)!r}: {type(error).__name__}: {error}"
        raise AppLoadError(msg) from error
    return module


def parse_json(text: str, what: str) -> Any:
    """JSON from the command line; ``@path`` reads it from a file.

    ``what`` is ``"input"``, ``"answer"``, ``"message"`` or ``"state patch"``.

    Raises:
        CommandError: The file cannot be read, the text is not JSON, or it
            is larger than :data:`MAX_JSON_BYTES` or nests deeper than
            :data:`MAX_JSON_DEPTH`.
    """
    argument = _ARGUMENT.get(what, what)
    document: str | bytes = text
    if text.startswith("@"):
        document = _read_json_file(text[1:], what, argument)
    elif len(text) > MAX_JSON_BYTES or len(text.encode(errors="replace")) > MAX_JSON_BYTES:
        raise _too_large(what, argument)
    try:
        value = json.loads(document)
    except RecursionError:  # deeper than the parser's own stack allows
        raise _too_deep(what, argument) from None
    except ValueError as error:
        head = document[:60]
        shown = head if isinstance(head, str) else head.decode(errors="replace")
        msg = f"the {what} is not valid JSON ({error}): {shown!r}"
        raise CommandError(msg) from error
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep(what, argument)
    return value


def _read_json_file(path: str, what: str, argument: str) -> bytes:
    try:
        with open(path, "rb") as source:  # noqa: PTH123 - one bounded read
            data = source.read(MAX_JSON_BYTES + 1)
    except OSError as error:
        msg = f"cannot read the {what} file {path!r}: {error.strerror}"
        raise CommandError(msg) from error
    if len(data) > MAX_JSON_BYTES:
        raise _too_large(what, argument)
    return data


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels deep in ``value``.

    An iterative walk (no recursion, whatever the depth); ``[]`` is one level.
    """
    stack = [(value, 1)] if isinstance(value, list | dict) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, list | dict))
    return False


def _too_large(what: str, argument: str) -> CommandError:
    return CommandError(
        f"the {what} ({argument}) is larger than {MAX_JSON_BYTES // 2**20} MiB, "
        f"the most a command accepts"
    )


def _too_deep(what: str, argument: str) -> CommandError:
    return CommandError(
        f"the {what} ({argument}) nests arrays and objects more than {MAX_JSON_DEPTH} "
        f"levels deep, the most a command accepts"
    )


def coerce_input(workflow: Workflow, value: Any) -> Any:
    """Turn JSON into the type the start executor accepts (a dataclass, a model...)."""
    try:
        return apps.coerce_input(workflow, value)
    except AppLoadError as error:
        raise CommandError(str(error)) from None


async def workflow_of(store: Store, run_id: str, app: str | None) -> Workflow:
    """The workflow that wrote a run: ``app`` if given, else the run's stored origin."""
    if app is not None:
        return load_workflow(app)
    graph = json.loads(await store.get_graph(run_id))
    origin = graph.get("origin")
    if not origin:
        msg = (
            f"run {run_id!r} does not record where its workflow lives "
            f"(it was started from Python); pass --app pkg.module:workflow"
        )
        raise CommandError(msg)
    return load_workflow(origin)


async def get_run(store: Store, run_id: str) -> RunRecord:
    """The run row, with a one-line error for an unknown id."""
    try:
        return await store.get_run(run_id)
    except RunNotFoundError:
        msg = f"no run {run_id!r} in this store"
        raise CommandError(msg) from None


def is_orphaned(run: RunRecord, now: float | None = None) -> bool:
    """Whether the run was left mid-run: ``running`` with nobody advancing it.

    That is :meth:`RunRecord.orphaned` (no current lease), or an owner on
    this host whose process is gone although its lease has not run out yet
    (``treadle resume`` takes such a run over at once, too).
    """
    if run.orphaned(time.time() if now is None else now):
        return True
    return run.status == "running" and run.owner is not None and owner_is_dead(run.owner)


def iso(epoch: float) -> str:
    """An epoch time as an ISO string (UTC, seconds)."""
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="seconds")


def _busy(error: RunBusyError) -> CommandError:
    """The one line a busy run gets on the command line (it names ``--wait``)."""
    msg = (
        f"run {error.run_id!r} is owned by {error.owner} (lease until {iso(error.lease_until)}); "
        f"nothing was changed: add --wait to wait for it, or try again later"
    )
    return CommandError(msg)


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything ``treadle show`` displays about one run."""

    run: RunRecord
    outputs: list[Any] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    pending_requests: list[dict[str, Any]] = field(default_factory=list)
    wake_at: float | None = None
    detail: str | None = None


async def show_run(store: Store, run_id: str, app: str | None) -> RunView:
    """A run's row plus what its latest checkpoint holds (if its workflow loads)."""
    run = await get_run(store, run_id)
    try:
        workflow = await workflow_of(store, run_id, app)
    except CommandError as error:
        return RunView(run=run, detail=str(error))
    record = await store.load_checkpoint(run_id)
    restored = workflow.codec.decode(record, run_id=run_id)
    return RunView(
        run=run,
        outputs=restored.outputs,
        state=restored.state,
        pending_requests=[
            {
                "request_id": r.request_id,
                "executor_id": r.executor_id,
                "payload": r.payload,
                "response_type": r.response_type,
            }
            for r in restored.waits.pending_requests()
        ],
        wake_at=restored.waits.next_wake_at(),
    )


async def history(
    store: Store, run_id: str
) -> tuple[RunRecord, list[CheckpointInfo], list[RunRecord]]:
    """A run's row, its checkpoints (oldest first) and its forks."""
    run = await get_run(store, run_id)
    return run, await store.list_checkpoints(run_id), await store.list_runs(parent_run_id=run_id)


def prepare_run(app: str, raw_input: str) -> tuple[Workflow, Any]:
    """The workflow and typed input for ``treadle run`` (the caller streams it)."""
    workflow = load_workflow(app)
    return workflow, coerce_input(workflow, parse_json(raw_input, "input"))


async def resume(
    store: Store,
    run_id: str,
    checkpoint_id: str | None,
    app: str | None,
    *,
    wait: bool = False,
    options: RunOptions | None = None,
    superstep: int | None = None,
) -> RunResult:
    """Continue a stored run; with ``wait``, once its current owner lets go of it.

    Raises:
        CommandError: No such run, or (without ``wait``) another process owns it.
    """
    await get_run(store, run_id)
    workflow = await workflow_of(store, run_id, app)
    checkpoint_id = await resolve_checkpoint(store, run_id, checkpoint_id, superstep)
    try:
        return await workflow.resume(run_id, checkpoint_id, store=store, wait=wait, options=options)
    except RunBusyError as error:
        raise _busy(error) from None


def served_by_workers(store: Store) -> bool:
    """Whether ``treadle worker`` processes run this store's runs (PostgreSQL), not this one.

    Then commands that would continue a run here deliver to its inbox
    instead, so a run is only ever driven under a worker's lease.
    """
    postgres = sys.modules.get("treadle._stores._postgres")
    return postgres is not None and isinstance(store, postgres.PostgresStore)


def client_of(store: Store) -> Client:
    """A client over the store (PostgreSQL) of this command."""
    from treadle._scaleout._client import Client  # noqa: PLC0415 - PostgreSQL commands only

    return Client(store)  # type: ignore[arg-type]


async def start(store: Store, workflow: str, raw_input: str, run_id: str | None) -> str:
    """Queue a run for the workers; return its id (idempotent with ``run_id``)."""
    if not served_by_workers(store):
        msg = "treadle start queues runs for workers on PostgreSQL; on SQLite use treadle run"
        raise CommandError(msg)
    return await client_of(store).start(workflow, parse_json(raw_input, "input"), run_id=run_id)


async def respond(
    store: Store,
    run_id: str,
    request_id: str,
    raw_value: str,
    app: str | None,
    *,
    wait: bool = False,
    options: RunOptions | None = None,
) -> RunResult | None:
    """Answer one pending request and continue the run (``None``: a worker will).

    With ``wait``, a run another process owns is waited for; without, that
    is refused before anything is delivered.

    Raises:
        CommandError: No such run, bad JSON, or (without ``wait``) a busy run.
        RequestAlreadyAnsweredError: Another answer won (the error names it).
    """
    await get_run(store, run_id)
    value = parse_json(raw_value, "answer")
    if served_by_workers(store):
        _refuse_options_for_workers(options)
        await client_of(store).respond(run_id, {request_id: value})
        return None
    workflow = await workflow_of(store, run_id, app)
    try:
        return await workflow.respond(
            run_id, {request_id: value}, store=store, wait=wait, options=options
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
) -> RunResult | None:
    """Deliver a session message and continue the run (``None``: a worker will).

    Raises:
        CommandError: No such run, bad JSON, or (without ``wait``) a busy run.
    """
    await get_run(store, run_id)
    message = parse_json(raw_message, "message")
    if served_by_workers(store):
        _refuse_options_for_workers(options)
        await client_of(store).send_message(run_id, message)
        return None
    workflow = await workflow_of(store, run_id, app)
    try:
        return await workflow.send_message(run_id, message, store=store, wait=wait, options=options)
    except RunBusyError as error:
        raise _busy(error) from None


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
) -> str:
    """Branch a new run from a checkpoint; return its id."""
    await get_run(store, run_id)
    chosen = await resolve_checkpoint(store, run_id, checkpoint_id, superstep)
    if chosen is None:
        msg = "fork needs --checkpoint ID (or a prefix of it) or --superstep N"
        raise CommandError(msg)
    patch = parse_json(raw_patch, "state patch") if raw_patch else None
    if patch is not None and not isinstance(patch, dict):
        msg = "the state patch must be a JSON object of key: value"
        raise CommandError(msg)
    workflow = await workflow_of(store, run_id, app)
    return await workflow.fork(run_id, chosen, patch, store=store)


async def resolve_checkpoint(
    store: Store, run_id: str, given: str | None, superstep: int | None
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
        what = f"superstep {superstep}"
    else:
        assert given is not None  # noqa: S101 - one of the two, checked above
        if any(c.checkpoint_id == given for c in checkpoints):
            return given
        found = [c.checkpoint_id for c in checkpoints if c.checkpoint_id.startswith(given)]
        what = f"a checkpoint id starting {given!r}"
    if len(found) == 1:
        return found[0]
    if not found:
        steps = sorted({c.superstep for c in checkpoints})
        msg = f"run {run_id!r} has no {what} (its supersteps: {steps}; see treadle history)"
    else:
        msg = f"run {run_id!r} has {len(found)} checkpoints at {what}: {', '.join(found)}"
    raise CommandError(msg)


async def cancel(store: Store, run_id: str) -> None:
    """Cancel a run wherever it is: a process advancing it commits nothing more."""
    await get_run(store, run_id)
    if served_by_workers(store):
        await client_of(store).cancel(run_id)
        return
    await cancel_run(store, run_id)


async def pause(store: Store, run_id: str) -> tuple[PauseOutcome, RunRecord]:
    """Pause a run wherever it is (the store decides: now, or at its owner's next barrier).

    Returns what the store did and the run's row after it (whose owner, if
    the pause was only asked, pauses it).

    Raises:
        CommandError: No such run.
        RequestError: It has ended.
    """
    await get_run(store, run_id)
    outcome = await store.pause(run_id)
    return outcome, await store.get_run(run_id)


async def unpause(store: Store, run_id: str) -> tuple[bool, RunRecord]:
    """Let a paused run go on (a worker, a timer service or ``resume`` takes it up).

    Returns whether it was paused (else a pause asked of it was withdrawn)
    and its row after.

    Raises:
        CommandError: No such run.
        RequestError: It has ended, or is neither paused nor asked to pause.
    """
    await get_run(store, run_id)
    unpaused = await store.unpause(run_id)
    return not unpaused.withdrawn, await store.get_run(run_id)
