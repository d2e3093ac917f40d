"""Resuming one paused run from the HTTP API and from `treadle resume` at once.

The server (this process) and the CLI (its own process, forked with the
command line imported: ``tests/forked.py``) race to take the run over. One
of them drives it on; the run then holds a little after the pause until
both have answered, so whoever comes second always meets it driven and is
told the run is busy (409, exit 2). Every superstep after the pause runs
exactly once, and the run's one output is committed once, on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from server_app import Count

import forked
from server.conftest import TREADLE, cli_env

TO = 20  # a few supersteps after the second hold, each checked to run once
HOLD_AT = 5
HOLD_AGAIN_AT = 8  # after the pause: held there until both racers have answered
DELAYS = (0.0, 0.4, 0.7, 1.0)  # how long the HTTP call waits for the CLI to start


async def _paused_mid_run(api, tmp_path: Path, run_id: str) -> int:
    """A `counting` run paused at a barrier part of the way; its superstep."""
    counting = api.app.state.served.workflows.get("counting")
    gate = tmp_path / "gate"
    running = asyncio.create_task(
        counting.run(
            Count(TO, str(gate), HOLD_AT, hold_again_at=HOLD_AGAIN_AT),
            run_id=run_id,
            store=api.store,
        )
    )
    reached = Path(str(gate) + ".reached")
    async with asyncio.timeout(20):
        while not await asyncio.to_thread(reached.exists):  # noqa: ASYNC110 - a file the run touches
            await asyncio.sleep(0.02)
    asked = await api.post(f"/api/runs/{run_id}/pause")
    assert asked.status_code == 200, asked.text
    assert asked.json()["outcome"] == "requested"
    gate.touch()
    with contextlib.suppress(Exception):
        await running
    row = await api.store.get_run(run_id)
    assert row.status == "paused", row
    return row.superstep


async def _race(api, tmp_path: Path, run_id: str, delay: float) -> tuple[bool, bool]:
    paused_at = await _paused_mid_run(api, tmp_path, run_id)
    cli = forked.start(
        "treadle._cli._app:main",
        env=cli_env(api.store_url),
        cwd=tmp_path,
        argv=[TREADLE, "resume", run_id, "--json"],
    )

    async def resume_over_http():
        await asyncio.sleep(delay)
        return await api.post(f"/api/runs/{run_id}/resume")

    async def release_once_both_asked() -> None:
        # The winner holds the run at HOLD_AGAIN_AT until the loser has been answered:
        # the server won (202) once the CLI has exited; the CLI won once the run holds.
        took = (await http).status_code == 202
        async with asyncio.timeout(30):
            while not (exited.is_set() if took else await asyncio.to_thread(reached.exists)):  # noqa: ASYNC110 - a file the run touches
                await asyncio.sleep(0.02)
        await asyncio.to_thread(again.touch)

    again = tmp_path / "gate.again"
    reached = tmp_path / "gate.again.reached"
    exited = asyncio.Event()
    http = asyncio.create_task(resume_over_http())
    released = asyncio.create_task(release_once_both_asked())
    returncode, out, err = await asyncio.to_thread(cli.finish, 60)
    exited.set()
    response = await http
    await released
    http_took = response.status_code == 202
    if not http_took:
        assert response.status_code == 409, response.text
        assert response.json()["error"]["type"] in ("RunBusyError", "RequestError"), response.text
    cli_took = returncode == 0
    if not cli_took:
        assert returncode == 2, (out, err)
        assert "is owned by" in err, err
        assert "nothing was changed" in err, err
    assert http_took or cli_took, (response.text, out, err)
    detail = await api.wait_for(run_id, {"completed"}, limit=30)
    assert detail["outputs"] == [TO]
    events = await api.store.read_events(run_id)
    started = [e.superstep for e in events if e.kind == "superstep_started"]
    assert len(started) == len(set(started)), started  # no superstep ran twice
    assert started == list(range(1, TO + 2)), (paused_at, started)
    outputs = [e for e in events if e.kind == "output"]
    assert len(outputs) == 1, outputs
    return http_took, cli_took


async def _races(api, tmp_path: Path) -> None:
    outcomes = []
    for n, delay in enumerate(DELAYS):
        place = tmp_path / f"race-{n}"
        place.mkdir()
        outcomes.append(await _race(api, place, f"paused-{n}", delay))
    # Each time the two met while the run was driven: exactly one of them took it.
    assert all(http != cli for http, cli in outcomes), outcomes


@pytest.mark.integration
async def test_http_and_cli_resuming_one_paused_run_drive_it_once_on_sqlite(api, tmp_path):
    await _races(api, tmp_path)


@pytest.mark.integration
async def test_http_and_cli_resuming_one_paused_run_drive_it_once_on_postgres(pg_api, tmp_path):
    await _races(pg_api, tmp_path)
