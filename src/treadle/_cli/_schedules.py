"""``treadle schedules create|update|list|show|pause|unpause|trigger|backfill|delete``.

Each opens the store as ``cli:USER@HOST`` and changes schedules through
the one door (:class:`~treadle.Schedules`), which records every change
with that actor. The runs of a trigger or a backfill are started by
whatever serves the store (``treadle serve`` or a ``Runtime`` on SQLite;
on PostgreSQL this command queues them for the workers itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from treadle._cli._execute import execute, execute_sync
from treadle._cli._flags import JsonOption, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_group, command_set
from treadle._cli._views import out
from treadle._exceptions import CommandError
from treadle._operations._inputs import parse_json
from treadle._operations._schedules import (
    parse_moment,
    schedule_from_fields,
    schedule_json,
    schedules_of,
    tick_json,
    update_schedule,
)
from treadle._values._actors import Actor
from treadle._values._schedules import OVERLAPS

if TYPE_CHECKING:
    from treadle._stores._store import Store
    from treadle._workflow._schedule_actions import ScheduleBackfill

cli = command_set()

schedules_app = command_group(
    "Schedules: runs that start themselves on time (create, update, list, show, pause, "
    "unpause, trigger, backfill, delete)."
)
cli.add_typer(schedules_app, name="schedules")

IdArgument = Annotated[str, typer.Argument(help="The schedule's id.")]


@schedules_app.command("create")
def create(
    schedule_id: IdArgument,
    workflow: Annotated[str, typer.Option("--workflow", help="The workflow's name.")],
    cron: Annotated[
        str | None, typer.Option("--cron", help="A cron expression: '0 9 * * 1-5'.")
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", help="An interval instead: 90s, 5m, 1h.")
    ] = None,
    tz: Annotated[str, typer.Option("--tz", help="The cron's time zone.")] = "UTC",
    input_: Annotated[
        str | None,
        typer.Option(
            "--input", help="The runs' input as JSON, where '{nominal}' is the tick's time."
        ),
    ] = None,
    overlap: Annotated[
        str, typer.Option("--overlap", help=f"While a run still goes: {', '.join(OVERLAPS)}.")
    ] = "skip",
    catchup: Annotated[
        str | None, typer.Option("--catchup", help="How late a tick may start (default 1h).")
    ] = None,
    jitter: Annotated[
        str | None, typer.Option("--jitter", help="Spread each start up to this late.")
    ] = None,
    version: Annotated[
        int | None, typer.Option("--version", help="Pin the runs to this workflow version.")
    ] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a schedule: a workflow started at the times of a cron expression or an interval."""
    fields: dict[str, Any] = {
        "id": schedule_id,
        "workflow": workflow,
        "cron": cron,
        "every": every,
        "tz": tz,
        "overlap": overlap,
        "catchup": catchup,
        "jitter": jitter,
        "version": version,
    }

    async def work(opened: Any) -> dict[str, Any]:
        # Read inside the work, as every refusal is: a bad --input is a usage error, not a crash.
        fields["input"] = None if input_ is None else parse_json(input_, "input")
        schedule = schedule_from_fields(fields)
        info = await schedules_of(opened, Actor.cli()).create(schedule, paused=paused)
        return schedule_json(info)

    data = execute(store, work, creates=True)
    if as_json:
        out.print_json(data=data)
        return
    _print_schedule(data)


