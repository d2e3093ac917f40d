"""Start policies under races: starters as separate processes, on one SQLite file and PostgreSQL.

Eight starters are let go at once (a file they all wait for). Whatever
order the store takes them in, each policy holds: one deduplication id
makes one run and every starter is told its id; a singleton never has two
runs of its key at once and the ones that waited all run; debounce starts
one run, with the input the store kept last; a queue of concurrency 2
never has three at once. Handlers log when they begin and end; a trigger
logs each input the debounced run was given, in commit order. What waited
is started by a separate serving process (a ``Runtime``; on PostgreSQL a
``treadle worker`` too).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

import forked
from postgres import drop_schemas_now, fresh_schema, postgres_dsn

# Eight processes racing, and a server: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).parent
SCRIPT = HERE / "start_race_app.py"
STARTERS = 8
DEADLINE = 120.0  # seconds for every queued run to be served, on a loaded machine

_SQLITE_INPUTS = """
CREATE TABLE IF NOT EXISTS input_log (n INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, payload);
CREATE TRIGGER IF NOT EXISTS log_new_input AFTER INSERT ON treadle_inbox WHEN NEW.kind = 'start'
BEGIN INSERT INTO input_log (run_id, payload) VALUES (NEW.run_id, NEW.payload); END;
CREATE TRIGGER IF NOT EXISTS log_input AFTER UPDATE OF payload ON treadle_inbox
BEGIN INSERT INTO input_log (run_id, payload) VALUES (NEW.run_id, NEW.payload); END;
"""

_POSTGRES_INPUTS = """
CREATE TABLE input_log (n BIGSERIAL PRIMARY KEY, run_id TEXT, payload BYTEA);
CREATE FUNCTION log_input() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF NEW.kind = 'start' THEN
        INSERT INTO input_log (run_id, payload) VALUES (NEW.run_id, NEW.payload);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER log_input AFTER INSERT OR UPDATE OF payload ON treadle_inbox
FOR EACH ROW EXECUTE FUNCTION log_input();
"""


class Backend:
    """One store for the processes: its spec, their environment, and SQL on it for the test."""

    def __init__(
        self, spec: str, env: dict[str, str], log: Path, schema: str | None = None
    ) -> None:
        self.spec, self.env, self.log, self.schema = spec, env, log, schema

    def sql(self, statement: str, *, script: bool = False) -> list[tuple]:
        if self.schema is None:
            with sqlite3.connect(self.spec) as db:
                if script:
                    db.executescript(statement)
                    return []
                return db.execute(statement).fetchall()
        with psycopg.connect(self.spec, autocommit=True) as db:
            db.execute(f'SET search_path TO "{self.schema}"')
            found = db.execute(statement)
            return found.fetchall() if found.description else []

    def prepare(self) -> None:
        """Make the tables (a process opening the store would), and the input log."""
        opened = self.script("open", self.spec)
        assert opened.returncode == 0, opened.stderr
        self.sql(_SQLITE_INPUTS if self.schema is None else _POSTGRES_INPUTS, script=True)

    def spawn(
        self, *arguments: str, lease: float | None = None, stderr: Path | None = None
    ) -> forked.Forked:
        """``start_race_app.py arguments`` in a process forked with treadle imported (forked.py)."""
        env = self.env if lease is None else {**self.env, "START_LEASE": str(lease)}
        argv = [str(SCRIPT), *arguments]
        return forked.start("start_race_app:cli", env=env, cwd=HERE, argv=argv, stderr=stderr)

    def script(self, *arguments: str, lease: float | None = None) -> subprocess.CompletedProcess:
        with self.spawn(*arguments, lease=lease) as child:
            return subprocess.CompletedProcess(arguments, *child.finish(90))


def _postgres(env: dict[str, str], log: Path):
    dsn, schema = postgres_dsn(), fresh_schema()
    store = Backend(dsn, {**env, "START_SCHEMA": schema}, log, schema)
    store.prepare()
    return store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def backend(request, tmp_path):
    """One SQLite file, or a PostgreSQL schema of the test's own."""
    log = tmp_path / "handlers.log"
    env = {**os.environ, "START_LOG": str(log), "PYTHONPATH": str(HERE)}
    if request.param == "sqlite":
        store = Backend(str(tmp_path / "runs.sqlite"), env, log)
        store.prepare()
        yield store
        return
    store = _postgres(env, log)
    yield store
    drop_schemas_now([store.schema])


@pytest.fixture
def postgres(tmp_path):
    """A PostgreSQL schema of the test's own, for what ``treadle worker`` serves."""
    log = tmp_path / "handlers.log"
    store = _postgres({**os.environ, "START_LOG": str(log), "PYTHONPATH": str(HERE)}, log)
    yield store
    drop_schemas_now([store.schema])


def race(backend: Backend, starts: list[tuple[str, str, int, str]], go: Path) -> list[dict]:
    """Start every starter, wait until each is ready, let them go at once; what each was told."""
    with contextlib.ExitStack() as running:  # each killed if still running (a failed check)
        children = [
            running.enter_context(
                backend.spawn("start", backend.spec, name, key, str(n), dedup, str(go))
            )
            for name, key, n, dedup in starts
        ]
        return forked.let_go_together(children, go, timeout=90)


