"""JSON given to the `treadle` command is bounded: too big or too deep is bad input, in one line."""

from __future__ import annotations

import gc
import json
import sys
from typing import TYPE_CHECKING

import pytest
from treadle_cli import Cli

from treadle._operations._inputs import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    CommandError,
    json_depth_exceeds,
    open_store,
    parse_json,
)

if TYPE_CHECKING:
    import subprocess


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def mixed(depth: int) -> str:
    """Arrays and objects alternating, ``depth`` levels, with strings that look like brackets."""
    text = '"[[{{"'
    for level in range(depth):
        text = f'{{"k{level}": {text}, "s": "]]}}"}}' if level % 2 else f'[1, {text}, "{{["]'
    return text


# --- the parser, in process ------------------------------------------------------------


@pytest.mark.parametrize("shape", [nested, mixed])
def test_json_as_deep_as_the_limit_is_read_and_one_level_more_is_refused(shape):
    value = parse_json(shape(MAX_JSON_DEPTH), "input")
    assert not json_depth_exceeds(value, MAX_JSON_DEPTH)
    with pytest.raises(CommandError) as refused:
        parse_json(shape(MAX_JSON_DEPTH + 1), "input")
    assert str(refused.value) == (
        f"the input (--input) nests arrays and objects more than {MAX_JSON_DEPTH} "
        f"levels deep, the most a command accepts"
    )


@pytest.mark.parametrize("depth", [1_000, 100_000, 1_000_000])
def test_json_deeper_than_the_parser_can_go_is_the_same_error_not_a_recursion_error(depth):
    with pytest.raises(CommandError, match="nests arrays and objects more than 256 levels"):
        parse_json(nested(depth), "message")


def test_the_depth_walk_needs_no_recursion():
    value: list[object] = []
    for _ in range(200_000):  # built directly: deeper than any parser would go
        value = [value]
    assert json_depth_exceeds(value, MAX_JSON_DEPTH)
    assert json_depth_exceeds([[[]]], 2)
    assert not json_depth_exceeds([[[]]], 3)
    assert not json_depth_exceeds({"a": [1, {"b": "[[[["}]}, 3)
    assert not json_depth_exceeds("[[[[", 0)


def test_the_depth_walk_runs_no_python_code_per_item():
    # A 16 MiB answer of 5.5 million arrays was walked item by item (a generator resumed
    # for each) for three times as long as reading it took, before the answer was even
    # looked at. A level's items are gathered and sorted by C iterators now. Counted as
    # Python functions entered, not timed.
    wide = [[[]] * 100_000, [{"a": [1, {}], "b": "[["}] * 100_000, [[[[0]]]] * 100_000]
    for value in wide:
        assert _python_calls(lambda v=value: json_depth_exceeds(v, MAX_JSON_DEPTH)) < 10
    document = json.dumps([[]] * 100_000)  # read by json's C parser, no hook per array
    assert _python_calls(lambda: parse_json(document, "answer")) < 50


def _python_calls(work) -> int:
    """How many Python functions ``work`` entered (a generator resumed counts once more)."""
    entered = 0

    def profile(frame, event, arg):
        nonlocal entered
        entered += event == "call"

    previous = sys.getprofile()
    gc.disable()  # a collector's callbacks (hypothesis installs one) are no work of ours
    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(previous)
        gc.enable()
    return entered


