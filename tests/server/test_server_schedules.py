"""The schedules' HTTP API: each change through the door, as the request's actor.

On SQLite the server's own timer service serves the schedules, so a
trigger's run starts here, on its next round.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import serving
from treadle._stores._tokens import token_hash

DIGEST = str(Path(__file__).parents[1] / "apps" / "digest.py")


async def spec_of(api, schedule_id: str) -> dict:
    """The schedule as changes leave it: what a tick moves (its next times, revision) left out."""
    shown = (await api.get(f"/api/schedules/{schedule_id}")).json()["schedule"]
    moving = {"next_times", "next_tick", "revision", "buffered", "last_run_id", "ticks"}
    return {key: value for key, value in shown.items() if key not in moving}


async def test_create_show_pause_trigger_backfill_and_delete_over_the_api(sqlite_url) -> None:
    async with serving(sqlite_url, apps=(DIGEST,)) as api:
        created = await api.post(
            "/api/schedules",
            json={
                "id": "morning",
                "workflow": "digest",
                "cron": "0 9 * * 1-5",
                "tz": "Europe/Paris",
                "input": "digest of {date}",
                "catchup": "10m",
            },
        )
        assert created.status_code == 201, created.text
        made = created.json()["schedule"]
        assert (made["catchup"], made["created_by"]) == (600.0, "token:server")
        assert len(made["next_times"]) == 5
        taken = await api.post("/api/schedules", json={"id": "morning", "workflow": "digest",
                                                        "every": 60})  # fmt: skip
        assert taken.status_code == 409
        bad = await api.post("/api/schedules", json={"workflow": "digest", "cron": "nope"})
        assert bad.status_code == 400
        assert "is not a cron expression" in bad.json()["error"]["message"]

        paused = await api.post("/api/schedules/morning/pause", json={"note": "away"})
        assert paused.json()["schedule"]["paused"] is True
        listed = (await api.get("/api/schedules")).json()["schedules"]
        assert [(s["id"], s["paused"], s["note"]) for s in listed] == [("morning", True, "away")]
        await api.post("/api/schedules/morning/unpause")

        triggered = await api.post("/api/schedules/morning/trigger")
        assert triggered.status_code == 202
        run_id = triggered.json()["run_id"]
        async with asyncio.timeout(30):  # its run starts on the timer service's next round
            while (await api.get(f"/api/runs/{run_id}")).status_code == 404:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        done = await api.wait_for(run_id, {"completed"})
        assert done["run"]["workflow"] == "digest"
        shown = (await api.get("/api/schedules/morning", params={"next": 2})).json()["schedule"]
        assert len(shown["next_times"]) == 2
        assert [(t["source"], t["run_id"], t["run_status"]) for t in shown["ticks"]] == [
            ("trigger", run_id, "completed")
        ]

        now = datetime.now(UTC)
        start, end = (now - timedelta(days=8)).isoformat(), (now - timedelta(days=1)).isoformat()
        dry = await api.post(
            "/api/schedules/morning/backfill", json={"start": start, "end": end, "dry_run": True}
        )
        assert dry.status_code == 200
        ticks = dry.json()["ticks"]
        assert len(ticks) == 5  # the weekdays of a week
        assert all(datetime.fromisoformat(t).strftime("%H:%M") == "09:00" for t in ticks)
        assert dry.json()["started"] == []

        missing = await api.post("/api/schedules/nothing/trigger")
        assert missing.status_code == 404
        deleted = await api.delete("/api/schedules/morning")
        assert deleted.json() == {"deleted": "morning"}
        audit = await api.store.read_audit()
        mine = [(e.action, e.actor["label"]) for e in audit if e.detail.get("schedule")]
        assert [action for action, _ in mine] == [
            "schedule_created",
            "schedule_paused",
            "schedule_unpaused",
            "schedule_triggered",
            "schedule_deleted",
        ]
        assert {label for _, label in mine} == {"token:server"}


async def test_patch_changes_the_fields_given_at_once_and_refuses_bad_ones(sqlite_url) -> None:
    async with serving(sqlite_url, apps=(DIGEST,)) as api:
        made = await api.post(
            "/api/schedules",
            json={"id": "morning", "workflow": "digest", "cron": "0 9 * * 1-5",
                  "tz": "Europe/Paris", "input": "digest of {date}", "overlap": "buffer_all"},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        before = made.json()["schedule"]

        changed = await api.client.patch(
            "/api/schedules/morning",
            json={"cron": "30 6 * * *", "tz": "America/New_York", "jitter": "1m", "version": 3},
        )
        assert changed.status_code == 200, changed.text
        after = changed.json()["schedule"]
        assert (after["cron"], after["tz"], after["jitter"], after["version"]) == (
            "30 6 * * *", "America/New_York", 60.0, 3,
        )  # fmt: skip
        assert (after["input"], after["overlap"], after["catchup"]) == (
            before["input"], "buffer_all", before["catchup"],
        )  # fmt: skip
        assert (after["revision"], after["updated_by"]) == (before["revision"] + 1, "token:server")
        # The next times follow the new ones at once (jitter moves starts, not nominal times).
        assert {datetime.fromisoformat(t).strftime("%H:%M") for t in after["next_times"]} == {
            "06:30"
        }
        shown = (await api.get("/api/schedules/morning")).json()["schedule"]
        assert shown["next_times"] == after["next_times"]

        unpinned = await api.client.patch(
            "/api/schedules/morning", json={"every": 90, "version": None}
        )
        assert unpinned.status_code == 200, unpinned.text
        every = unpinned.json()["schedule"]
        assert (every["cron"], every["every"], every["version"]) == (None, 90.0, None)

        refusals = [
            ({"cron": "0 8 * * *", "every": 60}, "give one of cron= and every=, not both"),
            ({"tz": "Mars"}, "tz 'Mars' is not an IANA time zone"),
            ({"cron": "61 * * * *"}, "cron '61 * * * *' is not a cron expression"),
            ({"catchup": "later"}, "catchup 'later' is not a duration"),
            ({"tz": None}, "tz cannot be null"),
            ({"version": "2"}, "version must be a whole number or null"),
            ({"workflow": "other"}, "workflow"),
            ({}, "nothing to change in schedule 'morning'"),
        ]
        stored = await spec_of(api, "morning")
        for body, message in refusals:
            refused = await api.client.patch("/api/schedules/morning", json=body)
            assert refused.status_code == 400, (body, refused.text)
            assert message in refused.json()["error"]["message"], body
        assert await spec_of(api, "morning") == stored
        missing = await api.client.patch("/api/schedules/nothing", json={"tz": "UTC"})
        assert missing.status_code == 404

        audit = await api.store.read_audit()
        mine = [
            (e.action, e.actor["label"])
            for e in audit
            if e.detail.get("schedule") and e.action != "schedule_ticked"  # the timer's, if due
        ]
        assert mine == [
            ("schedule_created", "token:server"),
            ("schedule_updated", "token:server"),
            ("schedule_updated", "token:server"),
        ]


async def test_schedule_fields_no_store_can_keep_are_refused_by_name(sqlite_url) -> None:
    # Each once answered 500 (and closed the client's connection), some after storing.
    async with serving(sqlite_url, apps=(DIGEST,)) as api:
        for fields, named in (
            ({"cron": 5}, "cron must be a cron expression as text"),
            ({"every": 1e308}, "more than the hundred years"),
            ({"every": "9999999999999999999d"}, "more than the hundred years"),
            ({"every": "1h", "catchup": 10**30}, "catchup"),
            ({"every": "1h", "jitter": "1e400"}, "jitter"),
            ({"every": "1h", "tz": "a" * 300}, "is not an IANA time zone"),
            ({"cron": "0 0 " + "1," * 400_000 + "1 * *"}, "cron is 800,009 characters long"),
        ):
            refused = await api.post(
                "/api/schedules", json={"workflow": "digest", "input": "x", **fields}
            )
            assert refused.status_code == 400, (fields, refused.text)
            assert named in refused.json()["error"]["message"], fields
        assert (await api.get("/api/schedules")).json()["schedules"] == []
        made = await api.post(
            "/api/schedules",
            json={"id": "often", "workflow": "digest", "every": "1s", "input": "x", "paused": True},
        )
        assert made.status_code == 201, made.text
        for start, says in (
            ("2026-01-01T00:00:00Z", "ticks in the range; backfill it in parts"),
            ("0001-01-01T00:00:00Z", ""),
        ):
            backfill = await api.post(
                "/api/schedules/often/backfill",
                json={"start": start, "end": "2026-11-01T00:00:00Z", "dry_run": True},
            )
            assert backfill.status_code == 400, (start, backfill.text)
            assert says in backfill.json()["error"]["message"]


APPROVALS = str(Path(__file__).parents[1] / "apps" / "approvals.py")
ANN = "tdl_ann-0123456789abcdef"
BOB = "tdl_bob-0123456789abcdef"


async def test_whoever_set_a_schedule_going_may_not_approve_its_four_eyes_run(sqlite_url) -> None:
    # Ann could not approve a run she started, but a run she started through a
    # schedule she made and triggered was started by "the schedule": she approved it.
    async with serving(sqlite_url, apps=(f"{APPROVALS}:shared_expense",)) as api:
        for name, token in (("ann", ANN), ("bob", BOB)):
            await api.store.add_token(name, "operator", token_hash(token), created_by="test")
        ann, bob = ({"Authorization": f"Bearer {t}"} for t in (ANN, BOB))
        made = await api.post(
            "/api/schedules",
            json={
                "id": "monthly",
                "workflow": "shared_expense",
                "every": "30d",
                "input": {"title": "rent", "cents": 100000},
                "paused": True,
            },
            headers=ann,
        )
        assert made.status_code == 201, made.text
        triggered = await api.post("/api/schedules/monthly/trigger", headers=ann)
        assert triggered.status_code == 202, triggered.text
        run_id = triggered.json()["run_id"]
        async with asyncio.timeout(30):  # its run starts on the timer service's next round
            while (await api.get(f"/api/runs/{run_id}")).status_code == 404:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        detail = await api.wait_for(run_id, {"awaiting_input"})
        (request,) = detail["pending_requests"]
        path = f"/api/runs/{run_id}/requests/{request['request_id']}"
        refused = await api.post(path, json={"answer": {"approved": True}}, headers=ann)
        assert refused.status_code == 403, refused.text
        assert "token:ann started this run" in refused.json()["error"]["message"]
        answered = await api.post(path, json={"answer": {"approved": True}}, headers=bob)
        assert answered.status_code == 202, answered.text
        await api.wait_for(run_id, {"completed"})
