"""Callers racing on one paused or resting run, each a process of its own, told the truth.

Pause, unpause, cancel and respond go at once from separate processes, on
SQLite and on PostgreSQL. A trigger records every change the store makes to
the run's status or pause request, in commit order; each caller's outcome
must agree with it: nobody is told a run paused after it was cancelled, a
cancel or a completion told is the run's final status, and no superstep
runs twice.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import psycopg
import pytest
from pause_app import Job, expected_acc, supersteps_logged, ticker

import forked
from postgres import drop_schemas_now, fresh_schema, postgres_dsn
from treadle import RunStatus
from treadle.stores import PostgresStore, SqliteStore

HERE = Path(__file__).parent
SCRIPT = HERE / "pause_app.py"

_SQLITE_LOG = """
CREATE TABLE IF NOT EXISTS status_log (
    n INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, status TEXT, asked INTEGER);
CREATE TRIGGER IF NOT EXISTS log_status AFTER UPDATE ON treadle_runs
WHEN NEW.status IS NOT OLD.status OR (NEW.pause_requested IS NULL) <> (OLD.pause_requested IS NULL)
BEGIN
    INSERT INTO status_log (run_id, status, asked)
    VALUES (NEW.run_id, NEW.status, NEW.pause_requested IS NOT NULL);
END;
"""

_POSTGRES_LOG = """
CREATE TABLE status_log (n BIGSERIAL PRIMARY KEY, run_id TEXT, status TEXT, asked BOOLEAN);
CREATE FUNCTION log_status() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status
        OR (NEW.pause_requested IS NULL) <> (OLD.pause_requested IS NULL) THEN
        INSERT INTO status_log (run_id, status, asked)
        VALUES (NEW.run_id, NEW.status, NEW.pause_requested IS NOT NULL);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER log_status AFTER UPDATE ON treadle_runs
FOR EACH ROW EXECUTE FUNCTION log_status();
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def backend(request, tmp_path):
    """(store spec for the script, env, a store to read with, the run's status history)."""
    if request.param == "sqlite":
        path = tmp_path / "runs.sqlite"

        def install() -> None:
            with sqlite3.connect(path) as db:
                db.executescript(_SQLITE_LOG)

        def history(run_id: str) -> list[tuple[str, bool]]:
            with sqlite3.connect(path) as db:
                rows = db.execute(
                    "SELECT status, asked FROM status_log WHERE run_id = ? ORDER BY n", (run_id,)
                ).fetchall()
            return [(status, bool(asked)) for status, asked in rows]

        yield str(path), None, lambda: SqliteStore(path), install, history
        return
    dsn, schema = postgres_dsn(), fresh_schema()

    def install_postgres() -> None:
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(f'SET search_path TO "{schema}"')
            db.execute(_POSTGRES_LOG)

    def postgres_history(run_id: str) -> list[tuple[str, bool]]:
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(f'SET search_path TO "{schema}"')
            found = db.execute(
                "SELECT status, asked FROM status_log WHERE run_id = %s ORDER BY n", (run_id,)
            )
            return [(status, bool(asked)) for status, asked in found.fetchall()]

    env = {**os.environ, "PAUSE_SCHEMA": schema}
    yield (
        dsn,
        env,
        lambda: PostgresStore(dsn, schema=schema),
        install_postgres,
        postgres_history,
    )
    drop_schemas_now([schema])


