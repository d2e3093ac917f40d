"""Hostile data stays data, never evaluated; unsafe conditions are refused at load."""

from __future__ import annotations

import json

import pytest

import treadle
from treadle import RunStatus
from treadle.errors import DefinitionError, ExecutorFailedError

FLOW = """\
name: hostile
start: first
inputs: {text: str}
state:
  note: {default: ""}
nodes:
  first: {executor: "declarative.steps:echo", input: "{{inputs.text}}"}
  keeper: {executor: "declarative.steps:remember"}
  done: {step: output, input: "got {{state.note}} from {{nodes.first.output}}"}
  raw: {step: output, input: {value: "{{state.note}}", again: "{{inputs.text}}"}}
edges:
  - {from: first, to: keeper}
  - {from: keeper, to: done, when: "state.note == inputs.text && size(message) > 0"}
  - {from: keeper, to: raw}
"""


def payloads(marker):
    return [
        "{{inputs.text}}",
        "{{state.note}} {{nodes.first.output}}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        (
            "{% for x in range(10**9) %}{% endfor %}{{ cycler.__init__.__globals__.os.popen('touch "
            f"{marker}') }}}}"
        ),
        "size(message) > 0 || true",
        "state.note + inputs.text",
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w').write('x')",
        "${{ github.event }} #{1+1} <%= 7*7 %> ${7*7}",
    ]


async def test_hostile_inputs_pass_through_as_data_and_nothing_runs(write, tmp_path):
    marker = tmp_path / "MARKER"
    workflow = treadle.load(write(FLOW))
    for text in payloads(marker):
        result = await workflow.run({"text": text})
        assert result.status is RunStatus.COMPLETED
        assert sorted(result.outputs, key=str) == sorted(
            [f"got {text} from {text}", {"value": text, "again": text}], key=str
        ), text
        assert result.state["note"] == text
    assert not marker.exists()


async def test_conditions_read_hostile_text_as_a_string(write):
    workflow = treadle.load(
        write(
            """\
            name: gate
            start: first
            nodes:
              first: {executor: "declarative.steps:echo"}
              passed: {step: output}
            edges:
              - {from: first, to: passed, when: "message == 'true || true'"}
            """
        )
    )
    passed = await workflow.run("true || true")
    blocked = await workflow.run("x' || 'a' == 'a")
    assert passed.outputs == ["true || true"]
    assert blocked.outputs == []


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("message.__class__ == 'x'", "the field '__class__' is not allowed"),
        ("message.__globals__.os != null", "the field '__globals__' is not allowed"),
        ("message._private == 1", "the field '_private' is not allowed"),
        ("__import__('os') == null", "the function __import__() is not allowed"),
        ("message.matches('(a+)+$')", "the method .matches() is not allowed"),
        ("google.protobuf.Struct{} == message", "message construction"),
        ("os.system('x') == 0", "unknown name 'os'"),
        ("while (true) {}", "message construction (Type{...}) is not allowed"),
        ("for x in range(10): pass", "CEL syntax error"),
        ("def loop(): return loop()", "CEL syntax error"),
        ("message.map(x, message.map(y, message.map(z, z)))", "macros nest at most 2 deep"),
        ("{% for x in y %}", "CEL syntax error"),
    ],
)
def test_conditions_that_would_loop_or_reach_python_objects_are_refused_at_load(
    write, condition, reason
):
    path = write(
        f"""\
        name: unsafe
        start: first
        nodes:
          first: {{executor: "declarative.steps:echo"}}
          passed: {{step: output}}
        edges:
          - {{from: first, to: passed, when: {json.dumps(condition)}}}
        """
    )
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:7:")
    assert reason in problem


def test_yaml_tags_that_build_python_objects_are_refused_before_anything_runs(write, tmp_path):
    marker = tmp_path / "MARKER"
    path = write(f'name: !!python/object/apply:os.system ["touch {marker}"]\nstart: a\n')
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert caught.value.problems == (
        (
            f"{path}:1:7: the tag 'tag:yaml.org,2002:python/object/apply:os.system' "
            f"is not allowed in a definition"
        ),
    )
    assert not marker.exists()


def test_aliases_that_would_expand_a_small_file_into_a_huge_one_are_refused(write):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 20)]
    path = write("\n".join(lines) + "\n")
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    (problem,) = caught.value.problems
    assert "anchors and aliases" in problem


async def test_conditions_see_dataclass_messages_as_plain_fields(write):
    workflow = treadle.load(
        write(
            """\
            name: tickets
            start: make
            nodes:
              make: {executor: "declarative.steps:ticket"}
              urgent: {step: output, input: "urgent: {{message.title}}"}
              later: {step: output, input: "{{message.priority}}"}
            edges:
              - from: make
                switch:
                  - {when: "message.priority > 2", to: urgent}
                  - {default: later}
            """
        )
    )
    assert (await workflow.run("urgent: server down")).outputs == ["urgent: urgent: server down"]
    assert (await workflow.run("new logo")).outputs == [1]


