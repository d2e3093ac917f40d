"""Answerers racing, as separate processes, for a request an unfit answer holds.

An answer delivered unchecked that does not fit holds the request; each
checked ``respond`` then takes the free run over to refuse it on the record
before delivering its own (``docs/semantics.md``). With four answerers let go
at once, on one SQLite file and on PostgreSQL: the unfit answer is refused
once, exactly one answer is applied and its answerer is told the run's
outputs, every other answerer is refused (another answer won, or the run
was busy with the winner), and nobody is told of an outcome the store does
not hold.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from unfit_answer_race_app import asker

import forked
from postgres import drop_schemas_now, fresh_schema, postgres_dsn
from treadle.stores import PostgresStore, SqliteStore

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).parent
ANSWERERS = 4


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def backend(request, tmp_path):
    """(spec, environment, schema) of one SQLite file or a PostgreSQL schema of the test's own."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    if request.param == "sqlite":
        yield str(tmp_path / "runs.sqlite"), env, None
        return
    schema = fresh_schema()
    yield postgres_dsn(), {**env, "RACE_SCHEMA": schema}, schema
    drop_schemas_now([schema])


async def test_one_answer_wins_after_the_unfit_one_is_refused_once(backend, tmp_path):
    spec, env, schema = backend
    store = SqliteStore(spec) if schema is None else PostgresStore(spec, schema=schema)
    try:
        asked = await asker.run(1, store=store, run_id="held")
        (request,) = asked.pending_requests
        row = await store.get_run("held")
        await store.deliver(
            "held", [("answer", request.request_id, b'"seven"')], version=row.version
        )
    finally:
        await store.close()

    go = tmp_path / "go"
    with contextlib.ExitStack() as running:
        children = [
            running.enter_context(
                forked.start(
                    "unfit_answer_race_app:cli",
                    env=env,
                    cwd=HERE,
                    argv=[
                        "unfit_answer_race_app.py",
                        "respond",
                        spec,
                        "held",
                        request.request_id,
                        str(n),
                        str(go),
                    ],
                )
            )
            for n in range(10, 10 + ANSWERERS)
        ]
        told = forked.let_go_together(children, go, timeout=120)

    store = SqliteStore(spec) if schema is None else PostgresStore(spec, schema=schema)
    try:
        row = await store.get_run("held")
        audit = [e.action for e in await store.read_audit("held")]
        answered = [e for e in await store.read_events("held") if e.kind == "request_answered"]
        result = await asker.resume("held", store=store)  # final: its result, nothing run
    finally:
        await store.close()
    winners = [t for t in told if "outputs" in t]
    assert len(winners) == 1, told
    (winner,) = winners
    assert row.status == "completed"
    assert result.outputs == winner["outputs"] == [1 + winner["n"]]
    losers = [t for t in told if "error" in t]
    assert {t["error"] for t in losers} <= {"RequestAlreadyAnsweredError", "RunBusyError"}, told
    assert audit.count("inbox_refused") == 1
    assert audit.count("request_answered") == 1
    assert len(answered) == 1
