"""What a definition can say: sub-workflows, error routes, fan-in, selectors, state and inputs."""

from __future__ import annotations

import pytest

import treadle
from treadle import RunStatus
from treadle.errors import DefinitionError, ExecutorFailedError


async def test_a_sub_workflow_file_runs_as_one_node(write):
    write(
        """\
        name: inner
        start: up
        nodes:
          up: {executor: "declarative.steps:shout"}
          done: {step: output}
        edges:
          - {from: up, to: done}
        """,
        name="inner.yaml",
    )
    outer = treadle.load(
        write(
            """\
            name: outer
            start: first
            nodes:
              first: {executor: "declarative.steps:echo"}
              loud: {workflow: inner.yaml}
              last: {step: output, input: "outer got {{message}}"}
            edges:
              - {from: first, to: loud}
              - {from: loud, to: last}
            """
        )
    )
    assert (await outer.run("hi")).outputs == ["outer got HI"]


def test_sub_workflow_files_that_include_each_other_are_refused(write):
    write("name: a\nstart: s\nnodes:\n  s: {workflow: b.yaml}\n", name="a.yaml")
    path = write("name: b\nstart: s\nnodes:\n  s: {workflow: a.yaml}\n", name="b.yaml")
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert "sub-workflows include each other (b.yaml -> a.yaml -> b.yaml)" in str(caught.value)


async def test_error_routes_retries_fan_in_and_selectors(write):
    workflow = treadle.load(
        write(
            """\
            name: kinds
            start: first
            nodes:
              first: {executor: "declarative.steps:echo"}
              left: {step: template, input: "left {{message}}"}
              right: {step: template, input: "right {{message}}"}
              skipped: {step: template}
              both: {executor: "declarative.steps:gather"}
              flaky: {executor: "declarative.steps:fail", retry: {max_attempts: 2, initial: 0}}
              rescue: {executor: "declarative.steps:recover"}
            edges:
              - from: first
                fan_out: [left, right, skipped]
                select: "targets.filter(t, t != 'skipped')"
              - {fan_in: [left, right], to: both}
              - {from: first, to: flaky}
              - {from: flaky, on_error: rescue}
            """
        )
    )
    result = await workflow.run("x")
    assert result.status is RunStatus.COMPLETED
    assert sorted(map(str, result.outputs)) == ["['left x', 'right x']", "recovered from flaky"]


async def test_conditions_read_state_and_inputs_and_templates_read_node_outputs(write):
    workflow = treadle.load(
        write(
            """\
            name: gate
            start: first
            inputs: {text: str, limit: int}
            state:
              total: {default: 0}
            nodes:
              first: {executor: "declarative.steps:count", input: "{{inputs.limit}}"}
              big: {step: output, input: "big {{nodes.first.output}} for {{inputs.text}}"}
              small: {step: output, input: "{{state.total}}"}
            edges:
              - {from: first, to: big, when: "state.total >= 10 && inputs.text != ''"}
              - {from: first, to: small, when: "state.total < 10"}
            """
        )
    )
    assert (await workflow.run({"text": "t", "limit": 12})).outputs == ["big 12 for t"]
    assert (await workflow.run({"text": "t", "limit": 3})).outputs == [3]
    # Refused before any run exists (it made a run that failed at its first step).
    with pytest.raises(TypeError, match="input 'limit' must be int, got str"):
        await workflow.run({"text": "t", "limit": "3"})


def test_treadle_run_and_graph_take_a_definition_file(write, treadle_command):
    write(
        """\
        name: greet
        start: shout
        inputs: {text: str}
        nodes:
          shout: {executor: "declarative.steps:shout", input: "{{inputs.text}}"}
          reply: {step: output}
        edges:
          - {from: shout, to: reply, when: "size(message) > 3"}
        """,
        name="greet.yaml",
    )
    ran = treadle_command(
        "run", "greet.yaml", "--input", '{"text": "hello"}', "--store", "runs.sqlite"
    )
    assert ran.returncode == 0, ran.stderr
    assert '"HELLO"' in ran.stdout
    drawn = treadle_command("graph", "greet.yaml")
    assert drawn.returncode == 0, drawn.stderr
    assert 'n0(["shout"])' in drawn.stdout


async def test_a_step_asking_for_a_typed_answer_and_a_float_input_given_an_int_run_through(
    write, tmp_path
):
    from declarative.steps import Decision  # noqa: PLC0415 - the test's own step module
    from treadle.stores import SqliteStore  # noqa: PLC0415 - as the other tests here

    path = write(
        """\
        name: expenses
        start: review
        inputs: {amount: float}
        nodes:
          review: {executor: "declarative.steps:review"}
          big: {step: output, input: "big: {{inputs.amount}}"}
        edges:
          - {from: review, to: big, when: "message.amount >= 1000.0"}
        """
    )
    workflow = treadle.load(path)
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        waiting = await workflow.run({"amount": 1500}, store=store, run_id="exp-1")
        assert waiting.status is RunStatus.AWAITING_INPUT
        (asked,) = waiting.pending_requests
        done = await workflow.respond("exp-1", {asked.request_id: Decision(True)}, store=store)
    finally:
        await store.close()
    assert done.status is RunStatus.COMPLETED, done
    assert done.outputs == ["big: 1500.0"]


def test_validate_names_a_declared_type_that_does_not_import(write, treadle_command):
    path = write(
        """\
        name: expenses
        start: review
        types: ["declarative.steps:Decision", "declarative.steps:Nope", "declarative.steps:add"]
        nodes:
          review: {executor: "declarative.steps:review"}
        """
    )
    line = path.read_text().splitlines()[2]
    nope, add = (
        line.index('"declarative.steps:Nope"') + 1,
        line.index('"declarative.steps:add"') + 1,
    )
    validated = treadle_command("validate", str(path))
    assert validated.returncode == 2, validated.stdout
    assert validated.stdout.splitlines() == [
        f"{path}:3:{nope}: 'declarative.steps' has no attribute 'Nope'",
        f"{path}:3:{add}: 'declarative.steps:add' is a builtin_function_or_method, not a class",
    ]


async def test_a_condition_meeting_the_wrong_types_fails_in_one_line_naming_node_and_types(write):
    workflow = treadle.load(
        write(
            """\
            name: expenses
            start: first
            nodes:
              first: {executor: "declarative.steps:echo"}
              big: {step: output}
            edges:
              - {from: first, to: big, when: "message.amount >= 1000.0"}
            """
        )
    )
    with pytest.raises(ExecutorFailedError) as caught:
        await workflow.run({"amount": 1500})
    text = str(caught.value)
    assert "node 'first': the condition 'message.amount >= 1000.0' failed: " in text
    assert "cannot apply >= to int and double" in text
    assert "celpy" not in text
    assert "\n" not in text
