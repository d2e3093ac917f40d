"""A process SIGKILLed mid-superstep on a rollback's branch: the call in flight, the same key.

The branch a session's rollback makes keys its invocations with the
rolling-back message's place in the inbox (``~N``, see ``docs/semantics.md``),
kept in the checkpoint the branch writes as it takes the message. Killed
while an invocation on the branch runs, the run is resumed elsewhere on
the branch, and the invocation that was in flight runs again under the same
key, or a service deduplicating by it would see two calls.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from branch_app import chat

from forked import start
from gates import wait_for_file
from treadle import RunStatus
from treadle.stores import SqliteStore

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent


async def test_a_call_in_flight_on_a_branch_killed_mid_superstep_runs_again_under_the_same_key(
    tmp_path,
):
    path, side = tmp_path / "runs.sqlite", tmp_path / "side.txt"
    store = SqliteStore(path)
    try:
        rested = await chat.run("m0", run_id="s1", state={"side": str(side)}, store=store)
        assert rested.status is RunStatus.AWAITING_INPUT
        with start(
            "branch_app:cli",
            argv=["branch_app", "send", str(path), str(side), "m1"],
            env={**os.environ, "BRANCH_HOLD": "1", "PYTHONPATH": str(HERE)},
            cwd=tmp_path,
        ) as driver:
            wait_for_file(tmp_path / "side.txt.gate.reached", driver, what="m1's turn runs")
            await chat.send_message("s1", "m2", store=store)  # the driver takes it: rollback
            (tmp_path / "side.txt.gate").touch()
            wait_for_file(tmp_path / "side.txt.m2", driver, what="the branch runs m2")
            os.kill(driver.pid, signal.SIGKILL)
            driver.wait()

        resumed = await chat.resume("s1", store=store)
    finally:
        await store.close()
    assert resumed.outputs == ["done m0", "done m2"]
    keys = [line.split(" ", 1) for line in side.read_text().splitlines()]
    m2_keys = [key for message, key in keys if message == "m2"]
    assert len(m2_keys) == 2  # killed once, made again once
    assert m2_keys[0] == m2_keys[1]
    assert "~" in m2_keys[0]  # on the branch, not at the abandoned turn's place
    (m1_key,) = [key for message, key in keys if message == "m1"]
    assert m2_keys[0].rsplit("~", 1)[0] == m1_key
