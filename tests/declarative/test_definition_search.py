"""Search fields in a definition: ``search:`` with CEL over ``inputs`` or ``state`` (issue 34)."""

from __future__ import annotations

import logging

import pytest

import treadle
from treadle._values._filter import parse_filter
from treadle.errors import DefinitionError
from treadle.stores import MemoryStore

GATE = """\
name: gate
start: first
inputs: {text: str, limit: int}
state:
  total: {default: 0}
search:
  text: {type: text, input: "inputs.text"}
  big: {type: bool, input: "inputs.limit > 10"}
  total: {type: number, state: "state.total"}
  broken: {type: number, state: "state.total / 0"}
nodes:
  first: {executor: "declarative.steps:count", input: "{{inputs.limit}}"}
  done: {step: output, input: "{{state.total}}"}
edges:
  - {from: first, to: done}
"""


async def test_a_definitions_search_fields_are_written_by_its_commits(write, caplog):
    workflow = treadle.load(write(GATE))
    store = MemoryStore()
    with caplog.at_level(logging.WARNING, logger="treadle.search"):
        await workflow.run({"text": "eu-1", "limit": 12}, store=store, run_id="g1")
        await workflow.run({"text": "us-1", "limit": 3}, store=store, run_id="g2")
    fields = await store.run_fields("g1")
    assert {name: value.plain() for name, value in fields.items()} == {
        "text": "eu-1",
        "big": True,
        "total": 12.0,
    }
    found = await store.search_runs(parse_filter('fields.text.startsWith("eu") && fields.big'))
    assert [run.run_id for run in found] == ["g1"]
    assert [r.run_id for r in await store.search_runs(parse_filter("fields.total < 5"))] == ["g2"]
    assert "search field 'broken' raised" in caplog.text


def test_a_bad_search_field_is_reported_at_its_place(write):
    path = write(
        """\
        name: bad
        start: first
        inputs: {limit: int}
        search:
          twice: {type: number, input: "inputs.limit", state: "state.x"}
          broken: {type: number, input: "inputs.limit >"}
          other: {type: number, input: "state.total"}
        nodes:
          first: {executor: "declarative.steps:count", input: "{{inputs.limit}}"}
        """
    )
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert list(caught.value.problems) == [
        f"{path}:5:3: give exactly one of input: and state:",
        f"{path}:6:33: CEL syntax error in 'inputs.limit >' at column 14",
        f"{path}:7:32: in 'state.total': unknown name 'state' (use inputs)",
    ]
