"""The commands layer: what the CLI (and later the client and HTTP API) can do.

Every operation is a coroutine over a store that returns plain data; the
typer app only parses arguments and prints. Nothing here prints or exits.
Errors are :class:`CommandError` (bad input: unknown run, malformed JSON, an
import path that does not load) or the runtime's own ``TreadleError``s.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle._durable._runs import cancel_run
from treadle._exceptions import RunNotFoundError, TreadleError
from treadle._runtime._workflow import Workflow
from treadle._scaleout import _apps as apps
from treadle._scaleout._apps import AppLoadError, import_here

if TYPE_CHECKING:
    from treadle._durable._store import CheckpointInfo, RunRecord, Store
    from treadle._runtime._result import RunResult
    from treadle._scaleout._client import Client

DEFAULT_STORE = "treadle.sqlite"
"""The store used when neither ``--store`` nor ``TREADLE_STORE`` says otherwise."""


class CommandError(TreadleError):
    """The command cannot be carried out as asked; nothing was changed."""


def open_store(url: str | None) -> Store:
    """The store a URL names: a SQLite path (default) or ``postgresql://...``.

    For PostgreSQL, ``TREADLE_SCHEMA`` names the schema holding the tables.
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
    from treadle._durable._sqlite import SqliteStore  # noqa: PLC0415 - a light import

    path = url.removeprefix("sqlite:///").removeprefix("sqlite://")
    return SqliteStore(path)


def load_workflow(spec: str) -> Workflow:
    """Import ``pkg.module:attribute`` and check it is a ``Workflow``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        msg = f"{spec!r} is not an import path: write it as pkg.module:workflow"
        raise CommandError(msg)
    try:
        module = import_here(module_name)
    except AppLoadError as error:
        raise CommandError(str(error)) from error
    try:
        workflow = getattr(module, attribute)
    except AttributeError:
        msg = f"module {module_name!r} has no attribute {attribute!r}"
        raise CommandError(msg) from None
    if not isinstance(workflow, Workflow):
        msg = f"{spec} is a {type(workflow).__name__}, not a Workflow (call .build())"
        raise CommandError(msg)
    workflow.origin = spec
    return workflow


def parse_json(text: str, what: str) -> Any:
    """JSON from the command line; ``@path`` reads it from a file."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as error:
            msg = f"cannot read the {what} file {text[1:]!r}: {error.strerror}"
            raise CommandError(msg) from error
    try:
        return json.loads(text)
    except ValueError as error:
        msg = f"the {what} is not valid JSON ({error}): {text[:60]!r}"
        raise CommandError(msg) from error


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
    restored = workflow.codec.decode(
        record.blob, run_id=run_id, checkpoint_id=record.info.checkpoint_id
    )
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
    store: Store, run_id: str, checkpoint_id: str | None, app: str | None
) -> RunResult:
    """Continue a stored run."""
    await get_run(store, run_id)
    workflow = await workflow_of(store, run_id, app)
    return await workflow.resume(run_id, checkpoint_id, store=store)


def served_by_workers(store: Store) -> bool:
    """Whether ``treadle worker`` processes run this store's runs (PostgreSQL), not this one.

    Then commands that would continue a run here deliver to its inbox
    instead, so a run is only ever driven under a worker's lease.
    """
    postgres = sys.modules.get("treadle._durable._postgres")
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
    store: Store, run_id: str, request_id: str, raw_value: str, app: str | None
) -> RunResult | None:
    """Answer one pending request and continue the run (``None``: a worker will)."""
    await get_run(store, run_id)
    value = parse_json(raw_value, "answer")
    if served_by_workers(store):
        await client_of(store).respond(run_id, {request_id: value})
        return None
    workflow = await workflow_of(store, run_id, app)
    return await workflow.respond(run_id, {request_id: value}, store=store)


async def send(store: Store, run_id: str, raw_message: str, app: str | None) -> RunResult | None:
    """Deliver a session message and continue the run (``None``: a worker will)."""
    await get_run(store, run_id)
    message = parse_json(raw_message, "message")
    if served_by_workers(store):
        await client_of(store).send_message(run_id, message)
        return None
    workflow = await workflow_of(store, run_id, app)
    return await workflow.send_message(run_id, message, store=store)


async def fork(
    store: Store, run_id: str, checkpoint_id: str, raw_patch: str | None, app: str | None
) -> str:
    """Branch a new run from a checkpoint; return its id."""
    await get_run(store, run_id)
    patch = parse_json(raw_patch, "state patch") if raw_patch else None
    if patch is not None and not isinstance(patch, dict):
        msg = "the state patch must be a JSON object of key: value"
        raise CommandError(msg)
    workflow = await workflow_of(store, run_id, app)
    return await workflow.fork(run_id, checkpoint_id, patch, store=store)


async def cancel(store: Store, run_id: str) -> None:
    """Cancel a run: a resting one here; on PostgreSQL, wherever it runs."""
    await get_run(store, run_id)
    if served_by_workers(store):
        await client_of(store).cancel(run_id)
        return
    await cancel_run(store, run_id)
