"""Operating runs from the command line: completion, the requests inbox, what to answer,
run-id prefixes, delete and prune. Each through the real `treadle` command."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from treadle_cli import HERE, TREADLE, Cli, seconds

pytestmark = pytest.mark.integration

REVIEW = '{"topic": "tides", "words": 5}'
ORDER = '{"item": "bolts", "qty": 3}'


def respond_line(stdout: str) -> list[str]:
    """The (first) `treadle respond ...` command printed under a request, as argv."""
    line = next(x for x in stdout.splitlines() if "answer: treadle respond" in x)
    return shlex.split(line.split("answer: ", 1)[1])[1:]  # without "treadle"


def run_ids(cli: Cli) -> set[str]:
    return {r["run_id"] for r in cli.json("runs")["runs"]}


# -- completion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "marker"), [("bash", "complete -o default -F"), ("zsh", "compdef")]
)
def test_show_completion_prints_the_script_for_the_shell_named(tmp_path, shell, marker):
    # typer detects the shell from the process tree; this variable makes it take the name given.
    cli = Cli(tmp_path, _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    done = cli("--show-completion", shell)
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout
    assert "_TREADLE_COMPLETE" in done.stdout
    assert not cli.db.exists()


def test_bash_completes_commands_and_options_through_the_printed_script(tmp_path):
    script = """
        eval "$(treadle --show-completion)"
        COMP_WORDS=(treadle re); COMP_CWORD=1; _treadle_completion treadle
        echo "commands: ${COMPREPLY[*]}"
        COMP_WORDS=(treadle prune --); COMP_CWORD=2; _treadle_completion treadle
        echo "options: ${COMPREPLY[*]}"
    """
    env = {**os.environ, "PATH": f"{Path(TREADLE).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    commands, options = done.stdout.splitlines()
    assert commands.split()[1:] == ["resume", "respond", "requests"]
    assert {"--older-than", "--keep", "--dry-run", "--status"} <= set(options.split()[1:])


# -- answers: the pending requests, their schemas, what to type -----------------------------


def test_requests_lists_what_runs_wait_on_across_runs_with_answer_schemas(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "cli_app:review", "-i", REVIEW, "--run-id", "r-1").returncode == 3
    assert cli("run", "operate_app:decide", "-i", ORDER, "--run-id", "d-1").returncode == 3
    assert cli("run", "cli_app:long_job", "-i", "1", "--run-id", "done").returncode == 0

    listed = cli.json("requests")
    assert listed["unread"] == []
    newest, oldest = listed["requests"]
    assert (newest["run_id"], oldest["run_id"]) == ("d-1", "r-1")  # newest run first
    assert newest["executor_id"] == "intake"
    assert newest["payload"] == {"item": "bolts", "qty": 3}
    assert newest["response_type"] == "operate_app.Decision"
    assert seconds(newest["deadline_at"]) > time.time()  # asked with timeout=3600
    assert newest["answer_schema"]["required"] == ["approved", "priority", "reviewers"]
    assert oldest["answer_schema"]["properties"]["ok"] == {"title": "Ok", "type": "boolean"}
    assert oldest["deadline_at"] is None
    assert set(oldest) == set(newest) == {
        "run_id", "request_id", "executor_id", "payload", "response_type", "answer_schema",
        "deadline_at", "approvers", "four_eyes", "answered",
    }  # fmt: skip
    assert (oldest["approvers"], oldest["four_eyes"]) == ([], False)  # anyone may answer
    assert oldest["answered"] is newest["answered"] is False  # the listing's are all open

    assert [r["run_id"] for r in cli.json("requests", "--workflow", "review")["requests"]] == [
        "r-1"
    ]
    assert len(cli.json("requests", "--limit", "1")["requests"]) == 1
    text = cli("requests")
    assert text.returncode == 0, text.stderr
    assert "run d-1:" in text.stdout
    assert "ok: boolean (required)" in text.stdout
    assert respond_line(text.stdout)[:2] == ["respond", "d-1"]


def test_requests_names_a_run_it_cannot_read_and_lists_the_others(tmp_path):
    cli = Cli(tmp_path)
    app = tmp_path / "gone_app.py"
    app.write_text((HERE / "cli_app.py").read_text())
    assert cli("run", f"{app}:review", "-i", REVIEW, "--run-id", "lost").returncode == 3
    assert cli("run", "cli_app:review", "-i", REVIEW, "--run-id", "kept").returncode == 3
    app.unlink()  # the code of run "lost" is gone
    done = cli("requests", "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [r["run_id"] for r in listed["requests"]] == ["kept"]
    assert [line.split(":")[0] for line in listed["unread"]] == ["lost"]
    assert "could not read run lost" in done.stderr


def test_an_awaiting_run_says_what_to_type_and_the_line_it_prints_answers_it(tmp_path):
    cli = Cli(tmp_path)
    asked = cli("run", "operate_app:decide", "-i", ORDER, "--run-id", "d-1")
    assert asked.returncode == 3, asked.stderr
    for shown in (asked.stdout, cli("show", "d-1").stdout):
        assert 'priority: one of "low", "high" (required)' in shown
        assert "reviewers: list of Reviewer (required), each with:" in shown
        assert "    name: string (required)" in shown
        assert '  comment: string (default "")' in shown
        assert "deadline: " in shown
    [request] = cli.json("show", "d-1")["pending_requests"]
    assert request["answer_schema"]["additionalProperties"] is False
    answered = cli(*respond_line(asked.stdout))  # the example, as printed
    assert answered.returncode == 0, answered.stderr
    assert "completed" in answered.stdout
    assert cli.json("show", "d-1")["outputs"][0]["reviewers"] == [{"name": "", "email": ""}]


def test_resume_and_respond_that_end_awaiting_input_say_what_to_type(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "operate_app:rank", "-i", '"ticket 7"', "--run-id", "k-1").returncode == 3
    again = cli("resume", "k-1", "--superstep", "0")  # it asks again, from the start
    assert again.returncode == 3, again.stderr
    assert 'the answer is one of "low", "high"' in again.stdout
    argv = respond_line(again.stdout)
    assert argv[-1] == '"low"'
    wrong = cli(*argv[:-1], '"urgent"')
    assert wrong.returncode == 2
    assert "Input should be 'low' or 'high'" in wrong.stderr
    answered = cli(*argv[:-1], '"high"', "--json")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["outputs"] == ["high"]


# -- run-id prefixes ------------------------------------------------------------------------


def test_a_run_is_named_by_any_prefix_of_its_id_that_names_one_run(tmp_path):
    cli = Cli(tmp_path)
    for run_id in ("job-alpha-1", "job-alpha-2", "job-beta"):
        done = cli("run", "cli_app:review", "-i", REVIEW, "--run-id", run_id)
        assert done.returncode == 3, done.stderr

    shown = cli.json("show", "job-b")
    assert shown["run_id"] == "job-beta"
    assert cli.json("history", "job-alpha-2")["run"]["run_id"] == "job-alpha-2"

    before = cli.snapshot()
    ambiguous = cli("respond", "job-alpha", "req-x", "true")
    assert ambiguous.returncode == 2
    assert "several runs (job-alpha-2, job-alpha-1)" in ambiguous.stderr
    unknown = cli("show", "job-gamma")
    assert unknown.returncode == 2
    assert f"no run 'job-gamma' in '{cli.db}'" in unknown.stderr
    assert cli.snapshot() == before

    [request] = shown["pending_requests"]
    answered = cli("respond", "job-b", request["request_id"], '{"ok": true}', "--json")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["run_id"] == "job-beta"

    forked = cli("fork", "job-alpha-1", "--superstep", "1", "--json")
    assert forked.returncode == 0, forked.stderr
    assert json.loads(forked.stdout)["parent_run_id"] == "job-alpha-1"
    cancelled = cli("cancel", "job-alpha-2")
    assert (cancelled.returncode, cancelled.stdout.strip()) == (0, "run job-alpha-2 cancelled")


# -- delete and prune -----------------------------------------------------------------------


def test_delete_removes_a_run_asking_first_and_refusing_without_a_terminal(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "cli_app:review", "-i", REVIEW, "--run-id", "doomed-1").returncode == 3
    before = cli.snapshot()
    unasked = cli("delete", "doomed")  # stdin is not a terminal: nobody to ask
    assert unasked.returncode == 2
    assert "add --yes" in unasked.stderr
    assert cli.snapshot() == before

    done = cli("delete", "doomed", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "deleted run doomed-1 (review, awaiting_input)"
    assert run_ids(cli) == set()
    with sqlite3.connect(cli.db) as db:  # its checkpoints and inbox went with it
        assert db.execute("SELECT count(*) FROM treadle_checkpoints").fetchone() == (0,)
    assert cli("show", "doomed-1").returncode == 2
    assert cli("delete", "doomed-1", "--yes").returncode == 2


def test_delete_asks_on_a_terminal_and_only_yes_deletes(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "cli_app:long_job", "-i", "1", "--run-id", "asked").returncode == 0
    assert answer_prompt(cli, ["delete", "asked"], "n") == 2
    assert run_ids(cli) == {"asked"}
    assert answer_prompt(cli, ["delete", "asked"], "y") == 0
    assert run_ids(cli) == set()


def answer_prompt(cli: Cli, args: list[str], reply: str) -> int:
    """Run `treadle ARGS` on a pseudo-terminal, answer its question with REPLY; its exit code."""
    import pty  # noqa: PLC0415 - POSIX only

    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [TREADLE, *args], cwd=cli.cwd, env=cli.env, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    seen = b""
    try:
        while b"[y/N]" not in seen:
            chunk = os.read(leader, 1024)
            assert chunk, seen
            seen += chunk
        assert b"for good?" in seen
        os.write(leader, reply.encode() + b"\n")
        return child.wait(timeout=50)
    finally:
        os.close(leader)
        if child.poll() is None:
            child.kill()


def test_delete_refuses_a_run_another_process_is_advancing(tmp_path):
    cli = Cli(tmp_path)
    running = cli.start("run", "cli_app:long_job", "-i", "120", "--run-id", "busy")
    try:
        deadline = time.monotonic() + 40
        while not any(r["run_id"] == "busy" and r["owner"] for r in cli_runs(cli)):
            assert time.monotonic() < deadline, "the run never started"
            assert running.poll() is None, running.communicate()
        refused = cli("delete", "busy", "--yes")
        assert refused.returncode == 2
        assert "is owned by" in refused.stderr
        assert run_ids(cli) == {"busy"}
    finally:
        running.send_signal(2)  # Ctrl-C: detaches
        running.communicate(timeout=50)


def cli_runs(cli: Cli) -> list[dict[str, object]]:
    if not cli.db.exists():
        return []
    done = cli("runs", "--json")
    return json.loads(done.stdout)["runs"] if done.returncode == 0 else []


def test_a_run_with_forks_is_deleted_after_them_and_prune_deletes_forks_first(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "cli_app:review", "-i", REVIEW, "--run-id", "parent").returncode == 3
    forked = cli("fork", "parent", "--superstep", "1", "--json")
    assert forked.returncode == 0, forked.stderr
    child = json.loads(forked.stdout)["run_id"]
    before = cli.snapshot()
    refused = cli("delete", "parent", "--yes")
    assert refused.returncode == 2
    assert f"has forks ({child})" in refused.stderr
    assert cli.snapshot() == before

    assert cli("cancel", "parent").returncode == 0
    kept = cli.json("prune", "--status", "cancelled")  # the fork is not over: its parent stays
    assert kept["deleted"] == []
    assert [line.split(":")[0] for line in kept["skipped"]] == ["parent"]
    assert cli("cancel", child).returncode == 0
    both = cli.json("prune", "--status", "cancelled")
    assert both["deleted"] == [child, "parent"]  # the fork first
    assert run_ids(cli) == set()


def test_prune_deletes_ended_runs_by_status_and_age_and_trims_checkpoints(tmp_path):
    cli = Cli(tmp_path)
    for run_id in ("done-1", "done-2"):
        assert cli("run", "cli_app:long_job", "-i", "1", "--run-id", run_id).returncode == 0
    assert cli("run", "cli_app:review", "-i", REVIEW, "--run-id", "asking").returncode == 3

    for refused in (["prune"], ["prune", "--status", "awaiting_input"], ["prune", "--keep", "0"]):
        done = cli(*refused)
        assert done.returncode == 2, refused
    before = cli.snapshot()
    dry = cli("prune", "--status", "completed", "--keep", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete run done-2" in dry.stdout
    assert "would delete run done-1" in dry.stdout
    assert "would delete 2 old checkpoint(s) of run asking" in dry.stdout
    assert cli.snapshot() == before

    kept = cli.json("prune", "--older-than", "1")  # nothing has been over for a day
    assert kept["deleted"] == []
    assert cli.snapshot() == before
    pruned = cli.json("prune", "--older-than", "0", "--keep", "1")
    assert sorted(pruned["deleted"]) == ["done-1", "done-2"]
    assert pruned["trimmed"] == {"asking": 2}
    assert run_ids(cli) == {"asking"}
    assert cli.checkpoints("asking") == [2]
    answered = cli(*respond_line(cli("show", "asking").stdout))
    assert answered.returncode == 0, answered.stderr  # a trimmed run goes on from its latest


def test_every_new_command_is_documented_with_its_exit_codes():
    doc = (HERE.parent.parent / "docs" / "cli.md").read_text()
    commands = ("requests", "delete", "prune", "watch", "logs", "export", "--show-completion")
    for command in (*commands, "--install-completion"):
        assert f"treadle {command}" in doc, command


APPROVAL_FILE = """
from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass
class Verdict:
    ok: bool


