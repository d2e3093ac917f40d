"""Who may answer a fork's request, where the door has no code of the run's workflow.

A fork's log starts with ``run_forked``: the ``request`` events of the
requests it inherits (with their ``approvers`` and ``four_eyes``) are in
its parent's log. A door that checks an answer from the log alone (the
workers' client, and so ``treadle respond`` on PostgreSQL, when the run's
workflow does not import there) must still find who may answer, not let
anyone through.
"""

from __future__ import annotations

import importlib
import sys
import uuid

import pytest
from treadle_cli import Cli

from postgres import drop_schemas, fresh_schema, postgres_dsn
from treadle._values._actors import Actor, Role
from treadle.errors import ActionRefusedError
from treadle.stores import PostgresStore
from treadle.workers import Client

_APP = """
from dataclasses import dataclass
from typing import Any
from treadle import WorkflowBuilder, WorkflowContext, executor

@dataclass(frozen=True)
class Verdict:
    approve: bool

@executor
async def ask(rules: dict[str, Any], ctx: WorkflowContext) -> None:
    verdict = await ctx.request({"q": "pay?"}, Verdict, approvers=rules["approvers"])
    ctx.yield_output(verdict.approve)

inbox = WorkflowBuilder(ask, name="gone_inbox").register_type(Verdict).build()
"""


@pytest.fixture
async def pg(tmp_path):
    schema = fresh_schema()
    store = PostgresStore(postgres_dsn(), schema=schema)
    try:
        yield store, schema
    finally:
        await store.close()
        await drop_schemas([schema])


async def _forked_request(store, tmp_path) -> tuple[str, str, str]:
    """A run asking maria, and a fork of it; then its code is gone from this process."""
    folder = tmp_path / "gone"
    folder.mkdir()
    name = f"gone_app_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(_APP)
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(name)
        asked = await module.inbox.run({"approvers": ["maria"]}, store=store, run_id="parent")
        (request,) = asked.pending_requests
        checkpoint = (await store.list_checkpoints("parent"))[-1].checkpoint_id
        fork_id = await module.inbox.fork("parent", checkpoint, store=store)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)
        (folder / f"{name}.py").unlink()
    return "parent", fork_id, request.request_id


async def test_the_client_without_code_refuses_a_non_approver_on_a_fork(pg, tmp_path):
    store, _ = pg
    parent, fork_id, request_id = await _forked_request(store, tmp_path)
    bob = Client(store, [], actor=Actor("user", "bob", "api", Role.APPROVER))
    with pytest.raises(ActionRefusedError, match="only maria may"):
        await bob.respond(parent, {request_id: {"approve": True}})
    with pytest.raises(ActionRefusedError, match="only maria may"):
        await bob.respond(fork_id, {request_id: {"approve": True}})
    assert await store.answer_of(fork_id, request_id) is None
    assert [e.action for e in await store.read_audit(fork_id)] == ["run_forked"]


async def test_treadle_respond_on_postgres_refuses_a_non_approver_on_a_fork(pg, tmp_path):
    store, schema = pg
    _, fork_id, request_id = await _forked_request(store, tmp_path)
    cli = Cli(tmp_path, TREADLE_STORE=postgres_dsn(), TREADLE_SCHEMA=schema)
    done = cli("respond", fork_id, request_id, '{"approve": true}')
    assert done.returncode != 0, done.stdout
    assert "only maria may" in done.stderr, done.stderr
    assert await store.answer_of(fork_id, request_id) is None


async def test_treadle_show_without_code_lists_what_a_fork_inherited_and_asks(pg, tmp_path):
    # The fork waits on its parent's request: without the code, `treadle show` reads it
    # from the log that asked it (the parent's), as the answer's check does.
    store, schema = pg
    parent, fork_id, request_id = await _forked_request(store, tmp_path)
    cli = Cli(tmp_path, TREADLE_STORE=postgres_dsn(), TREADLE_SCHEMA=schema)
    for run_id in (parent, fork_id):
        shown = cli.json("show", run_id)
        assert [r["request_id"] for r in shown["pending_requests"]] == [request_id], shown
    maria = Client(store, [], actor=Actor("user", "maria", "api", Role.APPROVER))
    await maria.respond(fork_id, {request_id: {"approve": True}})
    assert cli.json("show", fork_id)["pending_requests"] == []  # answered: listed no more
    assert [(r["request_id"]) for r in cli.json("show", parent)["pending_requests"]] == [
        request_id
    ]  # the parent's own is still open
