"""The JSON schemas of inputs and answers, and the example answer the CLI prints from them.

In process: these are functions over types (the server serves the same
dicts); the subprocess tests in test_cli_operate.py show them in use.
"""

from __future__ import annotations

import datetime as dt  # noqa: TC003 - pydantic resolves the annotations at run time
import enum
import json
import typing
from dataclasses import dataclass

import pytest
from operate_app import Decision, Priority, decide, rank
from pydantic import BaseModel

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle._cli._answering import example_answer, field_lines
from treadle._exceptions import InvalidResponseError
from treadle._operations._schemas import (
    answer_schema,
    input_schema,
    request_answer_schema,
    response_class,
)


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


@dataclass(frozen=True)
class Node:
    label: str
    children: list[Node]


@dataclass(frozen=True)
class Stamp:
    at: dt.datetime
    pair: tuple[int, str]
    tags: dict[str, int]
    colour: Colour | None = None


class Box(BaseModel):
    properties: dict[str, str]  # a field named like the JSON schema keyword
    inner: Stamp


@executor
async def ask_all(n: int, ctx: WorkflowContext) -> None:
    for kind in (Node, Stamp, Box, Colour, Decision):
        await ctx.request(n, kind)


asking = (
    WorkflowBuilder(start=ask_all, name="asking")
    .register_type(Node)
    .register_type(Stamp)
    .register_type(Box)
    .register_type(Colour)
    .register_type(Decision)
    .build()
)


def test_the_input_schema_is_the_start_executors_type_or_a_choice_of_them():
    schema = input_schema(decide)
    assert schema["required"] == ["item", "qty"]
    assert schema["properties"]["qty"]["type"] == "integer"
    assert input_schema(rank) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_an_answer_schema_closes_every_object_with_named_fields():
    schema = answer_schema(Decision)
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Reviewer"]["additionalProperties"] is False
    assert schema["$defs"]["Priority"] == {
        "enum": ["low", "high"],
        "title": "Priority",
        "type": "string",
    }
    boxed = answer_schema(Box)
    # A field named "properties" is a field, not a schema: it gets no keyword of its own.
    assert set(boxed["properties"]["properties"]) == {"additionalProperties", "title", "type"}
    assert boxed["properties"]["properties"]["additionalProperties"] == {"type": "string"}


@pytest.mark.parametrize(
    ("cls", "schema"),
    [
        (bool, {"type": "boolean"}),
        (int, {"type": "integer"}),
        (str, {"type": "string"}),
        (object, {}),
        (None, {}),
    ],
)
def test_plain_types_have_plain_schemas(cls, schema):
    assert answer_schema(cls) == schema


def test_a_class_pydantic_cannot_describe_gets_a_described_empty_schema():
    class Opaque:
        pass

    schema = answer_schema(Opaque)
    assert "type" not in schema  # it constrains nothing it cannot check
    assert "Opaque" in schema["description"]


def test_a_request_s_type_name_resolves_as_an_arriving_answer_s_check_resolves_it():
    assert response_class(asking, "bool") is bool
    assert response_class(asking, asking.response_type_name(Node)) is Node
    assert response_class(asking, "no.such.Type") is None
    assert request_answer_schema(asking, None) == {}


@pytest.mark.parametrize("cls", [Node, Stamp, Box, Colour, Decision, Priority, bool, int, dict])
def test_the_example_answer_fits_the_type_under_the_strict_check(cls):
    workflow = rank if cls is Priority else asking
    name = workflow.response_type_name(cls)
    schema = request_answer_schema(workflow, name)
    example = example_answer(schema)
    workflow.validate_response("req-1", name, json.loads(json.dumps(example)))


def test_the_fields_say_type_and_whether_each_is_required_nested_ones_below():
    lines = field_lines(answer_schema(Decision))
    assert lines == [
        "the answer is a JSON object with:",
        "  approved: boolean (required)",
        '  priority: one of "low", "high" (required)',
        "  reviewers: list of Reviewer (required), each with:",
        "    name: string (required)",
        "    email: string (required)",
        "  due: string (date) or null (default null)",
        '  comment: string (default "")',
    ]
    assert field_lines(answer_schema(bool)) == ["the answer is boolean"]
    assert field_lines({}) == []


def test_a_recursive_type_s_fields_and_example_stop_going_down():
    schema = answer_schema(Node)
    assert len(field_lines(schema)) < 20
    example = example_answer(schema)
    assert example["children"][0]["label"] == ""


def test_the_strict_check_refuses_what_the_schema_excludes():
    name = asking.response_type_name(Decision)
    bad = {**example_answer(answer_schema(Decision)), "approved": "yes", "extra": 1}
    with pytest.raises(InvalidResponseError, match="extra: no such field"):
        asking.validate_response("req-1", name, bad)


class Check(BaseModel):
    passed: bool = True


class Review(BaseModel):
    colour: Colour = Colour.RED
    checks: list[Check] = []
    second: Check | None = None
    pick: typing.Literal["a", "b"] = "a"
    only: typing.Literal["x"] = "x"  # one value: nothing to decide
    unsure: bool | None = None  # None decides nothing
    comment: str = ""


def test_a_decision_with_a_default_is_required_at_any_depth():
    reviewing = WorkflowBuilder(start=ask_all, name="r").register_type(Review).build()
    name = reviewing.response_type_name(Review)
    with pytest.raises(InvalidResponseError) as refused:
        reviewing.validate_response(
            "req-1", name, {"checks": [{}, {"passed": False}], "second": {}}
        )
    message = str(refused.value)
    for loc in ("colour", "pick", "checks.0.passed", "second.passed"):
        assert f"{loc}: not given, and a decision is never left to its default" in message
    for loc in ("only", "unsure", "comment", "checks.1.passed"):
        assert f"{loc}: not given" not in message
    given = {"colour": 2, "pick": "b", "checks": [{"passed": False}]}
    assert reviewing.validate_response("req-1", name, given) == Review(
        colour=Colour.BLUE, pick="b", checks=[Check(passed=False)]
    )
    built = Review()  # an instance, built in code, is taken as it is
    assert reviewing.validate_response("req-1", name, built) is built
    schema = answer_schema(Review)
    assert schema["required"] == ["colour", "pick"]
    assert "default" not in schema["properties"]["colour"]
    assert schema["$defs"]["Check"]["required"] == ["passed"]
    assert schema["properties"]["comment"]["default"] == ""
    assert json.loads(json.dumps(example_answer(schema)))["colour"] in (1, 2)
