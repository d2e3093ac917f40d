"""``treadle bulk ACTION --where FILTER``: one action on every run a filter keeps.

The action is :mod:`treadle._operations._bulk`'s, taken as the CLI's user
(``cli:USER@HOST``): each run's is recorded with that actor, through the one
door. ``--dry-run`` counts the runs it would act on and changes nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import typer
from rich.markup import escape

from treadle._cli._execute import execute, execute_sync, refuse
from treadle._cli._flags import JsonOption, StoreOption, WhereOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_set
from treadle._cli._views import out
from treadle._exceptions import CommandError
from treadle._operations._bulk import ACTIONS, NO_ANSWER, BulkAction, BulkReport, run_bulk
from treadle._operations._inputs import parse_json
from treadle._operations._search import run_filter
from treadle._values._actors import Actor

cli = command_set()


@cli.command()
def bulk(
    action: Annotated[str, typer.Argument(help=f"One of: {', '.join(ACTIONS)}.")],
    where: WhereOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count the runs it would act on; change nothing.")
    ] = False,
    rate: Annotated[
        float | None, typer.Option("--rate", metavar="N", help="At most N runs a second.")
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option("--executor", help="respond: answer the pending request of this executor."),
    ] = None,
    answer: Annotated[
        str | None, typer.Option("--answer", help="respond: the answer as JSON, for every run.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Act without asking.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel, pause, unpause, resume, respond to or delete every run --where keeps.

    Each run is read again just before it is acted on: one that no longer
    passes the filter, or that the store refuses (it ended meanwhile), is
    listed as skipped; so is one the filter keeps only after you confirmed
    (without --yes, only the runs counted when you were asked are acted
    on). --dry-run counts what a real action would try.
    resume hands each run back to the workers (or treadle serve) that go on with it.
    """
    if where is None:
        refuse("a bulk action needs --where (a filter: docs/search.md); 'true' takes every run")
    bulk_action = execute_sync(lambda: _asked(action, where, dry_run, rate, executor, answer))
    if not dry_run and not yes:
        counted = execute(store, lambda s: run_bulk(s, _dry(bulk_action), actor=Actor.cli()))
        if not sys.stdin.isatty():
            refuse(f"{action} {counted.matched} runs? add --yes to act without asking")
        if not typer.confirm(f"{action} {counted.matched} runs?", err=True):
            refuse("nothing was done")
        # What was agreed to: a run the filter keeps only by the time it acts is not acted on.
        bulk_action = dataclasses.replace(bulk_action, confirmed=frozenset(counted.listed))
    report = execute(store, lambda s: run_bulk(s, bulk_action, actor=Actor.cli()))
    _print(report, as_json=as_json)


def _asked(
    action: str,
    where: str,
    dry_run: bool,
    rate: float | None,
    executor: str | None,
    answer: str | None,
) -> BulkAction:
    found = run_filter(where)
    assert found is not None  # noqa: S101 - where was given
    value = NO_ANSWER
    if answer is not None:  # read as every command reads JSON: strictly, within its limits
        value = parse_json(answer, "answer", "--answer")
    elif action == "respond":
        msg = "respond needs --executor and --answer"
        raise CommandError(msg)
    try:
        return BulkAction(
            action, found, dry_run=dry_run, rate=rate, executor=executor, answer=value
        )
    except ValueError as error:
        raise CommandError(str(error)) from None


def _dry(bulk_action: BulkAction) -> BulkAction:
    return BulkAction(
        bulk_action.action,
        bulk_action.where,
        dry_run=True,
        executor=bulk_action.executor,
        answer=bulk_action.answer,
    )


def _print(report: BulkReport, *, as_json: bool) -> None:
    if as_json:
        out.print_json(data=report.as_json())
        return
    if report.dry_run:
        out.print(f"dry run: {report.action} would act on {report.matched} runs")
        return
    out.print(
        f"{report.action}: {len(report.acted)} of {report.matched} runs"
        f" ({len(report.skipped)} skipped)"
    )
    for run_id, why in report.skipped:
        out.print(f"  skipped {escape(run_id)}: {escape(why)}")
