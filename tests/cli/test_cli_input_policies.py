"""`treadle send --policy`: the input policy a message meets a running turn with, by name.

The session is ``tests/workflow/session_app.py``'s chat; the races between
senders, and what each policy does to a running turn, are tested in
``tests/workflow``. Here: the name is read, a bad one refused (exit 2,
nothing changed), and the record keeps who sent what under which policy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from treadle_cli import Cli

from treadle import Actor

SESSIONS = Path(__file__).parent.parent / "workflow"


def cli_of(tmp_path: Path) -> Cli:
    return Cli(tmp_path, PYTHONPATH=f"{Path(__file__).parent}{os.pathsep}{SESSIONS}")


def test_send_takes_a_policy_by_name_and_the_record_keeps_it_with_the_sender(tmp_path):
    cli = cli_of(tmp_path)
    started = cli("run", "session_app:chat_enqueue", "--input", '"m0"', "--run-id", "s1")
    assert "awaiting input" in started.stdout or "awaiting_input" in started.stdout, started
    sent = cli("send", "s1", '"m1"', "--app", "session_app:chat_enqueue", "--policy", "merge")
    assert sent.returncode in (0, 3), sent.stderr  # it rests again, waiting for input
    shown = cli.json("show", "s1")
    assert shown["status"] == "awaiting_input"
    logged = cli("logs", "s1", "--json").stdout.splitlines()
    (message,) = [e for e in map(json.loads, logged) if e["type"] == "message_sent"]
    assert (message["data"]["message"], message["data"]["policy"]) == ("m1", "merge")
    assert message["data"]["actor"]["label"] == Actor.cli().label


def test_send_refuses_a_policy_that_is_none_or_that_the_workflow_does_not_let_senders_choose(
    tmp_path,
):
    cli = cli_of(tmp_path)
    cli("run", "session_app:chat_reject", "--input", '"m0"', "--run-id", "r1")
    before = cli.snapshot()
    bogus = cli("send", "r1", '"m1"', "--app", "session_app:chat_reject", "--policy", "queue")
    assert bogus.returncode == 2
    assert "--policy: input policy must be one of reject, enqueue" in bogus.stderr
    chosen = cli("send", "r1", '"m1"', "--app", "session_app:chat_reject", "--policy", "enqueue")
    assert chosen.returncode == 2
    assert "rejects session input while a turn runs" in chosen.stderr
    # A window that is no number, or longer than a burst's quiet (it held the run, and
    # every message after it, for as long): one line, nothing sent.
    for window, said in (
        ("nan", "debounce window must be a number of seconds, got nan"),
        ("inf", "debounce window must be a number of seconds, got inf"),
        ("1e308", "debounce window must be at most 300 s"),
    ):
        sent = cli("send", "r1", '"m1"', "--app", "session_app:chat_enqueue", "--policy",
                   f"debounce:{window}")  # fmt: skip
        assert sent.returncode == 2, sent.stderr
        assert f"--policy: {said}" in sent.stderr
        assert "Traceback" not in sent.stderr
    assert cli.snapshot() == before
