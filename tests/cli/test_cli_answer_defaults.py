"""A decision is never taken by its default: an answer must say it.

A request's answer type may declare defaults (``approve: bool = False``).
An answer given as data (the command line, the HTTP API, a client, a
link) that leaves a decision out would have the default decide for the
person answering; it is refused, naming the field, and the answer schema
shows the field as required, without its default. Other fields keep
their defaults.
"""

from __future__ import annotations

import pytest
from refund_defaults_app import Refund, refund
from treadle_cli import Cli

from treadle.errors import InvalidResponseError
from treadle.stores import SqliteStore


def _asked(cli: Cli) -> tuple[str, str]:
    started = cli.json("run", "refund_defaults_app:refund", "--input", "40")
    assert started["status"] == "awaiting_input"
    return started["run_id"], started["pending_requests"][0]["request_id"]


def test_an_answer_leaving_a_decision_to_its_default_is_refused_and_the_run_waits(tmp_path):
    cli = Cli(tmp_path)
    run_id, request_id = _asked(cli)
    before = cli.snapshot()
    for answer in ("{}", '{"route": "card", "reason": "late"}'):
        done = cli("respond", run_id, request_id, answer)
        assert done.returncode == 2, done.stdout
        assert "approve: not given, and a decision is never left to its default (false)" in (
            done.stderr
        )
        assert cli.snapshot() == before
    assert "route: not given" in cli("respond", run_id, request_id, "{}").stderr
    done = cli.json("respond", run_id, request_id, '{"approve": false, "route": "card"}')
    assert done["status"] == "completed"
    assert done["outputs"] == ["False card ''"]  # the reason left out took its default


def test_the_answer_schema_shows_a_decision_required_and_without_its_default(tmp_path):
    cli = Cli(tmp_path)
    run_id, _ = _asked(cli)
    shown = cli("show", run_id).stdout
    assert "approve: boolean (required)" in shown
    assert 'route: one of "card", "voucher" (required)' in shown
    assert 'reason: string (default "")' in shown


async def test_the_python_api_refuses_the_same_data_and_takes_a_built_answer(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await refund.run(40, store=store)
        (request,) = asked.pending_requests
        with pytest.raises(InvalidResponseError, match="approve: not given"):
            await refund.respond(
                asked.run_id, {request.request_id: {"route": "voucher"}}, store=store
            )
        built = Refund()  # code that builds the answer chose its defaults itself
        done = await refund.respond(asked.run_id, {request.request_id: built}, store=store)
    finally:
        await store.close()
    assert done.outputs == ["False card ''"]