def _deep(kind: str, depth: int) -> str:
    """A definition whose node ``input`` nests ``depth`` levels deep."""
    if kind == "yaml lists":
        nested = "[" * depth + "]" * depth
        return f"name: deep\nstart: a\nnodes:\n  a: {{step: output, input: {nested}}}\n"
    if kind == "yaml mappings":
        lines = ["name: deep", "start: a", "nodes:", "  a:", "    step: output", "    input:"]
        lines += [" " * (6 + i) + "k:" for i in range(depth)]
        return "\n".join(lines) + " 1\n"
    inner = '{"k": ' * depth + "1" + "}" * depth
    node = f'{{"step": "output", "input": {inner}}}'
    return f'{{"name": "deep", "start": "a", "nodes": {{"a": {node}}}}}'


@pytest.mark.parametrize("kind", ["yaml lists", "yaml mappings", "json"])
def test_a_definition_nested_ten_thousand_deep_is_one_problem_at_its_place(
    write, treadle_command, kind
):
    path = write(_deep(kind, 10_000), "deep.json" if kind == "json" else "deep.yaml")
    validated = treadle_command("validate", str(path))
    assert validated.returncode == 2, validated.stderr[-2000:]
    assert "Traceback" not in validated.stderr
    assert "RecursionError" not in validated.stdout + validated.stderr
    (line,) = validated.stdout.strip().splitlines()
    assert line.startswith(f"{path}:"), line
    assert "nests more than 64 levels deep" in line
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    (problem,) = caught.value.problems
    assert problem == line


def test_a_definition_nested_within_the_bound_loads(write):
    workflow = treadle.load(write(_deep("yaml lists", 50)))
    assert workflow.name == "deep"


@pytest.mark.parametrize(
    "condition",
    [
        "(" * 250 + "message" + ")" * 250 + " == 1",
        "[" * 250 + "1" + "]" * 250 + " == message",
        "size(" * 200 + "message" + ")" * 200 + " == 1",
        "+".join(["1"] * 900) + " == message",
        "!" * 1500 + "true",
        "message" + ".a" * 900 + " == 1",
    ],
    ids=["parentheses", "lists", "calls", "a long sum", "negations", "fields"],
)
def test_a_condition_nested_too_deep_is_refused_at_load_not_crashing_the_checker(
    write, treadle_command, condition
):
    path = write(
        f"""\
        name: deep
        start: first
        nodes:
          first: {{executor: "declarative.steps:echo"}}
          passed: {{step: output}}
        edges:
          - {{from: first, to: passed, when: {json.dumps(condition)}}}
        """
    )
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:7:37: the expression ")
    assert "nests too deeply" in problem
    validated = treadle_command("validate", str(path))
    assert validated.returncode == 2
    assert "Traceback" not in validated.stderr
    assert validated.stdout.strip() == problem


async def test_a_condition_over_its_budget_takes_the_nodes_error_route(write):
    workflow = treadle.load(
        write(
            """\
            name: costly
            start: first
            nodes:
              first: {executor: "declarative.steps:echo"}
              done: {step: output}
              fix: {executor: "declarative.steps:recover"}
            edges:
              - {from: first, to: done, when: "size(message.map(x, message.map(y, x + y))) > 0"}
              - {from: first, on_error: fix}
            """
        )
    )
    few = [f"w{i}" for i in range(20)]  # 400 pairs: well within the budget
    assert (await workflow.run(few)).outputs == [few]
    result = await workflow.run([f"word-{i:03d}-" + "x" * 90 for i in range(300)])
    assert result.status is RunStatus.COMPLETED
    assert result.outputs == ["recovered from first"]


async def test_a_condition_joining_large_values_in_a_macro_is_stopped(write):
    """``+`` copies: within its steps, this built 90 million characters from 100 KB of input."""
    workflow = treadle.load(
        write(
            """\
            name: joining
            start: first
            inputs: {items: list, text: str}
            nodes:
              first: {executor: "declarative.steps:echo"}
              done: {step: output}
            edges:
              - from: first
                to: done
                when: "size(inputs.items.map(x, inputs.text + inputs.text + inputs.text)) > 0"
            """
        )
    )
    small = {"items": [1, 2, 3], "text": "abc"}
    assert (await workflow.run(small)).status is RunStatus.COMPLETED
    with pytest.raises(ExecutorFailedError) as failed:
        await workflow.run({"items": list(range(100)), "text": "x" * 100_000})
    assert "node 'first': the condition" in str(failed.value)
    assert "built more than 4,000,000 characters or items with +" in str(failed.value)