def test_json_as_large_as_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    exact = tmp_path / "exact.json"
    exact.write_bytes(b'"' + b"a" * (MAX_JSON_BYTES - 2) + b'"')
    assert len(parse_json(f"@{exact}", "answer")) == MAX_JSON_BYTES - 2
    over = tmp_path / "over.json"
    over.write_bytes(b'"' + b"a" * (MAX_JSON_BYTES - 1) + b'"')
    with pytest.raises(CommandError) as refused:
        parse_json(f"@{over}", "answer")
    assert str(refused.value) == (
        "the answer (VALUE) is larger than 16 MiB, the most a command accepts"
    )
    with pytest.raises(CommandError, match=r"the state patch \(--patch\) is larger than 16 MiB"):
        parse_json(" " * (MAX_JSON_BYTES + 1), "state patch")
    # Counted in bytes, not characters: four-byte characters fill the limit four times faster.
    with pytest.raises(CommandError, match=r"the message \(MESSAGE\) is larger"):
        parse_json('"' + "\N{GRINNING FACE}" * (MAX_JSON_BYTES // 4) + '"', "message")


def test_the_lease_comes_from_treadle_lease(tmp_path, monkeypatch):
    monkeypatch.setenv("TREADLE_LEASE", "2.5")
    assert getattr(open_store(str(tmp_path / "a.sqlite")), "lease", None) == 2.5
    assert getattr(open_store(str(tmp_path / "a.sqlite"), lease=7), "lease", None) == 7
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("TREADLE_LEASE", bad)
        with pytest.raises(CommandError, match="TREADLE_LEASE must be a positive number"):
            open_store(str(tmp_path / "a.sqlite"))


# --- the command, in subprocesses ------------------------------------------------------


def refused_in_one_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for text in expected:
        assert text in lines[0]


@pytest.mark.integration
def test_a_run_with_input_nested_100000_deep_is_refused_and_nothing_is_stored(tmp_path):
    cli = Cli(tmp_path)
    (tmp_path / "deep.json").write_text(nested(100_000))
    done = cli("run", "slow_app:echo", "--input", "@deep.json")
    refused_in_one_line(done, "the input (--input) nests", f"more than {MAX_JSON_DEPTH} levels")
    assert not cli.db.exists()  # refused before any store was made: nothing is stored


@pytest.mark.integration
def test_a_run_with_oversized_input_is_refused_and_nothing_is_stored(tmp_path):
    cli = Cli(tmp_path)
    (tmp_path / "big.json").write_bytes(b"[" + b"0," * (MAX_JSON_BYTES // 2) + b"0]")
    done = cli("run", "slow_app:echo", "--input", "@big.json")
    refused_in_one_line(done, "the input (--input) is larger than 16 MiB")
    assert not cli.db.exists()  # refused before any store was made: nothing is stored


@pytest.mark.integration
def test_input_at_the_depth_limit_runs(tmp_path):
    cli = Cli(tmp_path)
    (tmp_path / "deep.json").write_text(nested(MAX_JSON_DEPTH))
    done = cli("run", "slow_app:echo", "--input", "@deep.json", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"] == [json.loads(nested(MAX_JSON_DEPTH))]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("command", "argument"),
    [
        (("respond", "REVIEW", "REQUEST", "@deep.json"), "the answer (VALUE)"),
        (("send", "REVIEW", "@deep.json"), "the message (MESSAGE)"),
        (("fork", "REVIEW", "--checkpoint", "CHECKPOINT", "--patch", "@deep.json"), "--patch"),
    ],
)
def test_too_deep_json_to_a_stored_run_changes_nothing(tmp_path, command, argument):
    cli = Cli(tmp_path)
    started = cli("run", "cli_app:review", "--input", '{"topic": "t", "words": 1}', "--json")
    assert started.returncode == 3, started.stderr
    result = json.loads(started.stdout)
    history = json.loads(cli("history", result["run_id"], "--json").stdout)
    names = {
        "REVIEW": result["run_id"],
        "REQUEST": result["pending_requests"][0]["request_id"],
        "CHECKPOINT": history["checkpoints"][-1]["checkpoint_id"],
    }
    (tmp_path / "deep.json").write_text(nested(100_000))
    before = cli.snapshot()
    done = cli(*(names.get(arg, arg) for arg in command))
    refused_in_one_line(done, argument, f"more than {MAX_JSON_DEPTH} levels")
    assert cli.snapshot() == before


@pytest.mark.integration
@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("NaN", "NaN is not a JSON number"),
        ('{"score": 1e400}', "the number 1e400 is past what a float holds"),
        ('{"approved": false, "approved": true}', "the key 'approved' appears twice"),
    ],
)
def test_input_that_python_reads_but_json_is_not_is_refused_and_nothing_is_stored(
    tmp_path, given, says
):
    cli = Cli(tmp_path)
    done = cli("run", "slow_app:echo", "--input", given)
    refused_in_one_line(done, "the input is not valid JSON", says)
    assert not cli.db.exists()
