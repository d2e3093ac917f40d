"""`treadle requests` is the CLI user's inbox: only the requests it may answer (issue 29).

The CLI acts as ``cli:USER@HOST`` (an admin); a request naming other
approvers, or one of a run it started when the request needs four eyes,
is someone else's to answer: left out (``--all`` lists it, saying who may
answer), and ``treadle respond`` refuses it, so the inbox and the door
agree.
"""

from __future__ import annotations

from pathlib import Path

from treadle_cli import Cli

from server.inbox_app import inbox
from treadle import RunStatus
from treadle.stores import SqliteStore

APP = str(Path(__file__).parents[1] / "server" / "inbox_app.py")

RULES = {
    "anyone": {},
    "admins": {"approvers": ["role:admin"]},
    "maria": {"approvers": ["maria", "group:finance"]},
    "four": {"four_eyes": True},
}


async def test_requests_lists_what_the_cli_user_may_answer_and_all_lists_the_rest(tmp_path):
    cli = Cli(tmp_path)
    # Started by this user from Python (python:USER@HOST): the same person as the CLI's.
    store = SqliteStore(cli.db)
    try:
        for run_id, rules in RULES.items():
            started = await inbox.run(rules, store=store, run_id=run_id)
            assert started.status is RunStatus.AWAITING_INPUT
    finally:
        await store.close()

    listed = cli("requests", "--app", APP)
    assert listed.returncode == 0, listed.stderr
    shown_runs = [line for line in listed.stdout.splitlines() if line.startswith("run ")]
    assert sorted(shown_runs) == ["run admins:", "run anyone:"], listed
    assert "2 more wait on others (treadle requests --all lists them)" in listed.stderr

    every = {r["run_id"]: r for r in cli.json("requests", "--all", "--app", APP)["requests"]}
    assert sorted(every) == ["admins", "anyone", "four", "maria"]
    assert (every["maria"]["approvers"], every["maria"]["four_eyes"]) == (
        ["maria", "group:finance"],
        False,
    )
    assert (every["four"]["approvers"], every["four"]["four_eyes"]) == ([], True)
    shown = cli("requests", "--all", "--app", APP).stdout
    assert "who may answer: maria, group:finance" in shown
    assert "who may answer: any approver; not the run's starter" in shown

    # The door agrees with the inbox: what it leaves out, respond refuses, naming who may.
    request_id = every["maria"]["request_id"]
    refused = cli("respond", "maria", request_id, '{"approve": true}', "--app", APP)
    assert refused.returncode != 0, refused.stdout
    assert "only maria, group:finance may" in refused.stderr, refused.stderr
