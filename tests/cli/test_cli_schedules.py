"""``treadle schedules ...``: every change through the one door, recorded with the CLI's user.

The runs a trigger or a backfill records are started by whatever serves
the store; here a ``Runtime`` over the same file, in the test's process.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from treadle_cli import Cli

from treadle import Actor, Runtime
from treadle.stores import SqliteStore

sys.path.insert(0, str(Path(__file__).parents[1] / "apps"))
from digest import digest

CLI_USER = Actor.cli().label


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def serve_once(cli: Cli) -> list[str]:
    """One round of a Runtime serving the file: the ids of the runs it started or woke."""

    async def round_() -> list[str]:
        store = SqliteStore(cli.db)
        try:
            results = await Runtime(store, [digest]).wake_due()
        finally:
            await store.close()
        return [result.run_id for result in results]

    return asyncio.run(round_())


def test_create_list_show_pause_unpause_and_delete_each_recorded_with_the_cli_user(cli) -> None:
    made = cli.json(
        "schedules", "create", "morning", "--workflow", "digest", "--cron", "0 9 * * 1-5",
        "--tz", "Europe/Paris", "--input", '"digest of {date}"',
    )  # fmt: skip
    assert made["description"] == "At 09:00 on Monday through Friday (Europe/Paris)"
    assert made["created_by"] == CLI_USER
    times = [datetime.fromisoformat(t) for t in made["next_times"]]
    assert len(times) == 5
    assert all(t.strftime("%H:%M %z") in {"09:00 +0100", "09:00 +0200"} for t in times)
    assert all(t.weekday() < 5 for t in times)

    listed = cli.json("schedules", "list")["schedules"]
    assert [(s["id"], s["paused"]) for s in listed] == [("morning", False)]
    assert cli("schedules", "pause", "morning", "--note", "holiday").returncode == 0
    shown = cli.json("schedules", "show", "morning", "--next", "3")
    assert (shown["paused"], shown["note"], shown["next_times"]) == (True, "holiday", [])
    assert cli("schedules", "unpause", "morning").returncode == 0
    assert len(cli.json("schedules", "show", "morning", "--next", "3")["next_times"]) == 3
    assert cli("schedules", "delete", "morning").returncode == 0
    assert cli.json("schedules", "list")["schedules"] == []

    audit = cli.json("audit")["entries"]
    mine = [(e["action"], e["actor"]["label"]) for e in audit if e["detail"].get("schedule")]
    assert mine == [
        (action, CLI_USER)
        for action in (
            "schedule_created",
            "schedule_paused",
            "schedule_unpaused",
            "schedule_deleted",
        )
    ]


def test_bad_schedules_and_unknown_ids_are_refused_with_what_to_do(cli) -> None:
    bad = cli("schedules", "create", "x", "--workflow", "digest", "--cron", "61 * * * *")
    assert bad.returncode == 2
    assert "is not a cron expression" in bad.stderr
    seconds = cli("schedules", "create", "x", "--workflow", "digest", "--cron", "0 9 * * * *")
    assert seconds.returncode == 2  # was read with a seconds field: minute 9 of every hour
    assert "it has 6 fields, not five (minute hour day-of-month month weekday)" in seconds.stderr
    both = cli("schedules", "create", "x", "--workflow", "digest", "--cron", "* * * * *",
               "--every", "5m")  # fmt: skip
    assert "exactly one of cron= and every=" in both.stderr
    zone = cli("schedules", "create", "x", "--workflow", "digest", "--every", "5m", "--tz", "Mars")
    assert "is not an IANA time zone" in zone.stderr
    unreadable = cli("schedules", "create", "x", "--workflow", "digest", "--every", "5m",
                     "--input", "{bad")  # fmt: skip
    assert unreadable.returncode == 2
    assert "the input is not valid JSON" in unreadable.stderr
    assert cli("schedules", "create", "x", "--workflow", "digest", "--every", "5m").returncode == 0
    missing = cli("schedules", "pause", "nothing")
    assert missing.returncode == 2
    assert "no schedule 'nothing'" in missing.stderr
    taken = cli("schedules", "create", "x", "--workflow", "digest", "--every", "5m")
    assert "exists already" in taken.stderr


def test_trigger_starts_one_run_now_through_whatever_serves_the_store(cli) -> None:
    cli("schedules", "create", "often", "--workflow", "digest", "--every", "1h",
        "--input", '"at {nominal_utc}"')  # fmt: skip
    done = cli("schedules", "trigger", "often")
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.split("run ")[-1].strip()
    assert run_id.startswith("often@")
    assert serve_once(cli) == [run_id]
    assert serve_once(cli) == []  # started once
    shown = cli.json("schedules", "show", "often")
    (tick,) = shown["ticks"]
    assert (tick["source"], tick["run_id"], tick["run_status"]) == ("trigger", run_id, "completed")
    assert cli.json("show", run_id)["outputs"][0].startswith("at ")


def test_backfill_dry_run_lists_exactly_the_ticks_and_a_backfill_starts_each_once(cli) -> None:
    cli("schedules", "create", "hourly", "--workflow", "digest", "--cron", "0 * * * *",
        "--tz", "America/New_York", "--input", '"{nominal}"')  # fmt: skip
    day = (datetime.now(UTC) - timedelta(days=3)).date()
    start = f"{day}T10:00:00-04:00" if 3 < day.month < 11 else f"{day}T10:00:00-05:00"
    end = start.replace("T10:", "T13:")
    dry = cli.json("schedules", "backfill", "hourly", "--from", start, "--to", end, "--dry-run")
    assert [datetime.fromisoformat(t).hour for t in dry["ticks"]] == [10, 11, 12, 13]
    assert dry["started"] == []
    assert serve_once(cli) == []  # a dry run records nothing
    first = cli.json("schedules", "backfill", "hourly", "--from", start, "--to", end)
    assert first["started"] == dry["ticks"]
    again = cli.json("schedules", "backfill", "hourly", "--from", start, "--to", end)
    assert again["started"] == []
    assert sorted(serve_once(cli)) == sorted(dry["run_ids"])
    assert serve_once(cli) == []
    # A range that cannot be is refused in one line, exit 2 (each was a traceback).
    future = (datetime.now(UTC) + timedelta(days=400)).date()
    for bad, says in (
        (("--from", end, "--to", start), "is before the start"),
        (("--from", "2026-13-01", "--to", end), "--from '2026-13-01' is not an ISO 8601 time"),
        (("--from", start, "--to", f"{future}T00:00:00+00:00"), "is in the future"),
    ):
        refused = cli("schedules", "backfill", "hourly", *bad)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        assert refused.stderr.startswith("error: ")
        assert says in refused.stderr
        assert "Traceback" not in refused.stderr


def test_update_changes_only_the_options_given_at_once_and_is_recorded(cli) -> None:
    made = cli.json(
        "schedules", "create", "morning", "--workflow", "digest", "--cron", "0 9 * * 1-5",
        "--tz", "Europe/Paris", "--input", '"digest of {date}"', "--overlap", "buffer_one",
    )  # fmt: skip
    changed = cli.json(
        "schedules", "update", "morning", "--cron", "30 6 * * *", "--tz", "America/New_York",
        "--catchup", "10m", "--version", "2",
    )  # fmt: skip
    assert changed["description"] == "At 06:30 every day (America/New_York)"
    assert (changed["catchup"], changed["version"], changed["updated_by"]) == (600.0, 2, CLI_USER)
    # What was not given stays; the next times follow the new times at once.
    assert (changed["input"], changed["overlap"], changed["every"]) == (
        "digest of {date}",
        "buffer_one",
        None,
    )
    assert changed["revision"] == made["revision"] + 1
    times = [datetime.fromisoformat(t) for t in changed["next_times"]]
    assert {t.strftime("%H:%M") for t in times} == {"06:30"}
    assert {t.utcoffset() for t in times} <= {timedelta(hours=-5), timedelta(hours=-4)}
    assert cli.json("schedules", "show", "morning")["next_times"] == changed["next_times"]

    hourly = cli.json("schedules", "update", "morning", "--every", "1h", "--version", "newest")
    assert (hourly["cron"], hourly["every"], hourly["version"]) == (None, 3600.0, None)
    assert hourly["tz"] == "America/New_York"
    printed = cli("schedules", "update", "morning", "--input", "null")
    assert printed.returncode == 0, printed.stderr
    assert "schedule morning: digest, every 1:00:00, active" in printed.stdout

    audit = cli.json("audit")["entries"]
    mine = [(e["action"], e["actor"]["label"]) for e in audit if e["detail"].get("schedule")]
    assert mine == [("schedule_created", CLI_USER)] + [("schedule_updated", CLI_USER)] * 3


def test_a_bad_update_names_the_option_and_changes_nothing(cli) -> None:
    cli("schedules", "create", "x", "--workflow", "digest", "--cron", "0 9 * * *")
    before = cli.json("schedules", "show", "x")
    refusals = {
        ("--cron", "* * * * *", "--every", "5m"): "give one of cron= and every=, not both",
        ("--tz", "Mars"): "tz 'Mars' is not an IANA time zone",
        ("--cron", "61 * * * *"): "cron '61 * * * *' is not a cron expression",
        ("--every", "soon"): "every 'soon' is not a duration",
        ("--overlap", "sometimes"): "overlap 'sometimes' is not one of",
        ("--version", "two"): "--version 'two' is not a version",
        ("--input", "{bad"): "the input is not valid JSON",
        (): "nothing to change in schedule 'x'",
    }
    for options, message in refusals.items():
        refused = cli("schedules", "update", "x", *options)
        assert refused.returncode == 2, (options, refused.stdout)
        assert message in refused.stderr, (options, refused.stderr)
        assert "Traceback" not in refused.stderr
    assert cli.json("schedules", "show", "x") == before
    missing = cli("schedules", "update", "nothing", "--tz", "UTC")
    assert (missing.returncode, "no schedule 'nothing'" in missing.stderr) == (2, True)
