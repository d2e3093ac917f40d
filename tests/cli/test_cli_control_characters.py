"""Text from outside never writes a terminal sequence: control characters are shown, not sent.

An error's message, a progress label, a key of an input or of an answer:
text a run or its caller chose reaches the operator's terminal. rich drops
a bell or a carriage return but wrote an escape character through, and with
it whatever sequence followed (clear the screen, retitle the window, colour
what comes after). Every control character of such text is now shown as
``\\x1b`` (and so on).
"""

from __future__ import annotations

import json

from treadle_cli import Cli

HOSTILE = "\x1b]0;PWNED\x07\x1b[2J\x1b[31m\x9b1m"


def test_an_error_a_label_and_a_key_from_outside_write_no_control_character(tmp_path):
    cli = Cli(tmp_path)
    ran = cli("run", "hostile_text_app:fails", "--input", json.dumps(HOSTILE), "--run-id", "h1")
    assert ran.returncode == 1
    keyed = cli("run", "cli_app:review", "--input", json.dumps({f"topic{HOSTILE}": "t"}))
    assert keyed.returncode == 2
    shown = [cli("show", "h1"), cli("logs", "h1"), cli("runs")]
    for done in (ran, keyed, *shown):
        for text in (done.stdout, done.stderr):
            assert not any(c in text for c in "\x1b\x07\x9b"), repr(text)
    assert "bad input \\x1b]0;PWNED" in ran.stdout + ran.stderr
    assert "\\x1b[2J" in keyed.stderr  # shown, so the operator sees what was sent
