"""What comparing costs an expression's budget: ``in``, ``==``, ``!=`` and ``.contains()``.

cel-python compares item by item in Python, so these are charged a step per
item they may compare, before they compare. Work is counted here (steps
charged, comparisons made), never timed.
"""

from __future__ import annotations

import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from treadle._declarative._budget import MAX_BUILT, MAX_STEPS, BudgetedEvaluator
from treadle._declarative._conditions import ExpressionError, compile_expression

UNBOUNDED = 10**12


def steps_spent(source: str, message: object) -> int:
    """The steps ``source`` is charged over ``message`` when nothing stops it."""
    expression = compile_expression(source, ["message"])
    program = expression.program
    left = [UNBOUNDED, MAX_BUILT]
    evaluator = BudgetedEvaluator(program.ast, program.new_activation(), left)
    evaluator.evaluate({"message": json_to_cel(message)})
    return UNBOUNDED - left[0]


NOT_IN = "message.tags.all(t, !(t in message.allowed))"


def tags(n: int, m: int) -> dict[str, list[int]]:
    return {"tags": list(range(1, n + 1)), "allowed": list(range(-m, 0))}


def test_in_a_list_inside_a_macro_is_charged_for_every_item_of_the_list():
    """10 tags each looked for in 1,000 then 2,000 items: 10,000 comparisons more."""
    smaller, larger = steps_spent(NOT_IN, tags(10, 1000)), steps_spent(NOT_IN, tags(10, 2000))
    assert smaller >= 10 * 1000
    assert larger - smaller >= 10 * 1000


def test_in_a_large_list_inside_a_macro_is_refused_before_comparing_past_the_budget(monkeypatch):
    """400 tags in 40,000 items is 16 million comparisons; it took 9 s and passed."""
    compared = [0]
    equal = celtypes.IntType.__eq__

    def counting(self: celtypes.IntType, other: object) -> bool:
        compared[0] += 1
        return equal(self, other)

    monkeypatch.setattr(celtypes.IntType, "__eq__", counting)
    expression = compile_expression(NOT_IN, ["message"])
    with pytest.raises(ExpressionError, match=r"went over its budget of 20,000 evaluation steps"):
        expression.evaluate({"message": tags(400, 40_000)})
    assert compared[0] <= MAX_STEPS


@pytest.mark.parametrize(
    ("source", "message", "at_least"),
    [
        ("message.a in message.m", {"a": "k", "m": {f"k{i}": i for i in range(5000)}}, 5000),
        ("message.a == message.b", {"a": [list(range(5000))], "b": [list(range(5000))]}, 5000),
        ("message.a != message.b", {"a": {"x": list(range(5000))}, "b": {"x": []}}, 0),
        ("message.a != message.b", {"a": {"x": list(range(5000))}, "b": {"x": [0] * 5000}}, 5000),
        ("'b' in message.text", {"text": "a" * 50_000}, 50_000),
        ("message.text.contains('b')", {"text": "a" * 50_000}, 50),
        ("message.l.contains(-1)", {"l": list(range(5000))}, 5000),
    ],
)
def test_comparing_is_charged_by_what_it_may_compare(source, message, at_least):
    assert steps_spent(source, message) >= at_least
    assert steps_spent(source, message) <= at_least + 200  # the tree's own steps, and no more


def test_comparing_small_values_costs_about_what_it_did_and_gives_the_same_answers():
    expression = compile_expression(
        "message.tags.all(t, t in message.allowed) && message.m == {'a': [1, 2]}"
        " && message.s.contains('ell') && message.allowed != [1]",
        ["message"],
    )
    message = {"tags": [1, 2], "allowed": [1, 2, 3], "m": {"a": [1, 2]}, "s": "hello"}
    assert expression.evaluate({"message": message}) is True
    assert expression.evaluate({"message": {**message, "tags": [4]}}) is False


def test_items_that_all_fail_in_a_macro_keep_one_error_not_each_joined_to_the_next():
    # cel-python joined two errors' texts into a new one as it reduced the macro: the
    # text doubled with each item, and 40 items without the field took 24 GB. Measured
    # as memory at 22 items (about 200 MB before), not as time.
    import tracemalloc  # noqa: PLC0415 - this test's only

    for macro in ("all", "exists"):
        expr = compile_expression(f"message.items.{macro}(i, i.price > 0)", ["message"])
        message = {"items": [{"name": "x"} for _ in range(22)]}
        tracemalloc.start()
        try:
            with pytest.raises(ExpressionError, match="no such member in mapping: 'price'"):
                expr.evaluate({"message": message})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 10_000_000, (macro, peak)
    # A false item still decides an all, and a true one an exists, whatever fails beside.
    decided = {"message": {"items": [{"name": "x"}, {"price": -1}, {"price": 1}]}}
    assert (
        compile_expression("message.items.all(i, i.price > 0)", ["message"]).evaluate(decided)
        is False
    )
    assert (
        compile_expression("message.items.exists(i, i.price > 0)", ["message"]).evaluate(decided)
        is True
    )


def test_a_result_giving_one_large_value_many_times_is_refused_as_built():
    # Small for cel-python (one string, referred to 500 times), but a copy each time once
    # plain data: 100 KB given 500 times held 50 MB (600 KB 1,500 times: 900 MB), within
    # every step. Measured as memory, not time.
    import tracemalloc  # noqa: PLC0415 - this test's only

    given = {"message": {"items": list(range(500)), "text": "x" * 100_000}}
    expr = compile_expression("message.items.map(i, message.text)", ["message"])
    tracemalloc.start()
    try:
        with pytest.raises(ExpressionError, match="built more than 4,000,000"):
            expr.evaluate(given)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000, peak
    # What it was given, given back whole, is not built: a large input passes through.
    large = {"message": {"items": [], "text": "x" * 5_000_000}}
    assert compile_expression("message.text", ["message"]).evaluate(large) == "x" * 5_000_000