@schedules_app.command("update")
def update(
    schedule_id: IdArgument,
    cron: Annotated[
        str | None, typer.Option("--cron", help="New times: a cron expression (replaces --every).")
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", help="New times: an interval (replaces --cron).")
    ] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="The cron's time zone.")] = None,
    input_: Annotated[
        str | None, typer.Option("--input", help="The runs' input as JSON ('null': none).")
    ] = None,
    overlap: Annotated[
        str | None,
        typer.Option("--overlap", help=f"While a run still goes: {', '.join(OVERLAPS)}."),
    ] = None,
    catchup: Annotated[
        str | None, typer.Option("--catchup", help="How late a tick may start.")
    ] = None,
    jitter: Annotated[
        str | None, typer.Option("--jitter", help="Spread each start up to this late.")
    ] = None,
    version: Annotated[
        str | None,
        typer.Option("--version", help="Pin the runs to this workflow version ('newest': unpin)."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change a schedule: only the options given change; new times apply from now on."""
    given: dict[str, Any] = {
        "cron": cron, "every": every, "tz": tz, "overlap": overlap, "catchup": catchup,
        "jitter": jitter,
    }  # fmt: skip
    fields = {name: value for name, value in given.items() if value is not None}

    async def work(opened: Any) -> dict[str, Any]:
        if input_ is not None:
            fields["input"] = parse_json(input_, "input")
        if version is not None:
            fields["version"] = _version(version)
        schedules = schedules_of(opened, Actor.cli())
        return schedule_json(await update_schedule(schedules, schedule_id, fields))

    data = execute(store, work)
    if as_json:
        out.print_json(data=data)
        return
    _print_schedule(data)


def _version(text: str) -> int | None:
    if text.strip().lower() == "newest":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        msg = f"--version {text!r} is not a version: give a whole number from 1, or 'newest'"
        raise CommandError(msg)
    return int(text)


@schedules_app.command("list")
def list_schedules(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List the schedules: id, workflow, times, next tick, state, last run."""

    async def work(opened: Any) -> list[dict[str, Any]]:
        infos = await schedules_of(opened, Actor.cli()).list()
        return [schedule_json(info, next_count=1) for info in infos]

    rows = execute(store, work)
    if as_json:
        out.print_json(data={"schedules": rows})
        return
    if not rows:
        out.print("no schedules (treadle schedules create ID --workflow NAME --cron EXPR)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("ID", "WORKFLOW", "WHEN", "NEXT", "STATE", "LAST RUN"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            escape(row["id"]),
            escape(row["workflow"]),
            escape(row["description"]),
            (row["next_times"] or ["-"])[0],
            "paused" if row["paused"] else "active",
            escape(row["last_run_id"] or "-"),
        )
    out.print(table)


@schedules_app.command("show")
def show(
    schedule_id: IdArgument,
    count: Annotated[int, typer.Option("--next", help="How many next times to list.")] = 5,
    ticks: Annotated[int, typer.Option("--ticks", help="How many recent ticks to list.")] = 10,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a schedule: its times, state, next times and recent ticks with their runs."""

    async def work(opened: Any) -> dict[str, Any]:
        schedules = schedules_of(opened, Actor.cli())
        info = await schedules.get(schedule_id)
        data = schedule_json(info, next_count=count)
        recent = await schedules.ticks(schedule_id, limit=ticks)
        data["ticks"] = [tick_json(tick, info.schedule) for tick in recent]
        return data

    data = execute(store, work)
    if as_json:
        out.print_json(data=data)
        return
    _print_schedule(data)
    if data["ticks"]:
        table = Table(box=None, pad_edge=False, title="recent ticks", title_justify="left")
        for column in ("NOMINAL", "SOURCE", "ACTION", "RUN", "STATUS", "DETAIL"):
            table.add_column(column)
        for tick in data["ticks"]:
            table.add_row(
                tick["nominal"],
                tick["source"],
                tick["action"],
                escape(tick["run_id"] or "-"),
                escape(tick["run_outcome"] or tick["run_status"] or "-"),
                escape(tick["detail"]),
            )
        out.print(table)


@schedules_app.command("pause")
def pause(
    schedule_id: IdArgument,
    note: Annotated[str | None, typer.Option("--note", help="Why, for whoever looks.")] = None,
    store: StoreOption = None,
) -> None:
    """Pause a schedule: no tick starts until it is unpaused (those meanwhile never do)."""
    execute(store, lambda s: schedules_of(s, Actor.cli()).pause(schedule_id, note))
    out.print(f"paused schedule {escape(schedule_id)}", highlight=False)


@schedules_app.command("unpause")
def unpause(schedule_id: IdArgument, store: StoreOption = None) -> None:
    """Unpause a schedule: it ticks again from its first time after now."""
    info = execute(store, lambda s: schedules_of(s, Actor.cli()).unpause(schedule_id))
    nxt = info.next_tick.isoformat() if info.next_tick is not None else "-"
    out.print(f"unpaused schedule {escape(schedule_id)}; next tick {nxt}", highlight=False)


@schedules_app.command("trigger")
def trigger(schedule_id: IdArgument, store: StoreOption = None) -> None:
    """Start a run of the schedule now (whatever its times, pause or overlap policy)."""
    run_id = execute(store, lambda s: schedules_of(s, Actor.cli()).trigger(schedule_id))
    out.print(f"triggered schedule {escape(schedule_id)}: run {escape(run_id)}", highlight=False)


@schedules_app.command("backfill")
def backfill(
    schedule_id: IdArgument,
    start: Annotated[str, typer.Option("--from", help="The first time (ISO 8601; UTC if bare).")],
    end: Annotated[str, typer.Option("--to", help="The last time, included.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the ticks, start nothing.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start the runs of the schedule's ticks in a past range (each tick once, ever)."""
    first, last = execute_sync(lambda: (parse_moment(start, "--from"), parse_moment(end, "--to")))

    async def work(s: Store) -> ScheduleBackfill:
        try:
            return await schedules_of(s, Actor.cli()).backfill(
                schedule_id, first, last, dry_run=dry_run
            )
        except ValueError as error:  # the range: reversed, in the future, too many ticks
            raise CommandError(str(error)) from None

    done = execute(store, work)
    ticks = [t.isoformat() for t in done.ticks]
    recorded = [t.isoformat() for t in done.recorded]
    if as_json:
        data = {"ticks": ticks, "run_ids": list(done.run_ids), "dry_run": dry_run}
        out.print_json(data={**data, "started": recorded})
        return
    for moment, run_id in zip(ticks, done.run_ids, strict=True):
        mark = "" if dry_run else (" (new)" if moment in recorded else " (already started)")
        out.print(f"{moment}  {escape(run_id)}{mark}", highlight=False)
    verb = "would start" if dry_run else "recorded to start"
    count = len(ticks) if dry_run else len(recorded)
    out.print(f"{verb} {count} of {len(ticks)} tick(s) of {escape(schedule_id)}", highlight=False)


@schedules_app.command("delete")
def delete(schedule_id: IdArgument, store: StoreOption = None) -> None:
    """Delete a schedule and the record of its ticks (its runs stay)."""
    execute(store, lambda s: schedules_of(s, Actor.cli()).delete(schedule_id))
    out.print(f"deleted schedule {escape(schedule_id)}", highlight=False)


def _print_schedule(data: dict[str, Any]) -> None:
    state = (
        "paused" + (f" ({data['note']})" if data["note"] else "") if data["paused"] else "active"
    )
    out.print(
        f"schedule {escape(data['id'])}: {escape(data['workflow'])}, "
        f"{escape(data['description'])}, {state}",
        highlight=False,
    )
    out.print(
        f"  overlap {data['overlap']}, catch-up {data['catchup']:g}s, jitter {data['jitter']:g}s"
        + (f", version {data['version']}" if data["version"] else ""),
        highlight=False,
    )
    for moment in data["next_times"]:
        out.print(f"  next {moment}", highlight=False)
