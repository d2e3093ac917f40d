"""A process SIGKILLed mid-turn: the resumed turn repeats no model request and no finished tool."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from scripted import counted

from gates import wait_for_file

HERE = Path(__file__).parent
SCRIPT = str(HERE / "kill_app.py")

pytestmark = pytest.mark.integration


def run_app(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_sigkill_between_two_tool_calls_of_a_turn_repeats_neither_request_nor_finished_call(
    tmp_path,
):
    store, side = tmp_path / "runs.sqlite", tmp_path / "side.sqlite"
    marker = Path(str(side) + ".shipping")
    child = subprocess.Popen([sys.executable, SCRIPT, "run", str(store), str(side), "k1"])
    wait_for_file(marker, child, what="the second tool call started")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    before = counted(side)
    assert {k: v for k, v in before.items() if " key " not in k} == {
        "model:0": 1,
        "charge": 1,
        "model:1": 1,
        "ship": 1,
    }

    resumed = run_app("resume", str(store), str(side), "k1")
    after = counted(side)
    # Journaled before the kill: replayed, never made again. In flight: made again,
    # with the same idempotency key. Then the last request, once.
    assert {k: v for k, v in after.items() if " key " not in k} == {
        "model:0": 1,
        "charge": 1,
        "model:1": 1,
        "ship": 2,
        "model:2": 1,
    }
    (ship_key,) = [k for k in after if k.startswith("ship key ")]
    assert after[ship_key] == 2
    assert ship_key.endswith("/ship-1")

    whole = run_app(
        "whole", str(tmp_path / "other.sqlite"), str(tmp_path / "other-side.sqlite"), "k1"
    )
    assert resumed["status"] == whole["status"] == "completed"
    assert resumed["outputs"] == whole["outputs"] == ["Charged and shipped to ann."]
    assert resumed["conversation"] == whole["conversation"]
    assert resumed["usage"] == whole["usage"]
