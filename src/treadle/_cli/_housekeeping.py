"""``treadle delete``, ``prune`` and ``audit``: a long-lived store, small and accountable.

``audit`` reads and checks the store's record of every action (see
:mod:`treadle._operations._audit`). ``delete`` and ``prune`` go through
:mod:`treadle._operations._cleanup`; the store refuses to delete a run a
live process owns, or one runs were forked from until those forks are
deleted (exit 2, nothing deleted). ``delete`` asks before it deletes unless
given ``--yes`` (and, with no terminal to ask on, refuses without it).
"""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from treadle._cli._execute import execute, refuse
from treadle._cli._flags import JsonOption, RunIdArgument, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_set
from treadle._cli._tables import print_lines
from treadle._cli._views import err, out, when
from treadle._operations import _audit as audits
from treadle._operations import _cleanup as cleanup
from treadle._operations import _commands as commands
from treadle._operations._audit import audit_json, audit_line

if TYPE_CHECKING:
    from treadle._stores._store import RunRecord, Store


cli = command_set()


@cli.command()
def delete(
    run_id: RunIdArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a run: its row, checkpoints, events and inbox.

    Refused (exit 2, nothing deleted) while a process owns the run, and for a
    run with forks (delete those first: they share what it stored).
    """
    row = execute(store, lambda s: commands.get_run(s, run_id))
    if not yes:
        if not sys.stdin.isatty():
            refuse(f"delete run {escape(row.run_id)}? add --yes to delete without asking")
        question = f"delete run {row.run_id} ({row.workflow}, {row.status}) for good?"
        if not typer.confirm(question, err=True):
            refuse("nothing was deleted")
    execute(store, lambda s: cleanup.delete_run(s, row.run_id))
    if as_json:
        out.print_json(data={"run_id": row.run_id, "deleted": True})
    else:
        out.print(f"deleted run {escape(row.run_id)} ({escape(row.workflow)}, {row.status})")


@cli.command()
def prune(
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", help="Delete ended runs unchanged for more than DAYS."),
    ] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            help=f"Delete ended runs with this status ({', '.join(cleanup.ENDED_STATUSES)}); "
            "repeatable.",
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option("--keep", help="Every run not deleted keeps only its newest N checkpoints."),
    ] = None,
    workflow: Annotated[str | None, typer.Option("--workflow", help="Only runs of it.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would go; change nothing.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete ended runs (--older-than, --status) and trim the others' checkpoints (--keep).

    Only runs that have ended (completed, failed, cancelled, stalled) are
    ever deleted; with both --older-than and --status, a run must match
    both. A run a process owns, or one with a fork that stays, is left
    alone and named on stderr.
    """
    chosen = cleanup.PruneFilter(
        statuses=tuple(status or ()), older_than_days=older_than, keep=keep, workflow=workflow
    )
    done = execute(store, lambda s: cleanup.prune(s, chosen, dry_run=dry_run))
    for line in done.skipped:
        err.print(f"[yellow]left alone:[/yellow] {escape(line)}")
    if as_json:
        out.print_json(data=_pruned_data(done))
        return
    verb = "would delete" if dry_run else "deleted"
    for run in done.deleted:
        out.print(f"{verb} run {_run_text(run)}")
    for run_id, count in done.trimmed.items():
        out.print(f"{verb} {count} old checkpoint(s) of run {escape(run_id)}")
    checkpoints = sum(done.trimmed.values())
    out.print(f"{verb} {len(done.deleted)} run(s) and {checkpoints} old checkpoint(s)")


def _run_text(run: RunRecord) -> str:
    return f"{escape(run.run_id)} ({escape(run.workflow)}, {run.status}, {when(run.updated_at)})"


def _pruned_data(done: cleanup.Pruned) -> dict[str, Any]:
    return {
        "dry_run": done.dry_run,
        "deleted": [r.run_id for r in done.deleted],
        "trimmed": done.trimmed,
        "skipped": done.skipped,
    }


@cli.command()
def audit(
    run_id: Annotated[
        str | None, typer.Argument(help="Only this run's entries (also once it is deleted).")
    ] = None,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Check the hash chain and every run's log against it."),
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Who did what to which run: the store's audit log, oldest first.

    Every action (start, answer, message, cancel, pause, unpause, resume,
    fork, delete, migrate, prune) is kept here with its actor and door,
    also after its run is deleted. With --verify, exit 1 naming each entry
    that was edited, reordered or removed since it was written.
    """
    if verify:
        found = execute(store, audits.verify)
        if as_json:
            out.print_json(data=found.to_json())
        elif found.ok:
            out.print(f"the audit log holds: {found.entries} entries, chain and runs' logs agree")
        else:
            for problem in found.problems:
                err.print(escape(problem))
        if not found.ok:
            raise typer.Exit(1)
        return
    execute(store, lambda s: _print_audit(s, run_id, as_json=as_json))


async def _print_audit(store: Store, run_id: str | None, *, as_json: bool) -> None:
    """The audit log (of the run ``run_id`` names), printed a page at a time as it is read.

    The log only grows: printed whole, it was read whole into memory first.
    ``--json`` is the document ``{"entries": [...]}`` as ``json.dumps`` indents it.
    """
    pages = audits.pages(store) if run_id is None else audits.run_pages(store, run_id)
    if not as_json:
        async for page in pages:
            print_lines(out, [audit_line(entry) for entry in page])
        return
    opened = False
    async for page in pages:
        items = ",\n".join(_indented(audit_json(entry)) for entry in page)
        out.file.write(("," if opened else '{\n  "entries": [') + "\n" + items)
        opened = True
    out.file.write("\n  ]\n}\n" if opened else '{\n  "entries": []\n}\n')
    out.file.flush()


def _indented(entry: dict[str, Any]) -> str:
    """One entry as ``json.dumps(..., indent=2)`` writes it two levels down, in a list."""
    return textwrap.indent(json.dumps(entry, indent=2, ensure_ascii=False), "    ")
