"""The `treadle` command as a user drives it: subprocesses on a real SQLite file."""

import subprocess

import pytest
from treadle_cli import HERE, Cli

pytestmark = pytest.mark.integration


def test_ask_answer_show_fork_and_every_listing_as_json(tmp_path):
    cli = Cli(tmp_path)
    started = cli.json("run", "cli_app:review", "--input", '{"topic": "otters", "words": 300}')
    assert started["status"] == "awaiting_input"
    run_id = started["run_id"]
    (request,) = started["pending_requests"]
    assert request["payload"] == {"text": "300 words about otters"}

    shown = cli.json("show", run_id)
    assert shown["status"] == "awaiting_input"
    assert shown["pending_requests"][0]["request_id"] == request["request_id"]

    answered = cli("respond", run_id, request["request_id"], '{"ok": true, "note": "ship it"}')
    assert answered.returncode == 0, answered.stderr
    assert "completed" in answered.stdout

    shown = cli.json("show", run_id)
    assert shown["status"] == "completed"
    assert shown["outputs"] == [
        {"text": "300 words about otters", "approved": True, "note": "ship it"}
    ]
    assert shown["state"] == {"topic": "otters"}

    history = cli.json("history", run_id)
    assert [c["superstep"] for c in history["checkpoints"]] == [0, 1, 2, 3]
    waiting = history["checkpoints"][2]["checkpoint_id"]
    forked = cli.json("fork", run_id, "--checkpoint", waiting, "--patch", '{"topic": "seals"}')
    child = forked["run_id"]
    child_shown = cli.json("show", child)
    assert child_shown["parent_run_id"] == run_id
    assert child_shown["state"] == {"topic": "seals"}
    assert cli.json("history", run_id)["forks"][0]["run_id"] == child

    runs = cli.json("runs")["runs"]
    assert {r["run_id"] for r in runs} == {run_id, child}
    assert [r["run_id"] for r in cli.json("runs", "--status", "completed")["runs"]] == [run_id]


def test_a_long_run_shows_a_progress_bar_advancing_in_a_terminal(tmp_path):
    cli = Cli(tmp_path)
    text = cli.on_a_terminal("run", "cli_app:long_job", "--input", "6", columns=100)
    percents = [p for p in ("17%", "33%", "50%", "67%", "83%", "100%") if p in text]
    assert len(percents) >= 4, text[-2000:]
    assert "crunching" in text
    assert "completed" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "no-such-run"), "no run 'no-such-run'"),
        (("respond", "no-such-run", "req-1", "true"), "no run 'no-such-run'"),
        (("run", "cli_app:review", "--input", "{not json"), "not valid JSON"),
        (("run", "missing_module:wf", "--input", "1"), "cannot import 'missing_module'"),
        (("run", "cli_app", "--input", "1"), "holds 3 workflows at its top level; name one"),
        (("run", "cli_app:review", "--input", '{"topic": 3}'), "does not fit the start executor"),
        (("runs", "--status", "sleepy"), "unknown status 'sleepy'"),
    ],
)
def test_bad_input_fails_with_one_line_and_changes_nothing(tmp_path, args, message):
    cli = Cli(tmp_path)
    started = cli.json("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}')
    before = cli.snapshot()
    done = cli(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]
    assert "Traceback" not in done.stderr
    assert cli.snapshot() == before
    assert started["status"] == "awaiting_input"


def test_a_wrong_answer_is_refused_and_the_run_still_waits(tmp_path):
    cli = Cli(tmp_path)
    started = cli.json("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}')
    request_id = started["pending_requests"][0]["request_id"]
    before = cli.snapshot()
    done = cli("respond", started["run_id"], request_id, '"yes"')
    assert done.returncode == 2
    assert "expects" in done.stderr
    assert cli.snapshot() == before


ROOT = HERE.parents[1]


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_treadle_graph_output_renders_with_the_real_tools(tmp_path, fmt):
    cli = Cli(tmp_path)
    cli.env["PYTHONPATH"] = str(ROOT / "examples")
    done = cli("graph", "every_edge_kind:workflow", "--format", fmt)
    assert done.returncode == 0, done.stderr
    source = tmp_path / ("graph.mmd" if fmt == "mermaid" else "graph.dot")
    source.write_text(done.stdout)
    picture = tmp_path / "graph.svg"
    if fmt == "mermaid":
        mmdc = ROOT / ".tools" / "node_modules" / ".bin" / "mmdc"
        config = ROOT / ".tools" / "puppeteer.json"
        assert mmdc.exists(), "run `make renderers`"
        command = [str(mmdc), "--quiet", "-i", str(source), "-o", str(picture), "-p", str(config)]
    else:
        command = ["dot", "-Tsvg", str(source), "-o", str(picture)]
    rendered = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert rendered.returncode == 0, rendered.stderr
    drawn = picture.read_text().replace("&#45;", "-")  # Graphviz escapes dashes in SVG text
    assert "fan-in" in drawn
