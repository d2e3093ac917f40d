"""How the command line words ownership, detaching and deep values: the helpers, in process."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from treadle._cli import _execute, _serve, _views
from treadle._operations._commands import is_orphaned
from treadle._stores._store import RunRecord

NOW = 1_800_000_000.0


def row(**changes: object) -> RunRecord:
    fields: dict[str, object] = {
        "run_id": "r1",
        "workflow": "wf",
        "status": "running",
        "superstep": 4,
        "checkpoint_id": "c4",
        "parent_run_id": None,
        "parent_checkpoint_id": None,
        "created_at": NOW - 60,
        "updated_at": NOW - 5,
    }
    return RunRecord(**{**fields, **changes})  # type: ignore[arg-type]


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


ELSEWHERE = "another-host:4242:abcdef"


@pytest.mark.parametrize(
    ("record", "orphaned"),
    [
        (row(owner=ELSEWHERE, lease_until=NOW + 30), False),  # held: someone advances it
        (row(owner=ELSEWHERE, lease_until=NOW - 1), True),  # its lease ran out
        (row(owner=ELSEWHERE, lease_until=NOW), True),  # a lease ends at its end
        (row(), True),  # released mid-run (detached by Ctrl-C)
        (row(status="waiting"), False),  # resting runs are nobody's to advance
        (row(status="awaiting_input", owner=ELSEWHERE, lease_until=NOW - 1), False),
        (row(status="completed"), False),
    ],
)
def test_a_run_is_orphaned_when_running_without_a_current_lease(record, orphaned):
    assert is_orphaned(record, NOW) is orphaned
    assert ("(orphaned" in _views._status_text(record, NOW)) is orphaned


def test_a_run_whose_owner_process_is_gone_is_orphaned_before_its_lease_ends():
    gone = f"{socket.gethostname()}:{dead_pid()}:abcdef"
    assert is_orphaned(row(owner=gone, lease_until=time.time() + 30))
    alive = f"{socket.gethostname()}:{os.getppid()}:abcdef"  # this test's parent
    assert not is_orphaned(row(owner=alive, lease_until=time.time() + 30))


def test_the_owner_column_says_who_holds_the_lease_and_until_when():
    assert _views._owner_text(row(), NOW) == ""
    assert _views._owner_text(row(owner=ELSEWHERE, lease_until=NOW + 30), NOW) == (
        f"{ELSEWHERE} until {_views.when(NOW + 30)}"
    )
    assert _views._owner_text(row(owner=ELSEWHERE, lease_until=NOW - 30), NOW) == (
        f"{ELSEWHERE} (lease ended {_views.when(NOW - 30)})"
    )


def test_a_parked_run_says_why_in_its_status():
    parked = row(parked="no workflow 'wf' here")
    assert _views._status_text(parked, NOW) == "running (orphaned; parked: no workflow 'wf' here)"
    resting = row(status="waiting", parked="GraphChangedError: x")
    assert _views._status_text(resting, NOW) == "waiting (parked: GraphChangedError: x)"
    data = _views.run_row(parked, NOW)
    assert (data["orphaned"], data["parked"], data["owner"]) == (True, parked.parked, None)


def test_the_detached_message_names_the_run_its_superstep_and_what_to_do():
    assert _execute._detached_message(["r1"], [row()], "r1") == (
        "detached from run r1 at superstep 4 (its last checkpoint); it stays resumable: "
        "treadle resume r1 (or let `treadle worker` take it over); treadle show r1 to look at it"
    )
    assert _execute._detached_message(["r1"], [None], True) == (
        "interrupted before run r1 was stored; nothing was started"
    )
    assert _execute._detached_message(["r1"], [row(status="completed")], "r1") == (
        "run r1 is completed; treadle show r1 to look at it"
    )
    assert "took run r9 over; nothing was cancelled" in _execute._detached_message([], [], "r9")
    assert _execute._detached_message([], [], True) == (
        "interrupted before a run was started; nothing was stored"
    )


def test_values_deeper_than_pydantic_serializes_still_print():
    deep = json.loads("[" * 400 + '{"b": 1, "a": [2, "x"]}' + "]" * 400)
    assert _views.plain({"outputs": [deep], "n": (1, 2)}) == {"outputs": [deep], "n": [1, 2]}
    keyed = {3: {"z": 1, "y": 2}, "deep": deep}
    copied = _views.plain(keyed)
    assert list(copied) == ["3", "deep"]
    assert list(copied["3"]) == ["z", "y"]  # key order kept


def test_worker_log_lines_carry_an_iso_time():
    record = logging.LogRecord("treadle.worker", logging.INFO, __file__, 1, "hi %s", ("x",), None)
    record.created = NOW + 0.25
    line = _serve.IsoTimeFormatter(_serve.LOG_FORMAT).format(record)
    assert line == "2027-01-15T08:00:00.250+00:00 treadle.worker INFO hi x"
    assert re.match(r"^\d{4}-\d\d-\d\dT", line)


def test_show_prints_a_long_state_list_as_its_size_and_last_item():
    conversation = [{"role": "user", "text": f"message {n}"} for n in range(200)]
    shown = _views.brief_state({"conversation": conversation, "tags": ["a", "b"], "n": 3})
    assert shown["tags"] == ["a", "b"]  # short ones whole
    assert shown["n"] == 3
    assert shown["conversation"].startswith("<200 items, the last: ")
    assert "message 199" in shown["conversation"]