class Serving:
    """A process serving the store (``runtime`` or ``worker``) for the block's duration."""

    def __init__(self, backend: Backend, kind: str) -> None:
        self.backend, self.kind = backend, kind

    def __enter__(self) -> Serving:
        # Its stderr to a file: a pipe nobody reads until it dies could fill and stop it.
        self.errors = self.backend.log.with_name(f"{self.kind}.err")
        self.process = self.backend.spawn("serve", self.backend.spec, self.kind, stderr=self.errors)
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.__exit__()  # killed, reaped, its pipes closed

    def until(self, condition, what: str) -> None:
        """Poll ``condition`` until it holds; fail if the server died or the deadline passed."""
        deadline = time.monotonic() + DEADLINE
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"the {self.kind} died: {self.errors.read_text()}")
            assert time.monotonic() < deadline, f"{what}: not within {DEADLINE} s"
            time.sleep(0.1)


def statuses(backend: Backend, workflow: str) -> dict[str, str]:
    rows = backend.sql(f"SELECT run_id, status FROM treadle_runs WHERE workflow = '{workflow}'")  # noqa: S608 - a test's constant
    return dict(rows)


def handler_spans(backend: Backend) -> list[tuple[float, float, int, str]]:
    """(begin, end, n, key) of every handler call, from the handlers' log."""
    begun: dict[int, float] = {}
    spans = []
    for line in backend.log.read_text().splitlines():
        entry = json.loads(line)
        if entry["edge"] == "begin":
            begun[entry["n"]] = entry["at"]
        else:
            spans.append((begun.pop(entry["n"]), entry["at"], entry["n"], entry["key"]))
    assert begun == {}, f"handlers that never ended: {begun}"
    return sorted(spans)


def most_at_once(spans: list[tuple[float, float, int, str]]) -> int:
    edges = sorted([(begin, 1) for begin, *_ in spans] + [(end, -1) for _, end, *_ in spans])
    running = peak = 0
    for _, step in edges:  # an end at the very time of a begin sorts first: no overlap
        running += step
        peak = max(peak, running)
    return peak


def test_eight_starters_with_one_deduplication_id_make_one_run(backend, tmp_path):
    starts = [("dedup", "k", n, "order-42") for n in range(STARTERS)]
    told = race(backend, starts, tmp_path / "go")
    (run_id,) = {answer["run_id"] for answer in told}
    assert statuses(backend, "dedup") == {run_id: "completed"}
    assert [answer["deduplicated"] for answer in told].count(False) == 1  # the one that ran it
    assert len(handler_spans(backend)) == 1
    (started_by,) = backend.sql(f"SELECT started_by FROM treadle_runs WHERE run_id = '{run_id}'")  # noqa: S608
    assert started_by[0] is not None


def singleton_race(backend: Backend, server: str, go: Path) -> None:
    starts = [("singleton", "acme", n, "-") for n in range(STARTERS)]
    with Serving(backend, server) as serving:
        told = race(backend, starts, go)
        assert len({answer["run_id"] for answer in told}) == STARTERS
        assert {answer["status"] for answer in told} <= {"completed", "queued"}
        serving.until(
            lambda: set(statuses(backend, "singleton").values()) == {"completed"},
            "every queued run completed",
        )
    spans = handler_spans(backend)
    assert sorted(n for *_, n, _ in spans) == list(range(STARTERS))  # each ran, once
    assert most_at_once(spans) == 1, spans


def test_a_singleton_never_runs_two_of_its_key_at_once_and_runs_every_one(backend, tmp_path):
    singleton_race(backend, "runtime", tmp_path / "go")


@pytest.mark.integration
def test_workers_start_a_singletons_queue_one_at_a_time(postgres, tmp_path):
    singleton_race(postgres, "worker", tmp_path / "go")


def test_a_queue_of_concurrency_two_never_runs_three(backend, tmp_path):
    starts = [("queue", f"k{n}", n, "-") for n in range(STARTERS)]
    with Serving(backend, "runtime") as serving:
        race(backend, starts, tmp_path / "go")
        serving.until(
            lambda: set(statuses(backend, "queue").values()) == {"completed"},
            "every queued run completed",
        )
    spans = handler_spans(backend)
    assert sorted(n for *_, n, _ in spans) == list(range(STARTERS))
    assert most_at_once(spans) <= 2, spans


def test_debounce_starts_one_run_with_the_input_kept_last(backend, tmp_path):
    starts = [("debounce", "acme", n, "-") for n in range(STARTERS)]
    with Serving(backend, "runtime") as serving:
        told = race(backend, starts, tmp_path / "go")
        (run_id,) = {answer["run_id"] for answer in told}
        assert {answer["status"] for answer in told} == {"queued"}
        serving.until(
            lambda: statuses(backend, "debounce") == {run_id: "completed"}, "the debounced run"
        )
    inputs = backend.sql("SELECT run_id, payload FROM input_log ORDER BY n")
    assert {row[0] for row in inputs} == {run_id}
    assert len(inputs) == STARTERS  # each starter's input, once, in the order the store took them
    last = json.loads(bytes(inputs[-1][1]))["v"]  # a Task, as the starters' serializer wrote it
    ((*_, n, key),) = handler_spans(backend)
    assert (key, n) == ("acme", last["n"])


def test_a_start_admitted_to_a_process_that_died_is_started_by_the_service(backend):
    told = backend.script("admit-and-die", backend.spec, "singleton", "acme", "7", lease=1.0)
    assert told.returncode == -signal.SIGKILL, told.stderr  # admitted, then killed
    admission = json.loads(told.stdout.strip().splitlines()[-1])
    assert admission == {"run_id": "left-7", "outcome": "started"}
    assert statuses(backend, "singleton") == {"left-7": "pending"}
    with Serving(backend, "runtime") as serving:
        serving.until(
            lambda: statuses(backend, "singleton") == {"left-7": "completed"},
            "the admitted run started once its starter's lease ran out",
        )
    assert [n for *_, n, _ in handler_spans(backend)] == [7]
