"""The page's run view hears every action the record writes, and says each as ``treadle logs``.

The run view subscribes to its event stream kind by kind (an ``EventSource``
has no wildcard), so a kind missing from its list never reaches the
timeline: "maria approved at 10:02 (page)" was in the log and ``treadle
logs`` but not on the page (issue 29). The browser test
(tests/server/test_signin_browser.py) shows it once; this keeps the lists
in step when an action is added.
"""

from __future__ import annotations

import re
from pathlib import Path

from treadle._operations._audit import _DONE

STATIC = Path(__file__).parents[2] / "src" / "treadle" / "_server" / "page" / "static"
# Actions whose sentence is not a plain "did" (an answer's verdict, a timeout), and one no
# run page can show (the run is gone).
SAID_APART = {"request_answered", "request_timed_out"}
GONE = {"run_deleted"}


def _quoted(text: str) -> set[str]:
    return set(re.findall(r'"([a-z_]+)"', text))


def test_the_run_view_listens_to_every_action_of_the_record() -> None:
    script = (STATIC / "run.js").read_text()
    kinds = _quoted(
        script[script.index("const KINDS") : script.index("];", script.index("const KINDS"))]
    )
    assert (set(_DONE) - GONE) | SAID_APART <= kinds


def test_the_timeline_says_each_action_as_treadle_logs_does() -> None:
    script = (STATIC / "timeline.js").read_text()
    start = script.index("const DONE = {")
    table = script[start : script.index("};", start)]
    said = dict(re.findall(r'^\s*([a-z_]+): "([^"]+)",', table, re.MULTILINE))
    assert said == {kind: text for kind, text in _DONE.items() if kind not in GONE}