@executor(id="ask")
async def ask(topic: str, ctx: WorkflowContext[str]) -> None:
    verdict = await ctx.request({"topic": topic}, Verdict)
    ctx.yield_output({"topic": topic, "ok": verdict.ok})


approval = WorkflowBuilder(ask, name="approval").register_type(Verdict).build()
"""


def test_show_reads_a_run_whose_code_does_not_load_here_from_its_event_log(tmp_path):
    cli = Cli(tmp_path)
    app = tmp_path / "approval_app.py"
    app.write_text(APPROVAL_FILE)
    assert cli("run", str(app), "-i", '"budget"', "--run-id", "far").returncode == 3
    hidden = tmp_path / "elsewhere.txt"
    app.rename(hidden)  # its code is gone from here, as on a machine that only operates runs

    shown = cli.json("show", "far")
    assert shown["read_from"] == "event log"
    (request,) = shown["pending_requests"]
    assert (request["executor_id"], request["payload"]) == ("ask", {"topic": "budget"})
    text = cli("show", "far")
    assert "read from its event log" in text.stdout
    assert request["request_id"] in text.stdout
    # The line to answer it names what respond needs here (it said "... null", an answer
    # that fails, without the code it checks answers with).
    assert f"answer: treadle respond far {request['request_id']} '<json>' --app " in text.stdout

    hidden.rename(app)
    answered = cli("respond", "far", request["request_id"], '{"ok": true}')
    assert answered.returncode == 0, answered.stderr
    app.rename(hidden)
    shown = cli.json("show", "far")
    assert (shown["status"], shown["pending_requests"]) == ("completed", [])
    assert shown["outputs"] == [{"topic": "budget", "ok": True}]
