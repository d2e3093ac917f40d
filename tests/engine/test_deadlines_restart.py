"""Deadlines on requests, and continuations, across processes: each step a process of its own.

The workflows are ``deadline_app.py``'s, each step run in a process forked
with treadle imported (``tests/forked.py``: a real process, without a Python
start per step); each process is given the time its
fake clock starts at, and counts its handlers' side effects in a SQLite file,
so "exactly once across restarts" is counted, not assumed. On a SQLite file
and on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

import forked
from postgres import drop_schemas, fresh_schema, postgres_dsn

HERE = Path(__file__).parent
T0 = 1_000_000.0
HOUR = 3600.0
DAY = 24 * HOUR

pytestmark = pytest.mark.integration


class App:
    """Runs deadline_app.py steps against one store, one side-effect file."""

    def __init__(self, where: str, tmp_path: Path) -> None:
        self.where = where
        self.side = tmp_path / "side.sqlite"
        self.tmp_path = tmp_path
        self._races = itertools.count()

    def start(self, now: float, *args: str) -> forked.Forked:
        """The step in a process of its own, as ``deadline_app.py`` run with these arguments."""
        script = str(HERE / "deadline_app.py")
        return forked.start(
            "deadline_app:cli",
            env={**os.environ, "PYTHONPATH": str(HERE)},
            cwd=HERE,
            argv=[script, self.where, str(self.side), repr(now), *args],
        )

    def lines(self, now: float, *args: str) -> list[str]:
        with self.start(now, *args) as step:
            code, out, err = step.finish(60)
        assert code == 0, err
        return out.strip().splitlines()

    def one(self, now: float, *args: str) -> dict:
        [line] = self.lines(now, *args)
        return json.loads(line)

    def effects(self, kind: str) -> int:
        with sqlite3.connect(self.side) as db:
            db.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, detail TEXT)")
            return db.execute("SELECT COUNT(*) FROM effects WHERE kind = ?", (kind,)).fetchone()[0]

    def race(self, now: float, *steps: tuple[str, ...], lead: float = 0.0) -> list[list[str]]:
        """Start every step in a process of its own, let them go together; their outputs.

        The first step goes ``lead`` seconds before the others (0: all at once).
        """
        race = next(self._races)
        first, rest = self.tmp_path / f"go-{race}-first", self.tmp_path / f"go-{race}-rest"
        with contextlib.ExitStack() as running:  # each killed if still running (a failed check)
            children = [
                running.enter_context(self.start(now, *step, str(first if n == 0 else rest)))
                for n, step in enumerate(steps)
            ]
            for child in children:
                line = child.stdout.readline()
                assert line == "ready\n", (line, child.finish(60)[2])
            first.touch()
            if lead:
                time.sleep(lead)
            rest.touch()
            ended = forked.communicate_all(children, timeout=60)
        outputs = []
        for code, out, err in ended:
            assert code == 0, err
            outputs.append(out.strip().splitlines())
        return outputs


@pytest.fixture(params=["sqlite", "postgres"])
def app(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        yield App(str(tmp_path / "runs.sqlite"), tmp_path)
        return
    dsn, schema = postgres_dsn(), fresh_schema()
    yield App(f"{dsn}#{schema}", tmp_path)
    import asyncio  # noqa: PLC0415 - only to drop the schema

    asyncio.run(drop_schemas([schema]))


def test_a_request_answered_at_23_hours_gets_the_answer_once_across_processes(app):
    asked = app.one(T0, "start", "approvals", "r1")
    assert (asked["status"], asked["wake_at"]) == ("awaiting_input", T0 + DAY)
    [request_id] = asked["requests"]
    assert app.lines(T0 + 23 * HOUR, "wake") == []
    done = app.one(T0 + 23 * HOUR, "answer", "r1", request_id, "yes")
    assert (done["status"], done["outputs"]) == ("completed", ["r1: yes"])
    for later in (T0 + DAY, T0 + 2 * DAY):  # its deadline went with the request
        assert app.lines(later, "wake") == []
    assert app.lines(T0 + 2 * DAY, "answer", "r1", request_id, "no") == [
        "refused: RequestAlreadyAnsweredError"
    ]
    assert app.one(T0 + 2 * DAY, "resume", "approvals", "r1")["outputs"] == ["r1: yes"]
    assert (app.effects("ticket"), app.effects("answered"), app.effects("timed out")) == (1, 1, 0)


def test_an_unanswered_request_times_out_at_24_hours_once_across_processes(app):
    [request_id] = app.one(T0, "start", "approvals", "r1")["requests"]
    assert app.lines(T0 + DAY - 1, "wake") == []
    timed_out = app.one(T0 + DAY, "wake")
    assert (timed_out["status"], timed_out["outputs"]) == ("completed", ["r1: timed out"])
    assert app.lines(T0 + 2 * DAY, "wake") == []
    assert app.one(T0 + 2 * DAY, "resume", "approvals", "r1")["outputs"] == ["r1: timed out"]
    assert app.lines(T0 + 2 * DAY, "answer", "r1", request_id, "yes") == [
        "refused: RequestExpiredError"
    ]
    assert (app.effects("ticket"), app.effects("answered"), app.effects("timed out")) == (1, 0, 1)


def test_a_deadline_and_three_answers_racing_in_separate_processes_are_decided_once(app):
    # The timer service goes first by 0 to 60 ms: either outcome may come, each must hold.
    for round_, lead in enumerate((0.0, 0.01, 0.03, 0.06)):
        run_id = f"race{round_}"
        [request_id] = app.one(T0, "start", "approvals", run_id)["requests"]
        answers = [f"answer {n}" for n in range(3)]
        woken, *answered = app.race(
            T0 + DAY,  # the deadline has just passed: a timer service and three people act
            ("wake",),
            *(("answer", run_id, request_id, answer) for answer in answers),
            lead=lead,
        )
        final = app.one(T0 + DAY, "resume", "approvals", run_id)
        assert final["status"] == "completed"
        told_ok = [json.loads(out[0]) for out in answered if not out[0].startswith("refused")]
        refusals = [out[0] for out in answered if out[0].startswith("refused")]
        if final["outputs"] == [f"{run_id}: timed out"]:
            assert told_ok == []  # nobody is told an answer counted
            assert refusals == ["refused: RequestExpiredError"] * 3
        else:
            [winner] = told_ok  # exactly one caller is told it succeeded, and it did
            assert final["outputs"] == winner["outputs"]
            assert final["outputs"][0].removeprefix(f"{run_id}: ") in answers
            assert refusals == ["refused: RequestAlreadyAnsweredError"] * 2
        assert all(json.loads(line)["run"] == run_id for line in woken)
    # Each round resolved its request once: by the deadline or by one answer.
    assert app.effects("ticket") == 4
    assert app.effects("answered") + app.effects("timed out") == 4


def test_a_continue_later_step_polls_five_times_across_five_processes(app):
    first = app.one(T0, "start", "polling", "job")
    assert (first["status"], first["wake_at"], first["polls"]) == ("waiting", T0 + 600, 1)
    assert app.lines(T0 + 599, "wake") == []  # not due: no poll
    assert app.one(T0 + 599, "resume", "polling", "job")["polls"] == 1
    steps = ["wake", "resume", "wake", "resume"]  # a timer service, or resume, in turn
    for n, step in enumerate(steps, start=2):
        now = T0 + 600 * (n - 1)
        args = ("wake",) if step == "wake" else ("resume", "polling", "job")
        moved = app.one(now, *args)
        assert moved["polls"] == n
        if n < 5:
            assert (moved["status"], moved["wake_at"]) == ("waiting", now + 600)
    assert (moved["status"], moved["outputs"]) == ("completed", ["job done after 5 polls"])
    assert app.effects("poll") == 5
    assert app.lines(T0 + DAY, "wake") == []
