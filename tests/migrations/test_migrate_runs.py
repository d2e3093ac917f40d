"""`treadle migrate`: parked runs move from version 1 to version 2, dry run first, exactly once.

The runs are made through the public API on a real store (a SQLite file, or
PostgreSQL in a schema of its own) and moved by real ``treadle migrate``
processes (racers forked with the command line imported, ``tests/forked.py``);
moved runs are then answered with version 2's code and finish
on it. Must-show 2 of issue 19: a migration renaming an executor and adding
a state key moves 1,000 parked runs (200 in the default suite, 1,000
under ``make soak``); ``--dry-run`` first reports exactly the runs it then
moves; a run that cannot move is named with its reason and left untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

import migrate_app
import pytest
from migrate_app import Decision, intake, intake_v1

import forked
from cli.treadle_cli import Cli
from postgres import drop_schemas, fresh_schema, postgres_dsn
from server.conftest import ServeProcess
from treadle import RunStatus
from treadle.errors import GraphChangedError, MigrationError, VersionMismatchError
from treadle.stores import MemoryStore, PostgresStore, SqliteStore
from treadle.versions import CheckpointContents, migrate, migration

HERE = Path(__file__).parent


async def park(store, count: int, *, prefix: str = "r") -> dict[str, str]:
    """``count`` runs of version 1 resting on their question; their request ids by run."""
    asked = {}
    for n in range(count):
        result = await intake_v1.run(f"draft {n}", run_id=f"{prefix}{n:04d}", store=store)
        assert result.status is RunStatus.AWAITING_INPUT
        (request,) = result.pending_requests
        asked[result.run_id] = request.request_id
    return asked


def rows_of(db: Path) -> list[tuple]:
    import sqlite3  # noqa: PLC0415

    with sqlite3.connect(db) as connection:
        return connection.execute(
            "SELECT run_id, version, checkpoint_id, status, parked"
            " FROM treadle_runs ORDER BY run_id"
        ).fetchall()


def migrate_cli(cli: Cli, *extra: str) -> dict:
    done = cli("migrate", "--app", "migrate_app", "--from", "1", "--to", "2", "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


# Parking and moving cost about a millisecond of CPU per run each (not the product's
# slowness): 200 runs in the default suite, the 1,000 under `make soak`.
@pytest.mark.integration
@pytest.mark.parametrize("count", [200, pytest.param(1000, marks=pytest.mark.soak)])
async def test_parked_runs_move_the_dry_run_names_exactly_them(tmp_path, count):
    cli = Cli(tmp_path, PYTHONPATH=str(HERE))
    store = SqliteStore(cli.db)
    try:
        asked = await park(store, count)
        stuck = await intake_v1.run("stuck", run_id="stuck", store=store)
        (stuck_request,) = stuck.pending_requests
    finally:
        await store.close()
    before = rows_of(cli.db)

    dry = migrate_cli(cli, "--dry-run")
    assert rows_of(cli.db) == before  # a dry run writes nothing
    would = {r["run_id"] for r in dry["runs"] if r["outcome"] == "would move"}
    assert would == set(asked)
    (refused,) = [r for r in dry["runs"] if r["outcome"] == "cannot move"]
    assert refused["run_id"] == "stuck"
    assert any("stuck draft needs a person" in reason for reason in refused["reasons"])
    sample = next(r for r in dry["runs"] if r["run_id"] == "r0000")
    assert sample["renamed"] == {"approve": "review"}
    assert sample["state_keys"] == ["+priority"]

    real = migrate_cli(cli)
    moved = {r["run_id"] for r in real["runs"] if r["outcome"] == "moved"}
    assert moved == would  # exactly the runs the dry run named

    assert [r["run_id"] for r in real["runs"] if r["outcome"] == "cannot move"] == ["stuck"]
    after = {row[0]: row for row in rows_of(cli.db)}
    assert after["stuck"] == next(row for row in before if row[0] == "stuck")  # untouched
    assert all(after[run_id][1] == 2 for run_id in moved)

    again = migrate_cli(cli)  # nothing left on version 1 but the refused run
    assert [r["run_id"] for r in again["runs"]] == ["stuck"]

    store = SqliteStore(cli.db)
    try:
        for run_id in ("r0000", f"r{count // 2:04d}", f"r{count - 1:04d}"):
            # The question keeps its id: an answer sent before the deploy still fits.
            done = await intake.respond(
                run_id, {asked[run_id]: Decision(approved=True)}, store=store
            )
            assert done.status is RunStatus.COMPLETED
            number = int(run_id[1:])
            assert done.outputs == [f"v2 draft {number}: True, priority normal"]
            history = await intake.history(run_id, store=store)
            assert history.run.version == 2
            logged = [e.kind for e in await store.read_events(run_id)]
            assert logged.count("run_migrated") == 1
            migrated = [c for c in history.checkpoints if c.superstep == 2]
            assert len(migrated) >= 2  # the run's own checkpoint, then the migrated one after it
        with pytest.raises(VersionMismatchError, match="version 1 of 'intake', not version 2"):
            await intake.respond("stuck", {stuck_request.request_id: Decision(True)}, store=store)
        done = await intake_v1.respond(
            "stuck", {stuck_request.request_id: Decision(approved=False)}, store=store
        )
        assert done.outputs == ["v1 stuck: False"]  # it finishes on its own version
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
async def where(request, tmp_path):
    if request.param == "sqlite":
        cli = Cli(tmp_path, PYTHONPATH=str(HERE))
        store = SqliteStore(cli.db)
        yield cli, store
        await store.close()
        return
    schema = fresh_schema()
    cli = Cli(tmp_path, PYTHONPATH=str(HERE), TREADLE_STORE=postgres_dsn(), TREADLE_SCHEMA=schema)
    store = PostgresStore(postgres_dsn(), schema=schema)
    yield cli, store
    await store.close()
    await drop_schemas([schema])


@pytest.mark.integration
async def test_migrations_racing_move_each_run_once_and_nobody_is_told_a_move_it_did_not_make(
    where,
):
    cli, store = where
    asked = await park(store, 60)
    command = ["migrate", "--app", "migrate_app", "--from", "1", "--to", "2", "--json"]
    racers = [cli.fork(*command) for _ in range(3)]  # started at once, then waited for
    reports = []
    for code, out, err in forked.communicate_all(racers, timeout=60):
        assert code in (0, 1), err
        reports.append(json.loads(out))
    claimed: list[str] = []
    for report in reports:
        for run in report["runs"]:
            assert run["outcome"] in ("moved", "busy", "cannot move"), run
            if run["outcome"] == "moved":
                claimed.append(run["run_id"])
            elif run["outcome"] == "cannot move":  # it moved under this racer's feet
                assert any("version 2 now" in reason for reason in run["reasons"]), run
    assert sorted(claimed) == sorted(asked)  # each run moved once, by one racer
    for run_id in asked:
        assert (await store.get_run(run_id)).version == 2
        kinds = [e.kind for e in await store.read_events(run_id)]
        assert kinds.count("run_migrated") == 1
    run_id = next(iter(asked))
    answer = {asked[run_id]: Decision(approved=True)}
    done = await intake.respond(run_id, answer, store=store)
    assert done.status is RunStatus.COMPLETED


async def test_a_run_another_process_holds_is_busy_and_left_as_it_was(tmp_path):
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        asked = await park(store, 2)
        held = await store.acquire("r0000", "elsewhere:1:abc", 60)
        dry = await migrate(
            store,
            intake,
            [migrate_app.approve_becomes_review],
            from_version=1,
            previous=intake_v1,
            dry_run=True,
        )
        report = await migrate(
            store, intake, [migrate_app.approve_becomes_review], from_version=1, previous=intake_v1
        )
        for made in (dry, report):
            outcomes = {r.run_id: r.outcome for r in made.runs}
            assert outcomes["r0000"] == "busy"
            assert "elsewhere:1:abc" in next(r for r in made.runs if r.run_id == "r0000").reasons[0]
        assert {r.run_id: r.outcome for r in dry.runs}["r0001"] == "would move"
        assert {r.run_id: r.outcome for r in report.runs}["r0001"] == "moved"
        row = await store.get_run("r0000")
        assert (row.version, row.owner) == (1, "elsewhere:1:abc")
        await store.release(held)
        again = await migrate(store, intake, [migrate_app.approve_becomes_review], from_version=1)
        assert again.moved == ["r0000"]  # without version 1's code: read by version 2's codec
        assert set(asked) == {"r0000", "r0001"}
    finally:
        await store.close()


async def test_a_run_cancelled_while_its_migration_runs_is_named_and_the_rest_still_move(
    tmp_path,
):
    """Another process cancels a run while the migration function runs over it.

    The move's commit is fenced out (the cancel took the lease); before, that
    ``LeaseLostError`` ended the whole pass: the runs moved before it were
    never reported, those after it were never tried.
    """
    cli = Cli(tmp_path, PYTHONPATH=str(HERE))
    store = SqliteStore(cli.db)
    try:
        await park(store, 4)

        @migration("intake", from_version=1, to_version=2)
        def cancelled_meanwhile(run: CheckpointContents) -> CheckpointContents:
            if run.run_id == "r0001":  # a process of its own, while the move holds the lease
                cancel = cli.fork("cancel", "r0001")
                _, err = cancel.communicate(timeout=30)
                assert cancel.returncode == 0, err
            return migrate_app.approve_becomes_review(run)

        report = await migrate(
            store, intake, [cancelled_meanwhile], from_version=1, previous=intake_v1
        )
        outcomes = {r.run_id: r.outcome for r in report.runs}
        assert outcomes == {
            "r0000": "moved",
            "r0001": "cannot move",
            "r0002": "moved",
            "r0003": "moved",
        }
        (cancelled,) = report.with_outcome("cannot move")
        assert cancelled.reasons == ("it has ended meanwhile (cancelled)",)
        row = await store.get_run("r0001")
        assert (row.version, row.status) == (1, "cancelled")
        kinds = [e.kind for e in await store.read_events("r0001")]
        assert "run_migrated" not in kinds
        for run_id in ("r0000", "r0002", "r0003"):
            assert (await store.get_run(run_id)).version == 2
    finally:
        await store.close()


async def test_a_checkpoint_from_before_a_move_forks_on_the_version_that_wrote_it(tmp_path):
    """The move is parented on the checkpoint it came from, "so forks of the old
    checkpoints still work" (docs/versions.md): from Python and ``treadle fork``.

    Before, every fork of a checkpoint written before the move was refused:
    by version 1's code because the run is on version 2 now, by version 2's
    because version 1's graph wrote the checkpoint.
    """
    cli = Cli(tmp_path, PYTHONPATH=str(HERE))
    store = SqliteStore(cli.db)
    try:
        asked = await park(store, 1)
        report = await migrate(
            store, intake, [migrate_app.approve_becomes_review], from_version=1, previous=intake_v1
        )
        assert report.moved == ["r0000"]
        *old, moved = (await intake.history("r0000", store=store)).checkpoints
        assert moved.checkpoint_id == report.runs[0].checkpoint_id
        before = old[-1]  # version 1's, resting on its question

        with pytest.raises(GraphChangedError):  # version 2's code never reads version 1's graph
            await intake.fork("r0000", before.checkpoint_id, store=store)
        forked = await intake_v1.fork("r0000", before.checkpoint_id, store=store)
        row = await store.get_run(forked)
        assert (row.version, row.parent_run_id, row.parent_checkpoint_id) == (
            1,
            "r0000",
            before.checkpoint_id,
        )
        answer = {asked["r0000"]: Decision(approved=True)}
        done = await intake_v1.respond(forked, answer, store=store)
        assert done.outputs == ["v1 draft 0: True"]  # on the version that wrote it
        assert (await store.get_run("r0000")).version == 2  # the run forked from stays moved

        # The command line finds the version that wrote the checkpoint beside the run's.
        made = cli("fork", "r0000", "--checkpoint", before.checkpoint_id, "--json",
                   "--app", "migrate_app:intake")  # fmt: skip
        assert made.returncode == 0, made.stderr
        from_cli = json.loads(made.stdout)["run_id"]
        assert (await store.get_run(from_cli)).version == 1
        done = await intake_v1.respond(from_cli, answer, store=store)
        assert done.outputs == ["v1 draft 0: True"]
        # The move's own checkpoint forks on version 2, as before.
        on_v2 = await intake.fork("r0000", moved.checkpoint_id, store=store)
        assert (await store.get_run(on_v2)).version == 2
    finally:
        await store.close()


@pytest.mark.integration
async def test_the_server_forks_a_checkpoint_from_before_a_move_on_its_version(tmp_path):
    """``POST /api/runs/{id}/fork`` of a checkpoint version 1 wrote, the run now on version 2."""
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        await park(store, 1)
        await migrate(
            store, intake, [migrate_app.approve_becomes_review], from_version=1, previous=intake_v1
        )
        *old, _ = (await intake.history("r0000", store=store)).checkpoints
    finally:
        await store.close()
    serve = ServeProcess(
        tmp_path, str(tmp_path / "runs.sqlite"), PYTHONPATH=str(HERE), app="migrate_app"
    )
    serve.start()
    try:
        serve.ready()
        with serve.client(headers=serve.auth) as server:
            body = {"checkpoint_id": old[-1].checkpoint_id}
            made = server.post("/api/runs/r0000/fork", json=body)
            assert made.status_code == 201, made.text
            assert made.json()["run"]["version"] == 1
            assert made.json()["run"]["parent_checkpoint_id"] == old[-1].checkpoint_id
    finally:
        code, _, log = serve.stop()
    assert code == 0, log


def test_migrate_refuses_what_it_cannot_do_naming_the_thing_at_fault(tmp_path):
    cli = Cli(tmp_path, PYTHONPATH=str(HERE))
    missing = cli("migrate", "--app", "migrate_app", "--from", "1", "--to", "3", "--dry-run")
    assert missing.returncode == 2
    assert "no version 3 of 'intake'" in missing.stderr
    assert "1, 2" in missing.stderr
    nowhere = cli("migrate", "--app", "no_such_module", "--from", "1", "--to", "2")
    assert nowhere.returncode == 2
    assert "no_such_module" in nowhere.stderr


async def test_a_migration_from_a_version_to_itself_is_refused_and_writes_nothing(tmp_path):
    """``--from 1 --to 1`` (a slip of the keyboard) is no migration.

    Before, every run of version 1 was "moved" to version 1: a checkpoint, a
    ``run_migrated`` event and an audit entry written per run for a move
    that changed nothing, and ``--dry-run`` said they would move.
    """
    cli = Cli(tmp_path, PYTHONPATH=str(HERE))
    store = SqliteStore(cli.db)
    try:
        await park(store, 2)
    finally:
        await store.close()
    before = rows_of(cli.db)
    for extra in (["--dry-run"], []):
        same = cli("migrate", "--app", "migrate_app", "--from", "1", "--to", "1", *extra)
        assert same.returncode == 2, same.stdout
        assert "version 1 of 'intake'" in same.stderr
        assert "nothing to migrate" in same.stderr
        assert same.stderr.count("\n") == 1  # one line
    assert rows_of(cli.db) == before
    store = SqliteStore(cli.db)
    try:
        with pytest.raises(MigrationError, match="nothing to migrate"):
            await migrate(store, intake, [migrate_app.approve_becomes_review], from_version=2)
        assert [e.kind for e in await store.read_events("r0000")].count("run_migrated") == 0
    finally:
        await store.close()


@pytest.mark.integration
async def test_answers_racing_a_migration_are_never_lost_and_never_told_a_lie(where):
    """`treadle respond` (version 1's code) races `treadle migrate` for the same runs.

    Whoever wins, an answer its caller was told was taken is kept and the run
    finishes with it, on whichever version the run is on by then (a question
    keeps its id through the move); an answer its caller was told was
    refused was not kept; and the migration's report says exactly which runs
    moved.
    """
    cli, store = where
    taken = 0
    # Rounds until an answer wins one race: on a loaded machine the migration can win all
    # eight (every answer then refused, truthfully, as checked), and the taken path is
    # what a round must also show.
    for prefix in "abc":
        taken += await _race_answers_and_a_migration(cli, store, prefix)
        if taken:
            break
    assert taken >= 1


async def _race_answers_and_a_migration(cli, store, prefix: str) -> int:
    """One round of eight `respond`s racing one `migrate`, every outcome checked; how many won."""
    asked = await park(store, 8, prefix=prefix)
    commands = [["migrate", "--app", "migrate_app", "--from", "1", "--to", "2", "--json"]]
    commands += [
        ["respond", run_id, request_id, '{"approved": true}', "--app", "migrate_app:intake_v1"]
        for run_id, request_id in asked.items()
    ]
    racers = [cli.fork(*command) for command in commands]  # started at once, then waited for
    outcomes = forked.communicate_all(racers, timeout=60)
    migrated, *answers = outcomes
    report = {r["run_id"]: r for r in json.loads(migrated[1])["runs"]}
    taken = 0
    for (code, out, err), run_id in zip(answers, asked, strict=True):
        row = await store.get_run(run_id)
        moved = report.get(run_id, {}).get("outcome") == "moved"
        assert moved == (row.version == 2), (run_id, report.get(run_id), row)
        kept = await store.answer_of(run_id, asked[run_id])
        if code not in (0, 3):  # told it was refused: nothing was kept
            assert kept is None, (run_id, err)
            continue
        taken += 1
        assert kept is not None, (run_id, out, err)
        number = int(run_id[1:])
        if row.status != RunStatus.COMPLETED.value:  # delivered while the migration held it
            workflow = intake if row.version == 2 else intake_v1
            result = await workflow.resume(run_id, store=store)
            assert result.status is RunStatus.COMPLETED, (run_id, result)
        logged = [e.data for e in await store.read_events(run_id) if e.kind == "output"]
        expected = (
            f"v2 draft {number}: True, priority normal" if moved else f"v1 draft {number}: True"
        )
        assert [data.get("value") for data in logged] == [expected], (run_id, logged)
    return taken


async def test_on_a_memory_store_a_paused_run_stays_and_the_others_move():
    store = MemoryStore()
    asked = await park(store, 3)
    await store.pause("r0001")
    report = await migrate(store, intake, [migrate_app.approve_becomes_review], from_version=1)
    outcomes = {r.run_id: (r.outcome, r.reasons) for r in report.runs}
    assert outcomes["r0001"] == ("cannot move", ("paused: unpause it first",))
    assert report.moved == ["r0000", "r0002"]
    assert (await store.get_run("r0001")).version == 1
    done = await intake.respond("r0002", {asked["r0002"]: Decision(approved=True)}, store=store)
    assert done.outputs == ["v2 draft 2: True, priority normal"]
