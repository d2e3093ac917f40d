"""``treadle migrate``: move a store's parked runs from one version of a workflow to another.

The module ``--app`` names holds the versions (``WorkflowBuilder(...,
version=)``) and the migrations between them (``@treadle.versions.migration``); the
command picks the chain from ``--from`` to ``--to`` and moves every run of
the old version that has not ended, run by run, each under its lease
(:func:`treadle.versions.migrate`). ``--dry-run`` reports exactly what a
real pass would do and writes nothing. Exit 0 when every run moved (or
would); 1 when one could not, naming it and why.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from treadle._cli._execute import execute, refuse
from treadle._cli._flags import JsonOption, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_set
from treadle._cli._views import out
from treadle._exceptions import AppLoadError
from treadle._migrations._runs import MigrationReport, RunMigration, migrate
from treadle._migrations._steps import Migration
from treadle._scaleout._apps import import_app, load_app
from treadle._values._actors import Actor
from treadle._workflow._versions import Hosted

if TYPE_CHECKING:
    from treadle._stores._store import Store

_VERB = MappingProxyType(
    {"moved": "moved", "would move": "would move", "cannot move": "cannot", "busy": "busy"}
)


cli = command_set()


@cli.command("migrate")
def migrate_command(
    app_: Annotated[
        str, typer.Option("--app", help="pkg.module holding the versions and the migrations.")
    ],
    from_version: Annotated[int, typer.Option("--from", help="The version runs move from.")],
    to_version: Annotated[int, typer.Option("--to", help="The version runs move to.")],
    workflow: Annotated[
        str | None, typer.Option("--workflow", help="Its name, when the module holds several.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would move; write nothing.")
    ] = False,
    run: Annotated[
        list[str] | None, typer.Option("--run", help="Only this run (repeatable).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move the runs of one version of a workflow to another, by the team's migrations."""
    hosted, migrations = _load(app_)
    name = _workflow_name(hosted, migrations, workflow, app_)
    target = hosted.get(name, to_version)
    if target is None:
        have = ", ".join(str(v) for v in hosted.versions(name)) or "none"
        refuse(escape(f"{app_!r} holds no version {to_version} of {name!r} (it holds: {have})"))
    previous = hosted.get(name, from_version)

    async def work(s: Store) -> MigrationReport:
        return await migrate(
            s,
            target,
            migrations,
            from_version=from_version,
            previous=previous,
            dry_run=dry_run,
            run_ids=run or None,
            actor=Actor.cli(),
        )

    report = execute(store, work)
    if as_json:
        out.print_json(data=report.to_json())
    else:
        for outcome in report.runs:
            out.print(escape(_line(outcome)), soft_wrap=True)
        out.print(_summary(report))
    raise typer.Exit(0 if report.ok else 1)


def _load(spec: str) -> tuple[Hosted, list[Migration]]:
    """Every workflow version and every migration at the top level of a module."""
    module_name = spec.partition(":")[0]
    try:
        hosted = Hosted(load_app(module_name))  # each workflow's origin recorded
    except (AppLoadError, ValueError) as error:
        refuse(escape(str(error)))
    found = vars(import_app(module_name)[0])  # imported already: for its migrations
    migrations = [v for v in found.values() if isinstance(v, Migration)]
    if not migrations:
        refuse(
            f"{module_name!r} defines no migration (decorate one with @treadle.versions.migration)"
        )
    return hosted, migrations


def _workflow_name(
    hosted: Hosted, migrations: list[Migration], given: str | None, spec: str
) -> str:
    if given is not None:
        if given not in hosted:
            refuse(f"{spec!r} holds no workflow {given!r} (it holds: {hosted.describe()})")
        return given
    named = sorted({m.workflow for m in migrations} & set(hosted.names()))
    if len(named) != 1:
        listed = ", ".join(named) or "none"
        refuse(f"name the workflow with --workflow (migrations here are for: {listed})")
    return named[0]


def _line(outcome: RunMigration) -> str:
    verb = _VERB[outcome.outcome]
    head = f"{verb:<10} {outcome.run_id}  {outcome.status}"
    if outcome.reasons:
        return f"{head}: " + "; ".join(outcome.reasons)
    changes = [f"{old} -> {new}" for old, new in outcome.renamed.items()]
    changes += [f"dropped {eid}" for eid in outcome.dropped]
    changes += [f"state {key}" for key in outcome.state_keys]
    return f"{head}  {', '.join(changes)}" if changes else head


def _summary(report: MigrationReport) -> str:
    total = len(report.runs)
    counts = {kind: len(report.with_outcome(kind)) for kind in ("cannot move", "busy")}
    verb = "would move" if report.dry_run else "moved"
    text = (
        f"{verb} {len(report.moved)} of {total} run(s) of {report.workflow!r} "
        f"from version {report.from_version} to {report.to_version}"
    )
    if counts["cannot move"]:
        text += f"; {counts['cannot move']} cannot move"
    if counts["busy"]:
        text += f"; {counts['busy']} busy (held by another process: run it again later)"
    return text
