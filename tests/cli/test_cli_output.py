"""Small things a user meets in what the `treadle` command prints (issue 28, item 20):
help at 80 columns, the superstep a failure is said in, `runs --json` shaped as the API's
answer, ISO times in `export`, and an agent's conversation in `show`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from treadle_cli import HERE, Cli

from server.conftest import serving
from treadle._cli._app import app

pytestmark = pytest.mark.integration

PYTHON_TYPES = re.compile(r"<(str|int|float|bool|list\[[a-z]+\]|[a-z]+ range)>")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$")

# Every command's --help, printed by one real process at 80 columns.
_EVERY_HELP = """
import typer
from treadle._cli._app import app
group = typer.main.get_command(app)
names = [None, *sorted(group.commands)]
names += [
    f"{name} {sub}"
    for name in sorted(group.commands)
    for sub in sorted(getattr(group.commands[name], "commands", {}))
]
for name in names:
    print(f"=== {name}")
    try:
        group([*name.split(), "--help"] if name else ["--help"], prog_name="treadle")
    except SystemExit:
        pass
"""


def _commands(group):
    """Every command by its words (``run``, ``tokens create``), nested groups' too."""
    found = {}
    for name, command in group.commands.items():
        found[name] = command
        for sub, inner in getattr(command, "commands", {}).items():
            found[f"{name} {sub}"] = inner
    return found


def test_every_command_s_help_reads_whole_at_80_columns():
    import typer  # noqa: PLC0415 - only here: the option names to look for

    done = subprocess.run(
        [sys.executable, "-c", _EVERY_HELP],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "80", "PATH": "", "PYTHONPATH": str(HERE), "TERM": "dumb"},
    )
    assert done.returncode == 0, done.stderr
    helps = dict([*part.split("\n", 1), ""][:2] for part in done.stdout.split("=== ")[1:])
    commands = _commands(typer.main.get_command(app))
    assert set(helps) == {"None", *commands}
    for name, text in helps.items():
        assert "…" not in text, f"{name}: a cut name\n{text}"
        assert not PYTHON_TYPES.search(text), f"{name}: a Python type name\n{text}"
        # a documented placeholder is quoted ('{nominal}'); a raw argument name is not
        raw = re.search(r"(?<!')\{[a-z_]+\}(?!')", text)
        assert not raw, f"{name}: a raw argument name\n{text}"
        assert all(len(line) <= 80 for line in text.splitlines()), f"{name}\n{text}"
        if name != "None":
            for param in commands[name].params:
                for opt in (*param.opts, *param.secondary_opts):
                    if opt.startswith("-"):
                        assert opt in text, f"{name}: {opt} is not shown whole\n{text}"


def test_a_failure_is_said_in_the_superstep_it_failed_in(tmp_path):
    done = Cli(tmp_path)("run", "watch_app:failing", "-i", '"x1"', "--run-id", "f-1")
    assert done.returncode == 1
    assert "failed in superstep 1" in done.stdout, done.stdout
    assert "after superstep 0" not in done.stdout


async def test_runs_json_answers_what_get_api_runs_answers(tmp_path):
    cli = Cli(tmp_path)
    for n in range(3):
        assert cli("run", "watch_app:counting", "-i", "1", "--run-id", f"r-{n}").returncode == 3
    listed = json.loads(cli("runs", "--json", "--limit", "2").stdout)
    async with serving(str(cli.db), apps=("watch_app",)) as api:
        answered = (await api.get("/api/runs", params={"limit": 2})).json()
        rest = (await api.get("/api/runs", params={"cursor": answered["next_cursor"]})).json()
    assert set(listed) == set(answered) == {"runs", "next_cursor"}
    assert [r["run_id"] for r in listed["runs"]] == [r["run_id"] for r in answered["runs"]]
    for row, api_row in zip(listed["runs"], answered["runs"], strict=True):
        assert set(api_row) <= set(row)
        assert {k: row[k] for k in api_row} == api_row
    following = cli.json("runs", "--cursor", listed["next_cursor"])
    assert [r["run_id"] for r in following["runs"]] == [r["run_id"] for r in rest["runs"]]
    assert following["next_cursor"] is None


def test_export_writes_every_time_as_iso_8601_with_its_zone(tmp_path):
    cli = Cli(tmp_path)
    assert cli("run", "watch_app:counting", "-i", "2", "--run-id", "e-1").returncode == 3
    done = cli("export", "e-1")
    assert done.returncode == 0, done.stderr
    times = []
    for record in map(json.loads, done.stdout.splitlines()):
        for key in ("created_at", "updated_at", "at", "wake_at", "lease_until", "deadline_at"):
            if record.get(key) is not None:
                times.append(record[key])
    assert len(times) > 5
    assert all(isinstance(t, str) and ISO.match(t) for t in times), times


def test_show_prints_an_agent_s_conversation_a_message_a_line(tmp_path):
    cli = Cli(tmp_path)
    ran = cli("run", "chat_app:chat", "-i", '"tell me about otters"', "--run-id", "c-1")
    assert ran.returncode == 0, ran.stderr
    shown = cli("show", "c-1")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 200, shown.stdout
    conversation = lines[lines.index("    conversation: 2 messages") + 1 :][:2]
    assert conversation[0].strip() == "user: tell me about otters"
    assert conversation[1].strip().startswith("assistant: Here is everything about otters.")
    whole = cli.json("show", "c-1")["state"]["conversation"]
    assert whole[1]["parts"][0]["content"].count("otters") == 120  # --json keeps it whole


def test_a_long_conversation_is_shown_as_its_last_messages_saying_how_many_are_left_out():
    from treadle._cli._views import _entry_texts, value_lines  # noqa: PLC0415 - the CLI's drawing

    messages = [
        {"role": "user", "text": f"question {n}", "tool_calls": [], "tool_results": []}
        for n in range(20)
    ]
    messages.append(
        {
            "role": "assistant",
            "text": None,
            "tool_calls": [{"tool": "lookup", "args": '{"order": "A1"}', "call_id": "c"}],
            "tool_results": [],
        }
    )
    messages.append(
        {
            "role": "tool",
            "text": None,
            "tool_calls": [],
            "tool_results": [{"tool": "lookup", "content": "x" * 500, "call_id": "c"}],
        }
    )
    lines = value_lines("conversation", messages, 60, "messages", _entry_texts)
    assert lines[:2] == [
        "conversation: 22 messages",
        "  (14 earlier messages left out; --json shows them all)",
    ]
    assert lines[2].strip() == "user: question 14"
    assert lines[-2].strip() == 'assistant calls lookup({"order": "A1"})'
    assert lines[-1].strip().startswith("tool lookup returned: xxx")
    assert all(len(line) <= 60 for line in lines)


def test_json_output_is_the_standard_encoders_text_not_laid_out_by_rich(capsys, monkeypatch):
    # rich laid every --json document out through its highlighter: 2.4 GB and 29 s for
    # `treadle runs --limit 20000 --json` (17.5 MB written); 206 MB and 1.2 s now, the same
    # bytes (measured on a 35,000-run store; see the stop note).
    import rich.json  # noqa: PLC0415

    from treadle._cli._views import out  # noqa: PLC0415

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a --json document went through rich's layout")

    monkeypatch.setattr(rich.json.JSON, "from_data", refused)
    monkeypatch.setattr(rich.json.JSON, "__init__", refused)
    data = {"runs": [{"run_id": "r1", "note": "übung", "n": [1, 2.5, None, True]}]}
    out.print_json(data=data)
    assert capsys.readouterr().out == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
