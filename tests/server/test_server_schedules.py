"""The schedules' HTTP API: each change through the door, as the request's actor.

On SQLite the server's own timer service serves the schedules, so a
trigger's run starts here, on its next round.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import serving

DIGEST = str(Path(__file__).parents[1] / "apps" / "digest.py")


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
