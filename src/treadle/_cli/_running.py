"""Starting runs and moving them on: run, resume, respond, send, start, fork.

Each command parses its arguments, calls the commands layer
(:mod:`treadle._operations._commands`) on the chosen store through
:mod:`treadle._cli._execute` (errors, Ctrl-C as detach), prints the result
with :mod:`treadle._cli._views` (rich, or JSON with ``--json``) and exits
with the code of where the run got to (:mod:`treadle._cli._exits`). ``run``
and the commands that continue a stored run take the run options
(:func:`treadle._cli._flags.with_run_flags`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle._cli._execute import execute, execute_sync
from treadle._cli._exits import exit_where_settled, exit_with_result
from treadle._cli._flags import (
    AppOption,
    FollowOption,
    JsonOption,
    RunIdArgument,
    StoreOption,
    WaitOption,
    new_run_id_option,
    with_run_flags,
)
from treadle._cli._follow import continue_run, follow_new
from treadle._cli._help import command_set
from treadle._cli._live import stream_run
from treadle._cli._start_flags import with_start_flags
from treadle._cli._starting import prepare_run, refuse_taken_id
from treadle._cli._views import out, print_delivered, print_forked, print_started
from treadle._exceptions import CommandError
from treadle._operations import _commands as commands
from treadle._operations._requests import requests_of
from treadle._operations._run_view import RunView, show_run
from treadle._values._actors import Actor

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._cli._flags import RunFlags
    from treadle._engine._result import RunResult
    from treadle._operations._starting import StartChoice
    from treadle._stores._store import Store
    from treadle._workflow._start_policy import StartPolicy
    from treadle._workflow._workflow import Workflow

cli = command_set()

SuperstepOption = Annotated[
    int | None,
    typer.Option("--superstep", help="The checkpoint of this superstep (see treadle history)."),
]


@cli.command()
@with_run_flags
@with_start_flags
def run(
    workflow: Annotated[str, typer.Argument(help="pkg.module:workflow")],
    input_: Annotated[
        str | None, typer.Option("--input", "-i", help="The input as JSON, or @file.json.")
    ] = None,
    run_id: Annotated[str | None, new_run_id_option("Choose the run id.")] = None,
    *,
    choice: StartChoice,
    flags: RunFlags,
) -> None:
    """Start a run and watch it live: supersteps, progress, outputs.

    Under a start policy (the workflow's, or one the start flags give) the
    store decides the start first: the run runs here if admitted at once,
    else it waits its turn (queued) for whoever serves the store.
    """
    options = flags.run_options()
    loaded, value = execute_sync(lambda: prepare_run(workflow, input_))
    policy = execute_sync(lambda: choice.policy(loaded.start_policy))
    if choice.given or not loaded.start_policy.is_empty:
        _run_under_policy(loaded, value, run_id, choice.dedup_id, policy, flags)
        return

    async def work(chosen: Store) -> tuple[RunResult, list[dict[str, Any]]]:
        streamed = stream_run(
            loaded, value, chosen, run_id, out, quiet=flags.as_json, options=options
        )
        result = await refuse_taken_id(chosen, streamed, run_id)
        return result, await requests_of(chosen, result, loaded=loaded)

    exit_with_result(*execute(flags.store, work, drives=run_id or True, creates=True), flags)


def _run_under_policy(
    loaded: Workflow,
    value: Any,
    run_id: str | None,
    dedup_id: str | None,
    policy: StartPolicy | None,
    flags: RunFlags,
) -> None:
    """``treadle run`` under a start policy: decided by the store, run here when admitted."""
    options = flags.run_options()

    async def work(chosen: Store) -> tuple[RunResult, list[dict[str, Any]]]:
        try:
            started = loaded.run(
                value,
                store=chosen,
                run_id=run_id,
                options=options,
                actor=Actor.cli(),
                start_policy=policy,
                deduplication_id=dedup_id,
            )
            result = await refuse_taken_id(chosen, started, run_id)
        except ValueError as error:  # the policy's key could not be computed
            raise CommandError(str(error)) from None
        return result, await requests_of(chosen, result, loaded=loaded)

    exit_with_result(*execute(flags.store, work, drives=run_id or True, creates=True), flags)


@cli.command()
@with_run_flags
def resume(
    run_id: RunIdArgument,
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", help="Resume from here (its id, or a prefix of it)."),
    ] = None,
    superstep: SuperstepOption = None,
    app_: AppOption = None,
    wait: WaitOption = False,
    *,
    flags: RunFlags,
) -> None:
    """Continue a run from its latest checkpoint, or from --checkpoint / --superstep."""
    options = flags.run_options(continuing=True)
    _continue(
        run_id,
        flags,
        app_,
        lambda s: commands.resume(
            s, run_id, checkpoint, app_, wait=wait, options=options, superstep=superstep
        ),
    )


@cli.command()
@with_run_flags
def respond(
    run_id: RunIdArgument,
    request_id: Annotated[str, typer.Argument(help="The request id (see `treadle show`).")],
    value: Annotated[str, typer.Argument(help="The answer as JSON, or @file.json.")],
    app_: AppOption = None,
    wait: WaitOption = False,
    *,
    flags: RunFlags,
) -> None:
    """Answer a pending request and continue the run (on PostgreSQL: a worker does)."""
    options = flags.run_options(continuing=True) if flags.sets_run_options else None
    _continue(
        run_id,
        flags,
        app_,
        lambda s: commands.respond(s, run_id, request_id, value, app_, wait=wait, options=options),
    )


@cli.command()
@with_run_flags
def send(
    run_id: RunIdArgument,
    message: Annotated[str, typer.Argument(help="The message as JSON, or @file.json.")],
    app_: AppOption = None,
    wait: WaitOption = False,
    policy: Annotated[
        str | None,
        typer.Option(
            help=(
                "How it meets a turn still running: reject, enqueue, merge, interrupt, "
                "rollback or debounce:SECONDS (default: the workflow's input policy)."
            ),
        ),
    ] = None,
    *,
    flags: RunFlags,
) -> None:
    """Send the next message of a session and continue the run (on PostgreSQL: a worker does)."""
    options = flags.run_options(continuing=True) if flags.sets_run_options else None
    _continue(
        run_id,
        flags,
        app_,
        lambda s: commands.send(
            s, run_id, message, app_, wait=wait, options=options, policy=policy
        ),
    )


def _continue(
    run_id: str,
    flags: RunFlags,
    app_: str | None,
    work: Callable[[Store], Awaitable[RunResult | None]],
) -> None:
    """Continue a stored run through ``work``; Ctrl-C detaches from it.

    ``work`` returns the run's new state, or ``None`` when the run's inbox
    holds what it delivered for a worker to apply (on PostgreSQL).
    """
    done = execute(flags.store, lambda s: continue_run(s, run_id, work, flags, app_), drives=run_id)
    if done.result is not None:
        exit_with_result(done.result, done.requests, flags)
    if done.view is not None:  # --follow, after a worker applied what was delivered
        exit_where_settled(done.view, as_json=flags.as_json)
    print_delivered(run_id, as_json=flags.as_json)


@cli.command()
@with_start_flags
def start(
    workflow: Annotated[str, typer.Argument(help="The workflow's name, as workers serve it.")],
    input_: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="The input as JSON, or @file.json (left out: null).",
            show_default=False,
        ),
    ] = "null",
    run_id: Annotated[str | None, new_run_id_option("Choose the run id (idempotent).")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    follow: FollowOption = False,
    *,
    choice: StartChoice,
) -> None:
    """Queue a run for `treadle worker`s on PostgreSQL; print its id (--follow: follow it too).

    The start flags give it a start policy (``docs/flow-control.md``): the
    id printed is then the run the start made or joined.
    """
    started, alone = execute(
        store, lambda s: _queued(s, workflow, input_, run_id, choice), creates=True
    )
    if not (follow and as_json):
        print_started(started, workflow, as_json=as_json, alone=alone)
    if follow:
        view = execute(store, lambda s: follow_new(s, started, quiet=as_json), follows=True)
        exit_where_settled(view, as_json=as_json)


async def _queued(
    store: Store, workflow: str, input_: str, run_id: str | None, choice: StartChoice
) -> tuple[str, int | None]:
    """Queue the run; its id, and how many of the newest runs hold no other of ``workflow``.

    ``None``: another run of ``workflow`` is among them (see ``alone_of_its_workflow``).
    """
    started = await commands.start(store, workflow, input_, run_id, policy=choice)
    return started, await commands.alone_of_its_workflow(store, workflow, started)


@cli.command()
def fork(
    run_id: Annotated[str, typer.Argument(help="The run to branch from.")],
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", help="The checkpoint to branch at (its id, or a prefix)."),
    ] = None,
    superstep: SuperstepOption = None,
    patch: Annotated[
        str | None, typer.Option("--patch", help="State changes as a JSON object.")
    ] = None,
    app_: AppOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Branch a new run from a checkpoint; say how to move it on (resume, or answer)."""
    view, at, parent = execute(
        store, lambda s: _forked(s, run_id, checkpoint, patch, app_, superstep)
    )
    print_forked(view, parent, at, as_json=as_json)


async def _forked(
    store: Store,
    run_id: str,
    checkpoint: str | None,
    patch: str | None,
    app_: str | None,
    superstep: int | None,
) -> tuple[RunView, str, str]:
    """Fork; the new run's view, and at which checkpoint (prefix resolved) of which run."""
    run_id = (await commands.get_run(store, run_id)).run_id
    at = await commands.resolve_checkpoint(store, run_id, checkpoint, superstep)
    new_id = await commands.fork(store, run_id, at, patch, app_)
    assert at is not None  # noqa: S101 - fork refuses neither
    return await show_run(store, new_id, app_), at, run_id
