"""Every store backend behind one fixture, so one suite holds them all to one behaviour.

A backend is a factory taking a scratch directory and the store-wide
``keep_last``. PostgreSQL is marked ``integration``: it needs a server, found
by ``postgres.postgres_dsn``, and each of its stores gets a fresh schema of its
own, dropped after the test. ``make_model`` gives the reference the property test
compares every backend against.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING

import pytest

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle._exceptions import CheckpointNotFoundError, RunExistsError, RunNotFoundError
from treadle._stores._memory import MemoryStore
from treadle._stores._sqlite import SqliteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from treadle._stores._store import Store

    StoreFactory = Callable[..., Store]

_files = itertools.count()


def _memory(directory: Path, keep_last: int | None) -> Store:
    return MemoryStore(keep_last=keep_last)


def _sqlite(directory: Path, keep_last: int | None) -> Store:
    return SqliteStore(directory / f"store-{next(_files)}.sqlite", keep_last=keep_last)


def _postgres(directory: Path, keep_last: int | None) -> Store:
    from treadle.stores import PostgresStore  # noqa: PLC0415 - psycopg only when used

    return PostgresStore(postgres_dsn(), keep_last=keep_last, schema=fresh_schema())


BACKENDS: dict[str, Callable[[Path, int | None], Store]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}
BACKEND_PARAMS = [
    pytest.param(name, id=name, marks=[pytest.mark.integration] if name == "postgres" else [])
    for name in BACKENDS
]


def on_backends(*names: str) -> pytest.MarkDecorator:
    """Run a ``make_store`` (or ``store``) test on these backends only.

    For a property test whose budget of examples differs by backend: PostgreSQL
    pays a server round trip per call and a schema per example, so its default
    budget is smaller, and its full one runs under ``make soak``.
    """
    chosen = [param for param in BACKEND_PARAMS if param.values[0] in names]
    return pytest.mark.parametrize("make_store", chosen, indirect=True)


@pytest.fixture(params=BACKEND_PARAMS)
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of fresh, empty stores of one backend; each is closed after the test."""
    made: list[Store] = []
    if request.param == "postgres":
        postgres_dsn()  # skip before the test starts, not in the middle of it

    def make(*, keep_last: int | None = None) -> Store:
        store = BACKENDS[request.param](tmp_path, keep_last)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()
    await drop_schemas([schema for store in made if (schema := getattr(store, "schema", None))])


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    """A fresh, empty store of each backend in turn."""
    return make_store()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """One SQLite store on a file of the test's own, closed after it."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    yield store
    await store.close()


@pytest.fixture
def make_model() -> type[Model]:
    """The store protocol as a plain model: ``make_model(keep_last)``."""
    return Model


class Model:
    """The protocol in the plainest terms: lists and linear scans."""

    def __init__(self, keep_last):
        self.keep_last = keep_last
        self.runs = {}  # run id -> RunRecord, in creation order
        self.graphs = {}
        self.commits = {}  # run id -> [CheckpointRecord], in commit order

    def _run(self, run_id):
        if run_id not in self.runs:
            raise RunNotFoundError(run_id)
        return self.runs[run_id]

    def _check_free(self, checkpoint_id):
        if any(r.info.checkpoint_id == checkpoint_id for rs in self.commits.values() for r in rs):
            raise ValueError(checkpoint_id)

    def create_run(self, run, graph, first):
        if run.run_id in self.runs:
            raise RunExistsError(run.run_id)
        self._check_free(first.info.checkpoint_id)
        parent = run.parent_run_id  # a fork of a run that is gone (itself is there once made)
        if parent is not None and parent not in self.runs and parent != run.run_id:
            raise RunNotFoundError(parent)
        self.runs[run.run_id] = dataclasses.replace(
            run, checkpoint_id=first.info.checkpoint_id, wake_at=first.info.wake_at
        )
        self.graphs[run.run_id], self.commits[run.run_id] = graph, [first]

    def commit(self, record, keep_last=None):
        info, run = record.info, self._run(record.info.run_id)
        self._check_free(info.checkpoint_id)
        self.commits[info.run_id].append(record)
        self.runs[info.run_id] = dataclasses.replace(
            run,
            status=info.status,
            superstep=info.superstep,
            checkpoint_id=info.checkpoint_id,
            updated_at=info.created_at,
            wake_at=info.wake_at,
            error=None,
        )
        keep = self.keep_last if keep_last is None else keep_last
        if keep is not None:
            self.prune(info.run_id, keep)

    def commit_many(self, records, keep_last=None):
        if not records:
            raise ValueError("none")
        if len({r.info.run_id for r in records}) > 1:
            raise ValueError("several runs")
        if len({r.info.checkpoint_id for r in records}) < len(records):
            raise ValueError("an id twice")
        if keep_last is not None and keep_last < 1:
            raise ValueError(keep_last)
        self._run(records[0].info.run_id)
        for record in records:  # all or none
            self._check_free(record.info.checkpoint_id)
        for record in records:
            self.commit(record, keep_last=keep_last)
        return False  # without a lease, no pause is honoured: the commit never pauses the run

    def set_status(self, run_id, status, error=None):
        self.runs[run_id] = dataclasses.replace(self._run(run_id), status=status, error=error)

    def get_run(self, run_id):
        return self._run(run_id)

    def get_graph(self, run_id):
        self._run(run_id)
        return self.graphs[run_id]

    def load_checkpoint(self, run_id, checkpoint_id=None):
        latest = self._run(run_id).checkpoint_id
        wanted = latest if checkpoint_id is None else checkpoint_id
        found = [r for r in self.commits[run_id] if r.info.checkpoint_id == wanted]
        if not found:
            raise CheckpointNotFoundError(run_id, checkpoint_id)
        return found[0]

    def list_checkpoints(self, run_id):
        self._run(run_id)
        order = sorted(
            enumerate(self.commits[run_id]),
            key=lambda pair: (pair[1].info.superstep, pair[1].info.created_at, pair[0]),
        )
        return [record.info for _, record in order]

    def list_runs(self, status=None, workflow=None, parent_run_id=None, limit=None):
        pairs = sorted(enumerate(self.runs.values()), key=lambda p: (p[1].created_at, p[0]))
        found = [
            run
            for _, run in reversed(pairs)
            if status in {None, run.status}
            and workflow in {None, run.workflow}
            and parent_run_id in {None, run.parent_run_id}
        ]
        return found[slice(limit)]

    def due_runs(self, now, limit=None):
        def due(run):
            return [t for t in (run.wake_at, run.deadline_at) if t is not None and t <= now]

        found = [
            run
            for run in self.runs.values()  # in creation order, which breaks ties
            if run.status in {"waiting", "awaiting_input"} and due(run)
        ]
        return sorted(found, key=lambda run: min(due(run)))[slice(limit)]

    def prune(self, run_id, keep_last):
        latest, records = self._run(run_id).checkpoint_id, self.commits[run_id]
        self.commits[run_id] = [
            r
            for n, r in enumerate(records)
            if n >= len(records) - keep_last or r.info.checkpoint_id == latest
        ]
        return len(records) - len(self.commits[run_id])
