"""Loading checks everything at once: one DefinitionError lists every problem at its place."""

from __future__ import annotations

import pytest

import treadle
import treadle.stores
from treadle.errors import DefinitionError

TEN_MISTAKES = """\
name: broken
start: shout
inputs: {text: str}
state:
  total: {default: 0, reducer: "operator:nope"}
nodes:
  shout: {executor: "declarative.steps:shout", input: "{{inputs.txt}}"}
  reply: {executor: "declarative.steps:keep", colour: red}
  ghost: {executor: "no_such_module:thing"}
  loud: {executor: "declarative.steps:missing"}
  helper: {agent: nobody}
  count: {executor: "declarative.steps:count"}
  done: {step: output, input: "{{state.nothing}}"}
edges:
  - {from: shout, to: reply, when: "size(message) >"}
  - {from: shout, to: nowhere}
  - {from: shout, to: count}
  - {from: shout, to: done}
"""

EXPECTED = [
    "5:32: 'operator' has no attribute 'nope'",
    "7:55: {{inputs.txt}}: no input 'txt' is declared",
    "8:47: unknown key 'colour'",
    "9:21: cannot import 'no_such_module': ModuleNotFoundError: No module named 'no_such_module'",
    "10:20: 'declarative.steps' has no attribute 'missing'",
    "11:19: unknown agent 'nobody' (the agents given: none: pass agents={...} to load)",
    "13:31: {{state.nothing}}: no state key 'nothing' is declared",
    "15:36: CEL syntax error in 'size(message) >' at column 15",
    "16:23: unknown node 'nowhere'",
    "17:5: 'shout' sends str, but 'count' accepts int",
]


def test_ten_mistakes_are_reported_together_each_at_its_line_and_column(write):
    path = write(TEN_MISTAKES)
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert list(caught.value.problems) == [f"{path}:{where}" for where in EXPECTED]
    assert str(caught.value).startswith("the definition is invalid (10 problems):")


def test_treadle_validate_prints_every_problem_one_a_line_and_exits_2(write, treadle_command):
    path = write(TEN_MISTAKES)
    good = write("name: ok\nstart: a\nnodes:\n  a: {step: output}\n", name="good.yaml")
    done = treadle_command("validate", str(good), str(path))
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines() == [
        f"{good}: ok (ok, 1 nodes)",
        *(f"{path}:{where}" for where in EXPECTED),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # the start node refused for a mistake of its own: not also "unknown executor id"
            "name: t\nstart: a\nnodes:\n  a: {step: output, timeout: 0}\n",
            ["4:30: nodes.a.timeout: Input should be greater than 0"],
        ),
        (  # a start not among the nodes, said once
            "name: t\nstart: missing\nnodes:\n  a: {step: output}\n",
            ["2:8: the start node 'missing' is not among the nodes"],
        ),
    ],
)
def test_a_node_refused_or_missing_is_one_problem_where_it_is_written(write, text, expected):
    path = write(text)
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert [p.removeprefix(f"{path}:") for p in caught.value.problems] == expected


def test_a_file_that_is_not_yaml_is_one_problem_at_the_place_it_broke(write):
    path = write("name: x\nnodes: {a: [1, 2}\n")
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:2:")
    assert "not valid YAML or JSON" in problem


def test_json_definitions_report_positions_too(write):
    path = write(
        '{"name": "j", "start": "a",\n "nodes": {"a": {"step": "output"}},\n'
        ' "edges": [{"from": "a", "to": "b"}]}\n',
        name="flow.json",
    )
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert caught.value.problems == (f"{path}:3:32: unknown node 'b'",)


def test_a_condition_that_fails_as_the_run_goes_is_said_in_one_line(write, treadle_command):
    # Its message names the node, the condition and what went wrong; the frames under it
    # are treadle's own, not the definition's: no traceback, in the output or the record.
    path = write(
        """
        name: when
        start: first
        nodes:
          first: {executor: "declarative.steps:echo"}
          later: {step: output}
        edges:
          - {from: first, to: later, when: "message.amount >= 1.5"}
        """
    )
    store = str(path.with_suffix(".sqlite"))
    done = treadle_command("run", str(path), "--input", '{"amount": "x"}', "--store", store)
    assert done.returncode == 1, done.stderr
    said = "the condition 'message.amount >= 1.5' failed: cannot apply >= to string and double"
    assert said in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    (run,) = treadle_command.json("runs", "--store", store)["runs"]
    logs = treadle_command("logs", run["run_id"], "--store", store)
    assert said in logs.stdout
    assert "Traceback" not in logs.stdout


GREET = """
name: greet
start: first
inputs: {text: str}
nodes:
  first: {executor: "declarative.steps:echo", input: "{{inputs.text}}"}
  later: {step: output}
edges:
  - {from: first, to: later}
"""
"""A definition whose one declared input is ``text``."""


def test_an_input_the_declared_inputs_refuse_makes_no_run(write, treadle_command):
    # It made a run that failed at its first step, with a traceback through treadle's own
    # frames; it is refused as any input that does not fit, before any run exists.
    path = write(GREET)
    store = str(path.with_suffix(".sqlite"))
    done = treadle_command("run", str(path), "--input", '{"txt": "hi"}', "--store", store)
    assert done.returncode == 2, done.stdout
    assert done.stderr.strip() == (
        "error: the input does not fit the start executor 'first': missing input 'text'; "
        "undeclared input 'txt'"
    )
    fine = treadle_command("run", str(path), "--input", '{"text": "hi"}', "--store", store)
    assert fine.returncode == 0, fine.stderr
    assert len(treadle_command.json("runs", "--store", store)["runs"]) == 1  # only that one


async def test_an_input_the_declared_inputs_refuse_makes_no_run_from_python_either(write):
    # From Python it made a run that failed at its first step: only the JSON doors checked.
    workflow = treadle.load(write(GREET))
    store = treadle.stores.SqliteStore(write("", name="runs.sqlite"))
    try:
        with pytest.raises(TypeError) as refused:
            await workflow.run({"txt": "hi"}, store=store)
        assert str(refused.value) == (
            "the input does not fit the start executor 'first': missing input 'text'; "
            "undeclared input 'txt'"
        )
        assert await store.list_runs() == []
        done = await workflow.run({"text": "hi"}, store=store)
        assert done.status is treadle.RunStatus.COMPLETED
    finally:
        await store.close()


def test_a_condition_search_field_or_start_key_naming_an_undeclared_field_is_refused_at_load(
    write, treadle_command
):
    # treadle validate said "ok"; the typo failed the first run that took the edge.
    path = write(
        """\
        name: typos
        start: first
        inputs: {text: str}
        state:
          total: {default: 0}
        start_policy: {key: "inputs.txet"}
        search:
          amount: {type: number, state: "state.totl"}
          word: {type: text, input: "inputs.text"}
        nodes:
          first: {executor: "declarative.steps:echo", input: "{{inputs.text}}"}
          later: {step: output}
          other: {step: output}
        edges:
          - {from: first, to: later, when: "state.totl > 1 && inputs.txt == 'x'"}
          - {from: first, to: other, when: "[1].all(state, state.anything > 0) && has(state.total)"}
        """
    )
    done = treadle_command("validate", str(path))
    assert done.returncode == 2, done.stdout
    assert done.stdout.splitlines() == [
        f"{path}:6:21: in 'inputs.txet': no input 'txet' is declared",
        f"{path}:8:33: in 'state.totl': no state key 'totl' is declared",
        (
            f"{path}:15:36: in \"state.totl > 1 && inputs.txt == 'x'\": no state key 'totl' "
            "is declared; no input 'txt' is declared"
        ),
    ]
