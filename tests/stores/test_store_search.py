"""Every store answers a filter of runs as looking at every run would (issue 34, must show 3).

Runs are written through the store's own ``create_run`` with their search
fields on the first checkpoint; filters drawn by hypothesis (nested ``&&``,
``||``, ``!``, every comparison, ``in``, ``startsWith``, ``has``, ``null``)
must keep exactly the runs a brute-force predicate, written apart from
treadle's matcher, keeps. Memory, SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings

from search_support import brute_force, filters, sample_runs
from treadle._operations._shapes import run_json
from treadle._values._filter import parse_filter

RUNS = sample_runs(120)


@pytest.fixture
async def filled(store):
    for run in RUNS:
        await store.create_run(run.record(), b"", run.first_checkpoint())
    return store


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(drawn=filters())
async def test_a_filter_keeps_what_brute_force_keeps(filled, drawn):
    text, test = drawn
    where = parse_filter(text)
    found = [run.run_id for run in await filled.search_runs(where)]
    assert set(found) == brute_force(RUNS, test), text
    assert len(found) == len(set(found)), f"{text}: a run listed twice"
    assert await filled.count_runs(where) == len(found), text


async def test_runs_come_newest_first_and_page_by_before(filled):
    where = parse_filter('status != "running"')
    every = [run.run_id for run in await filled.search_runs(where)]
    assert every == sorted(every, reverse=True)  # created one second apart, in id order
    first = await filled.search_runs(where, limit=10)
    rest = await filled.search_runs(where, before=(first[-1].created_at, first[-1].run_id))
    assert [r.run_id for r in first + rest] == every


async def test_a_deleted_run_takes_its_fields_with_it(filled):
    run = RUNS[0]
    assert await filled.run_fields(run.run_id)
    await filled.delete_run(run.run_id)
    assert await filled.run_fields(run.run_id) == {}
    assert run.run_id not in {r.run_id for r in await filled.search_runs(parse_filter("true"))}


async def test_a_time_as_an_answer_shows_it_selects_the_run_it_came_from(store):
    # A stored time has digits past the microsecond that no answer shows: the time a
    # run's row shows, put in a filter, must keep (or leave out) that very run.
    exact = RUNS[0].record().created_at + 0.0737663  # between two microseconds
    run = dataclasses.replace(RUNS[0].record(), created_at=exact)
    await store.create_run(run, b"", RUNS[0].first_checkpoint())
    shown = run_json(await store.get_run(run.run_id))["created_at"]  # as the API shows it
    assert shown.endswith(".073766+00:00"), shown
    kept = {
        "==": True, "<=": True, ">=": True, "<": False, ">": False, "!=": False,
    }  # fmt: skip
    for op, keeps in kept.items():
        where = parse_filter(f'created_at {op} timestamp("{shown}")')
        found = {r.run_id for r in await store.search_runs(where)}
        assert (run.run_id in found) is keeps, (op, shown, exact)
    where = parse_filter(f'created_at in [timestamp("{shown}"), timestamp("2001-01-01T00:00:00Z")]')
    assert [r.run_id for r in await store.search_runs(where)] == [run.run_id]
