"""``treadle start``'s note reads a bounded number of the store's newest runs, never all of them.

The note says no other run has the name the run was started by (perhaps a
typo). ``treadle_runs`` has no index on ``workflow``, so asking the store for
that name's runs read every run when there was none: unbounded on a big
store, for exactly the name the note is for. The command reads the newest
``NEWEST_RUNS_READ`` runs instead, page by page (5 and 2 at first here), and the
note says where it looked. Runs created at one instant page by insertion
order, as the listing does.
"""

from __future__ import annotations

import pytest

from treadle._cli._views import print_started
from treadle._operations import _commands as commands
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord

T0 = 1_700_000_000.0


@pytest.fixture(autouse=True)
def few(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read the 5 newest runs: 2, then the 3 left (pages grow tenfold, to the bound)."""
    monkeypatch.setattr(commands, "NEWEST_RUNS_READ", 5)
    monkeypatch.setattr(commands, "_RUNS_PAGE", 2)


async def add_runs(store, *workflows: str) -> None:
    """A run of each of ``workflows``, oldest first, all created at one instant."""
    for n, workflow in enumerate(workflows):
        run_id = f"run-{n}"
        record = RunRecord(run_id, workflow, "pending", 0, None, None, None, T0, T0)
        first = CheckpointInfo(f"{run_id}/c0", run_id, 0, "pending", None, T0, None)
        await store.create_run(record, b"graph", CheckpointRecord(first, b"blob"))


async def test_a_run_of_the_name_older_than_the_newest_read_is_not_looked_for(store):
    # run-0 (countng) is the 7th newest: past the 5 read. run-6 is the new one.
    await add_runs(store, "countng", "orders", "orders", "orders", "orders", "orders", "countng")
    assert await commands.alone_of_its_workflow(store, "countng", "run-6") == 5


async def test_a_run_of_the_name_among_the_newest_read_is_found_on_the_last_page(store):
    # run-1 (countng) is the 5th newest: the last one read, on the second page.
    await add_runs(store, "orders", "countng", "orders", "orders", "orders", "countng")
    assert await commands.alone_of_its_workflow(store, "countng", "run-5") is None


async def test_a_store_smaller_than_the_bound_is_read_whole(store):
    await add_runs(store, "orders", "orders", "countng")
    assert await commands.alone_of_its_workflow(store, "countng", "run-2") == 3


def test_the_note_says_where_it_looked_when_that_was_not_the_whole_store(capsys):
    print_started("run-6", "countng", as_json=False, alone=5)
    err = " ".join(capsys.readouterr().err.split())
    assert "no other run of workflow 'countng' is among this store's newest 5 runs" in err

    print_started("run-2", "countng", as_json=False, alone=3)
    err = " ".join(capsys.readouterr().err.split())
    assert "no other run of workflow 'countng' is in this store" in err

    print_started("run-5", "countng", as_json=False, alone=None)
    assert capsys.readouterr().err == ""