def race(commands: list[list[str]], go: Path, env: dict[str, str] | None) -> list[dict]:
    """Start every caller, wait until each is ready, let them go at once; their JSON lines."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(HERE)}
    with contextlib.ExitStack() as running:  # each killed if still running (a failed check)
        children = [
            running.enter_context(
                # A process of its own, forked with treadle imported (tests/forked.py).
                forked.start("pause_app:cli", env=env, cwd=HERE, argv=[str(SCRIPT), *command])
            )
            for command in commands
        ]
        return forked.let_go_together(children, go, timeout=90)


class Truth:
    """What the store did to one run, in order: to hold each caller's outcome against.

    ``history`` is every change of the run's status or of its pause request,
    in the order committed; ``start`` is where the run stood before the race.
    """

    def __init__(self, start: str, history: list[tuple[str, bool]], final: str) -> None:
        self.statuses = [start, *(status for status, _ in history)]
        self.asked = any(asked for _, asked in history)  # a pause was asked of an owner
        self.final = final
        assert self.statuses[-1] == final

    def seen(self, status: str) -> int | None:
        return self.statuses.index(status) if status in self.statuses else None

    def pause(self, told: str) -> None:
        if told == "paused":  # paused then: so before any cancel
            assert self.seen("paused") is not None, self.statuses
            cancelled = self.seen("cancelled")
            assert cancelled is None or self.seen("paused") < cancelled, self.statuses
        else:  # asked of an owner: the request is in the history
            assert (told, self.asked) == ("requested", True)

    def unpause(self, told: str) -> None:
        assert self.seen("paused") is not None, self.statuses
        if told == "completed":
            assert self.final == "completed"
        elif told == "paused":  # paused again, by a pause asked as it went on
            assert self.asked
        else:  # it went on to rest: no answer had come
            assert told == "awaiting_input"

    def respond(self, told: str) -> None:
        if told == "completed":
            assert self.final == "completed"
        else:  # kept for later: the run was paused when it looked
            assert told == "paused"
            assert self.seen("paused") is not None, self.statuses

    def cancel(self, told: str) -> None:
        assert (told, self.final) == ("cancelled", "cancelled")

    def refused(self, command: str, kind: str, message: str) -> None:
        if "has ended (" in message:  # the run had ended by then: which way
            assert message.split("has ended (")[1].split(")", maxsplit=1)[0] == self.final, message
        elif kind == "RunCancelledError":
            assert self.final == "cancelled", message
        elif kind == "RequestError":  # unpause of a run that was not paused then
            assert command == "unpause", message
            status = message.split("is not paused (")[1].split(")", maxsplit=1)[0]
            assert status in self.statuses, (message, self.statuses)
        else:
            assert kind in {"RunBusyError", "RunPausedError", "RequestAlreadyAnsweredError"}


def check_told_the_truth(
    told: dict[str, dict], start: str, history: list[tuple[str, bool]], final: str
) -> None:
    """Each caller's outcome against the order in which the store changed the run."""
    truth = Truth(start, history, final)
    for caller, outcome in told.items():
        command = caller.split("-")[0]
        if "error" in outcome:
            truth.refused(command, outcome["error"], outcome["message"])
        else:
            getattr(truth, command)(outcome["ok"])


ROUNDS = (
    ("pause", "pause", "unpause", "cancel", "respond"),
    ("pause", "unpause", "respond", "pause", "unpause"),
    ("respond", "pause", "unpause", "pause", "cancel"),
)
"""Who races in each round: every caller its own process."""


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.parametrize("start", ["awaiting_input", "paused"])
async def test_racing_pause_unpause_cancel_and_respond_processes_are_each_told_the_truth(
    tmp_path, backend, start
):
    spec, env, reader, install, history = backend
    log = tmp_path / "ticks.log"
    store = reader()
    try:
        await store.list_runs(limit=1)  # the store has its tables
        install()
        # Cancel is quick and final: a round without it shows pause, unpause and respond.
        for round_, racers in enumerate(ROUNDS):
            run_id = f"race-{round_}"
            asked = await ticker.run(
                Job(4, 0.01, str(log), ask=True), run_id=run_id, store=store, record_events=False
            )
            (request,) = asked.pending_requests
            if start == "paused":
                await ticker.pause(run_id, store=store)
            before = len(history(run_id))
            go = tmp_path / f"{run_id}.go"
            arguments = {"respond": [request.request_id, "yes"]}
            callers = {
                f"{name}-{n}": [name, spec, run_id, str(go), *arguments.get(name, [])]
                for n, name in enumerate(racers)
            }
            told = dict(zip(callers, race(list(callers.values()), go, env), strict=True))
            final = (await store.get_run(run_id)).status
            check_told_the_truth(told, start, history(run_id)[before:], final)
            # Whatever happened, no superstep ran twice, and the history is one chain.
            counted = supersteps_logged(log, run_id)
            assert set(counted.values()) <= {1}, counted
            checkpoints = (await ticker.history(run_id, store=store)).checkpoints
            supersteps = [c.superstep for c in checkpoints]
            assert supersteps == sorted(set(supersteps)), supersteps
            if final != "completed":  # a run that did not end goes on to the same end
                if final == "paused":
                    await store.unpause(run_id)
                if final != "cancelled":
                    ended = await ticker.resume(run_id, store=store, record_events=False)
                    if ended.status is RunStatus.AWAITING_INPUT:
                        ended = await ticker.respond(
                            run_id, {request.request_id: "yes"}, store=store
                        )
                    assert ended.status is RunStatus.COMPLETED
            if (await store.get_run(run_id)).status == "completed":
                result = await ticker.resume(run_id, store=store)
                assert result.outputs == [{"ticks": 4, "acc": expected_acc(4, len("yes"))}]
                assert set(supersteps_logged(log, run_id).values()) == {1}
    finally:
        await store.close()
