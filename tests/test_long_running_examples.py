"""The long-running examples (docs/long-running.md) do what the page says they do.

Each example's ``main`` runs on a FakeClock, so hours and days pass at once;
the assertions pin the statuses, outputs, counts and fake-clock times.
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from treadle import RunStatus

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NAMES = (
    "long_running_job_polling",
    "long_running_agent_timeout",
    "long_running_workflow_sla",
    "long_running_retry_backoff",
    "long_running_resume_later",
    "long_running_human_input",
)


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


async def test_job_polling_submits_once_polls_with_backoff_and_gives_up_at_max_duration(tmp_path):
    outcome = await load("long_running_job_polling").main(str(tmp_path / "runs.sqlite"))
    assert outcome["statuses"] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert outcome["outputs"] == [
        "intro: job-1 done",
        "finale: cancelled job-2 after 2 hours",
    ]
    assert outcome["submitted"] == ["intro", "finale"], "a job was submitted twice"
    # Minutes after the start: backoff 1, 2, 4, 8, 15 (the maximum), 15, ... minutes.
    intro = [0, 1, 3, 7, 15, 30]
    finale = [30 + m for m in [0, 1, 3, 7, 15, 30, 45, 60, 75, 90, 105, 120]]
    assert outcome["polls"] == intro + finale
    assert outcome["cancelled"] == ["job-2"]


async def test_agent_timeout_retries_fails_the_run_when_it_keeps_hanging_and_falls_back(
    tmp_path,
):
    outcome = await load("long_running_agent_timeout").main(str(tmp_path / "runs.sqlite"))
    recovered, failed, fell_back = outcome["recovered"], outcome["failed"], outcome["fell_back"]
    # 60 s timeout, 5 s backoff, then a 20 s answer.
    assert recovered["status"] is RunStatus.COMPLETED
    assert recovered["outputs"] == ["answer to 'status?' (took 20s)"]
    assert (recovered["calls"], recovered["took"]) == (2, 85)
    # Three attempts of 60 s with backoffs of 5 s and 10 s in between, then FAILED.
    assert (failed["status"], failed["outputs"]) == (RunStatus.FAILED, [])
    assert (failed["calls"], failed["took"]) == (3, 195)
    # Two calls bounded at 60 s each, then the fallback answers.
    assert fell_back["status"] is RunStatus.COMPLETED
    assert fell_back["outputs"] == ["no quick answer to 'status?': a person will follow up"]
    assert (fell_back["calls"], fell_back["took"]) == (2, 120)


async def test_workflow_sla_fails_resting_runs_at_their_deadline_after_a_restart(tmp_path):
    outcome = await load("long_running_workflow_sla").main(str(tmp_path / "runs.sqlite"))
    assert outcome["woken"] == {
        24: [("A-1", "completed")],
        47.9: [],
        48: [("B-2", "failed"), ("C-3", "failed")],
    }
    assert outcome["timed_out"] == ["B-2", "C-3"]
    assert outcome["statuses"] == {"A-1": "completed", "B-2": "failed", "C-3": "failed"}
    assert outcome["errors"]["A-1"] is None
    for order in ("B-2", "C-3"):
        assert outcome["errors"][order].startswith(f"RunTimeoutError: run {order!r} passed")


async def test_retry_backoff_attempts_and_delays(tmp_path):
    example = load("long_running_retry_backoff")
    outcome = await example.main(str(tmp_path / "runs.sqlite"))
    retried = outcome["retried"]
    assert (retried["status"], retried["outputs"]) == (RunStatus.COMPLETED, ["ch_1"])
    assert len(retried["gaps"]) == 3, "four attempts: three failures, then success"
    for attempt, gap in enumerate(retried["gaps"], start=1):
        low, high = example.BACKOFF.bounds(attempt)
        assert low <= gap <= high, (attempt, gap)
    assert example.BACKOFF.bounds(1) == pytest.approx((1.8, 2.2))
    assert example.BACKOFF.bounds(3) == pytest.approx((16.2, 19.8))
    assert len(retried["keys"]) == 1, "every attempt carries the same idempotency key"

    declined = outcome["declined"]
    assert (declined["status"], declined["outputs"], declined["gaps"]) == (
        RunStatus.FAILED,
        [],
        [],
    )

    durable = outcome["durable"]
    assert (durable["status"], durable["outputs"]) == (RunStatus.COMPLETED, ["ch_1"])
    assert durable["gaps"] == [600, 1800, 5400, 14400]  # capped at 4 hours
    assert len(durable["keys"]) == 1


async def test_resume_later_wakes_on_time_across_restarts_and_skips_the_cancelled_run(
    tmp_path,
):
    outcome = await load("long_running_resume_later").main(str(tmp_path / "runs.sqlite"))
    assert outcome["wakes"] == [
        ("Mon 02 Mar 10:00", "ann", "waiting"),  # the scheduled nudge, 2 hours later
        ("Tue 03 Mar 08:00", "ann", "waiting"),  # ctx.sleep(24 hours)
        ("Sun 15 Mar 08:00", "ann", "completed"),  # ctx.sleep_until(a day before the end)
    ]
    assert outcome["sent"] == [
        ("Mon 02 Mar 08:00", "ann@example.com", "welcome"),
        ("Mon 02 Mar 08:00", "bob@example.com", "welcome"),
        ("Mon 02 Mar 10:00", "ann@example.com", "finish setting up your account"),
        ("Tue 03 Mar 08:00", "ann@example.com", "a tip for your second day"),
        ("Sun 15 Mar 08:00", "ann@example.com", "your trial ends tomorrow"),
    ]
    assert outcome["statuses"] == {"ann": "completed", "bob": "cancelled"}


async def test_human_input_answered_later_sessions_and_cancellation(tmp_path):
    outcome = await load("long_running_human_input").main(str(tmp_path / "runs.sqlite"))
    assert outcome["approval"] == (RunStatus.COMPLETED, ["T-1: approved by maria"])
    assert outcome["tickets"] == ["ann", "cid", "bob"], "the ticket step ran again on re-execution"
    assert outcome["outcomes"] == [
        ("approved", "420 EUR for ann, approved by maria"),
        ("rejected", "1200 EUR for cid, rejected by maria"),
    ]
    status, outputs, turns = outcome["chat"]
    assert status is RunStatus.COMPLETED
    assert outputs == ["echo: hello", "echo: still there?", "echo: bye"]
    assert turns == 3


@pytest.mark.parametrize("name", NAMES)
def test_each_example_runs_as_a_script(name: str):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_the_doc_names_every_example():
    doc = (ROOT / "docs" / "long-running.md").read_text(encoding="utf-8")
    for name in NAMES:
        assert f"examples/{name}.py" in doc


def excerpts() -> list[tuple[str, list[list[str]]]]:
    """(example, chunks of lines) of every doc block that quotes an example.

    A block quotes ``examples/x.py`` when its first line is ``# examples/x.py``;
    a ``...`` line separates chunks that must appear in the file in that order.
    """
    doc = (ROOT / "docs" / "long-running.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"^```python\n(.*?)^```", doc, re.DOTALL | re.MULTILINE):
        first, *rest = block.splitlines()
        if not first.startswith("# examples/"):
            continue
        chunks: list[list[str]] = [[]]
        for line in rest:
            if line.strip() == "...":
                chunks.append([])
            elif line.strip():
                chunks[-1].append(line.strip())
        found.append((first.removeprefix("# "), chunks))
    return found


def test_the_doc_quotes_the_examples_as_they_are():
    quoted = excerpts()
    assert {path for path, _ in quoted} == {f"examples/{name}.py" for name in NAMES}
    for path, chunks in quoted:
        lines = [line.strip() for line in (ROOT / path).read_text().splitlines() if line.strip()]
        at = 0
        for chunk in chunks:
            starts = [i for i in range(at, len(lines)) if lines[i : i + len(chunk)] == chunk]
            assert starts, f"{path} no longer has, in this order:\n" + "\n".join(chunk)
            at = starts[0] + len(chunk)
