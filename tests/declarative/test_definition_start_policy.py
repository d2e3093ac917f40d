"""A definition's ``start_policy:``: its key a CEL expression over ``inputs`` (issue 31)."""

from __future__ import annotations

import pytest

import treadle
from treadle import RunStatus
from treadle.errors import DefinitionError, StartRefusedError
from treadle.stores import MemoryStore

EXPENSES = """\
name: expenses
start: review
inputs: {team: str, amount: int}
start_policy:
  key: "inputs.team"
  singleton: true
nodes:
  review: {executor: "declarative.steps:review"}
"""


async def test_a_definitions_singleton_runs_one_run_per_key_its_expression_gives(write):
    workflow = treadle.load(write(EXPENSES))
    store = MemoryStore()
    first = await workflow.run({"team": "ops", "amount": 5}, store=store)
    second = await workflow.run({"team": "ops", "amount": 7}, store=store)
    other = await workflow.run({"team": "sales", "amount": 9}, store=store)
    assert [first.status, second.status, other.status] == [
        RunStatus.AWAITING_INPUT,
        RunStatus.QUEUED,
        RunStatus.AWAITING_INPUT,
    ]
    refusing = treadle.StartPolicy(
        key=workflow.start_policy.key, singleton=True, when_busy="refuse"
    )
    with pytest.raises(StartRefusedError, match="key 'ops' of workflow 'expenses'"):
        await workflow.run({"team": "ops", "amount": 1}, store=store, start_policy=refusing)


def test_a_bad_start_policy_is_reported_at_its_place(write):
    path = write(
        """\
        name: bad
        start: first
        inputs: {limit: int}
        start_policy:
          key: "state.total"
          singleton: true
        nodes:
          first: {executor: "declarative.steps:count"}
        """
    )
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert list(caught.value.problems) == [
        f"{path}:5:8: in 'state.total': unknown name 'state' (use inputs)"
    ]
    path = write(
        """\
        name: bad
        start: first
        inputs: {limit: int}
        start_policy: {when_busy: refuse, debounce: 2}
        nodes:
          first: {executor: "declarative.steps:count"}
        """,
        "second.yaml",
    )
    with pytest.raises(DefinitionError, match="when_busy='refuse' needs singleton=True"):
        treadle.load(path)
