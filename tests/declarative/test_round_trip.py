"""Random valid definitions load, export, and reload to an equal definition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treadle
from declarative import steps
from treadle import WorkflowBuilder
from treadle._declarative._schema import Definition
from treadle.declarative import export, export_text, loads

# cel-python raises the recursion limit when its parser is first built: build it now,
# not inside a hypothesis example (which warns when the limit changes under it).
loads("name: warm\nstart: a\nnodes: {a: {step: output}}\nedges: [{from: a, to: a, when: 'true'}]\n")

IDS = ["a", "b", "c", "d", "e", "f"]
CONDITIONS = ["size(string(message)) > 2", "message != null", "true", "[1, 2].all(x, x > 0)"]
STEPS = [
    {"executor": "declarative.steps:echo"},
    {"executor": "declarative.steps:keep"},
    {"step": "output"},
    {"step": "template"},
]


@st.composite
def definitions(draw) -> dict:  # noqa: PLR0912 - one branch per optional part
    count = draw(st.integers(1, len(IDS)))
    ids = IDS[:count]
    state_keys = draw(st.lists(st.sampled_from(["k", "seen", "total"]), unique=True))
    state = {}
    for key in state_keys:
        entry = {}
        if draw(st.booleans()):
            entry["default"] = draw(st.one_of(st.integers(-5, 5), st.text("xyz", max_size=3)))
        if draw(st.booleans()):
            entry["reducer"] = "operator:add"
        state[key] = entry
    inputs = draw(st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from(["str", "any"])))
    templates = ["{{message}}", "plain text", {"keep": "{{message}}", "n": 3}]
    templates += [f"{{{{state.{k}}}}}" for k in state_keys]
    templates += [f"say {{{{inputs.{k}}}}}!" for k in inputs]
    nodes = {}
    for node_id in ids:
        node = dict(draw(st.sampled_from(STEPS)))
        if draw(st.booleans()) or (node_id == ids[0] and inputs):
            node["input"] = draw(st.sampled_from(templates))
        if draw(st.booleans()):
            node["timeout"] = draw(st.sampled_from([0.5, 2.0, 30.0]))
        if draw(st.booleans()):
            node["retry"] = {"max_attempts": draw(st.integers(1, 4)), "initial": 0.5}
        nodes[node_id] = node
    edges = []
    for index, node_id in enumerate(ids[1:], start=1):
        source = ids[draw(st.integers(0, index - 1))]
        kind = draw(st.sampled_from(["direct", "when", "fan_out", "switch"]))
        if kind == "direct":
            edges.append({"from": source, "to": node_id})
        elif kind == "when":
            edges.append({"from": source, "to": node_id, "when": draw(st.sampled_from(CONDITIONS))})
        elif kind == "fan_out":
            fan = {"from": source, "fan_out": [node_id]}
            if draw(st.booleans()):
                fan["select"] = "targets.filter(t, t != '')"
            edges.append(fan)
        else:
            edges.append(
                {
                    "from": source,
                    "switch": [{"when": draw(st.sampled_from(CONDITIONS)), "to": node_id}],
                }
            )
    if count >= 3 and draw(st.booleans()):
        edges.append({"fan_in": [ids[1], ids[2]], "to": ids[0]})
    definition = {"name": "random", "version": 1, "start": ids[0], "nodes": nodes, "edges": edges}
    if state:
        definition["state"] = state
    if inputs:
        definition["inputs"] = inputs
    if draw(st.booleans()):
        definition["limits"] = {"max_supersteps": draw(st.integers(1, 50)), "deterministic": True}
    if draw(st.booleans()):
        definition["retry"] = {"max_attempts": 2, "maximum": 5.0}
    return definition


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(definitions(), st.booleans())
def test_random_definitions_load_export_and_reload_equal(definition, as_json):
    unshared = json.loads(json.dumps(definition))  # no shared objects, so no YAML aliases
    text = json.dumps(definition) if as_json else yaml.safe_dump(unshared)
    workflow = loads(text)
    exported = export(workflow)
    assert Definition.model_validate(exported) == Definition.model_validate(definition)
    again = export(loads(export_text(workflow)))
    assert again == exported


def test_a_python_workflow_of_importable_executors_exports_and_loads_back():
    workflow = (
        WorkflowBuilder(steps.shout, name="py")
        .add_edge(steps.shout, steps.keep)
        .add_state("total", default=0, reducer=steps.add)
        .build()
    )
    exported = export(workflow)
    assert exported == {
        "name": "py",
        "version": 1,
        "start": "shout",
        "state": {"total": {"default": 0, "reducer": "operator:add"}},
        "nodes": {
            "shout": {"executor": "declarative.steps:shout"},
            "keep": {"executor": "declarative.steps:keep"},
        },
        "edges": [{"from": "shout", "to": "keep"}],
    }
    assert loads(export_text(workflow)).run_sync("hi").outputs == ["HI"]


def test_python_conditions_are_named_when_a_workflow_cannot_be_exported():
    workflow = (
        WorkflowBuilder(steps.shout, name="py")
        .add_edge(steps.shout, steps.keep, condition=lambda m: len(m) > 2)
        .build()
    )
    with pytest.raises(ValueError, match=r"edge shout -> keep: .* is Python, not an expression"):
        export(workflow)


def test_the_published_json_schema_is_current():
    published = Path(__file__).parents[2] / "docs" / "workflow.schema.json"
    assert (
        json.loads(published.read_text(encoding="utf-8")) == treadle.declarative.definition_schema()
    )
