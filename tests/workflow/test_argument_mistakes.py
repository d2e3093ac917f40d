"""The mistakes a new user makes calling the Python API: refused at the call, naming the argument.

A path given where a store goes, a run id that is not text (or that the HTTP
API and the command line could not name), answers given as a list: each
used to be taken and fail far from the call, as an ``AttributeError`` from
inside treadle, or to make a run no other door could reach.
"""

from __future__ import annotations

import pytest

from treadle import Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.workers import Client


@executor(id="ask")
async def ask(n: int, ctx: WorkflowContext) -> None:
    ctx.yield_output(await ctx.request({"n": n}, bool))


asking = WorkflowBuilder(ask, name="asking").build()


async def test_a_path_where_a_store_goes_is_refused_naming_the_store_to_make(tmp_path):
    path = str(tmp_path / "runs.sqlite")
    hint = rf"got str: for this one, pass SqliteStore\('{path}'\)"
    with pytest.raises(TypeError, match=hint):
        WorkflowBuilder(ask, store=path)
    with pytest.raises(TypeError, match=hint):
        await asking.run(1, store=path)
    with pytest.raises(TypeError, match="pass PostgresStore"):
        Runtime("postgresql://127.0.0.1/test", [asking])
    with pytest.raises(TypeError, match="got int"):
        await asking.respond("r1", {"req": True}, store=5)
    assert not (tmp_path / "runs.sqlite").exists()  # nothing was made of it


@pytest.mark.parametrize(
    ("run_id", "error", "says"),
    [
        (123, TypeError, "run_id must be a str, got int: 123"),
        ("a b", ValueError, "run_id 'a b' must be 1 to 200 letters, digits or"),
        ("a/b", ValueError, "must be 1 to 200"),
        ("", ValueError, "must be 1 to 200"),
        ("x" * 201, ValueError, r"\.\.\. \(201 chars\) must be 1 to 200"),
        # Path segments a browser or HTTP client resolves away, and an option's look.
        (".", ValueError, "not starting with - and not . or .."),
        ("..", ValueError, "not starting with - and not . or .."),
        ("-x", ValueError, "not starting with - and not . or .."),
    ],
)
async def test_a_run_id_every_door_could_not_name_is_refused_and_nothing_stored(
    sqlite_store, run_id, error, says
):
    with pytest.raises(error, match=says):
        await asking.run(1, run_id=run_id, store=sqlite_store)
    client = Client(sqlite_store, [asking])
    with pytest.raises(error, match=says):
        await client.start(asking, 1, run_id=run_id)
    assert await sqlite_store.list_runs() == []
    fine = await asking.run(1, run_id="a.b_c~d:e@f+g-1", store=sqlite_store)
    assert fine.run_id == "a.b_c~d:e@f+g-1"


@pytest.mark.parametrize("answers", [["req", True], "req", ("req", True)])
async def test_answers_not_given_as_a_mapping_are_refused_and_nothing_delivered(
    sqlite_store, answers
):
    asked = await asking.run(1, store=sqlite_store)
    with pytest.raises(TypeError, match=r"responses must map request ids to answers"):
        await asking.respond(asked.run_id, answers, store=sqlite_store)
    with pytest.raises(TypeError, match=r"responses must map request ids to answers"):
        await Client(sqlite_store, [asking]).respond(asked.run_id, answers)
    assert await sqlite_store.inbox(asked.run_id) == []


async def test_a_run_queued_before_ids_were_checked_still_starts(sqlite_store):
    # A start queued (by an older client) under an id the rule now refuses is the store's
    # already: whoever serves the store starts it, rather than failing it on its id.
    from treadle import Runtime  # noqa: PLC0415
    from treadle._stores._starts import StartRequest  # noqa: PLC0415

    @executor(id="echo")
    async def echo(n: int, ctx: WorkflowContext) -> None:
        ctx.yield_output(n)

    echoing = WorkflowBuilder(echo, name="echoing").build()
    queued = StartRequest("old id", "echoing", echoing.version, echoing.serializer.dumps(7))
    assert (await sqlite_store.admit(queued)).outcome == "started"
    (done,) = await Runtime(sqlite_store, [echoing]).wake_due()
    assert (done.run_id, done.status.value, done.outputs) == ("old id", "completed", [7])
