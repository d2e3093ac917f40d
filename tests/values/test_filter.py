"""The filter language: what it reads, and how it refuses what it cannot, naming the column."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search_support import filters
from treadle._values._filter import (
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_LIST,
    MAX_TERMS,
    AllOf,
    AnyOf,
    Compare,
    Has,
    Not,
    StartsWith,
    Subject,
    Value,
    parse_filter,
)
from treadle.errors import FilterError, TreadleError


def test_a_filter_reads_into_its_tree():
    tree = parse_filter('fields.customer == "42" && status == "waiting" || !has(fields.x)').tree
    assert tree == AnyOf(
        (
            AllOf(
                (
                    Compare(Subject("customer", field=True), "==", (Value("text", "42"),)),
                    Compare(Subject("status", field=False), "==", (Value("text", "waiting"),)),
                )
            ),
            Not(Has(Subject("x", field=True))),
        )
    )


def test_every_form_reads():
    for text in [
        'fields["customer"] != "a\\"b"',
        "fields.amount >= -1.5e3",
        "fields.vip",
        "fields.vip == false && outcome == null",
        'created_at < timestamp("2026-01-31T09:00:00Z")',
        'fields.region.startsWith("eu-")',
        'status in ["failed", "stalled"]',
        "true",
        "((fields.n > 1))",
    ]:
        parse_filter(text)
    starts = parse_filter('status.startsWith("wait")').tree
    assert starts == StartsWith(Subject("status", field=False), "wait")


@pytest.mark.parametrize(
    ("text", "column", "says"),
    [
        ("", 1, "empty"),
        ('fields.customer = "42"', 17, "unexpected character '='"),
        ("fields.customer ==", 19, "expected a value"),
        ('customer == "42"', 1, "unknown name 'customer'"),
        ("status == 3", 11, "status is a text"),
        ('created_at > "2026"', 14, "created_at is a time"),
        ('fields.a == "x" &&', 19, "expected a name"),
        ('(status == "x"', 15, "expected ')'"),
        ('status == "x" status', 15, "expected && or ||"),
        ("fields.a < true", 10, "true and false are compared with == or != only"),
        ("fields.a > null", 10, "null is compared with == or != only"),
        ('timestamp("x") == status', 1, "unknown name 'timestamp'"),
        ('fields.t > timestamp("yesterday")', 22, "not an RFC 3339 time"),
        ("has(status)", 5, "has() takes a search field"),
        ('fields.a == "\\q"', 14, "unknown escape"),
        ('fields.a == "report-\\udcff.txt"', 13, "holds half a surrogate pair (U+DCFF)"),
        ('fields.a == "\udcff"', 13, "holds half a surrogate pair (U+DCFF)"),
        ("fields.a.size() == 1", 9, "expected ==, !=, <, <=, >, >=, in"),
        ("fields.a in []", 14, "expected a value"),
    ],
)
def test_a_bad_filter_is_refused_naming_the_fault_and_its_column(text, column, says):
    with pytest.raises(FilterError) as refused:
        parse_filter(text)
    assert refused.value.column == column, str(refused.value)
    assert says in str(refused.value)
    assert isinstance(refused.value, TreadleError)
    assert isinstance(refused.value, ValueError)


def test_limits_refuse_huge_or_deep_filters_quickly():
    nested = "(" * 5000 + "true" + ")" * 5000
    negated = "!" * 100_000 + "true"
    long_or = " || ".join(['status == "x"'] * 10_000)
    many = " || ".join(f"fields.f{i} == 1" for i in range(MAX_TERMS + 1))
    listed = "status in [" + ", ".join(['"x"'] * (MAX_LIST + 1)) + "]"
    deep = "(" * (MAX_DEPTH + 1) + "true" + ")" * (MAX_DEPTH + 1)
    cases = [
        (nested, "longer than"),
        (negated, "longer than"),
        (long_or, "longer than"),
        (many, f"at most {MAX_TERMS} comparisons"),
        (listed, f"at most {MAX_LIST} values"),
        (deep, "nest deeper"),
        ("!" * (MAX_DEPTH + 1) + "true", "nest deeper"),
    ]
    for text, says in cases:
        started = time.perf_counter()
        with pytest.raises(FilterError, match=says):
            parse_filter(text)
        # Not a timing assertion of speed, a bound: a refusal must not be a hang.
        assert time.perf_counter() - started < 5
    parse_filter("(" * MAX_DEPTH + "true" + ")" * MAX_DEPTH)
    assert len(nested) > MAX_LENGTH


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_any_text_is_read_or_refused_with_a_filter_error(text):
    column = None
    try:
        parse_filter(text)
    except FilterError as refused:
        column = refused.column
    assert column is None or 1 <= column <= len(text) + 1


@settings(max_examples=200)
@given(drawn=filters())
def test_every_generated_filter_reads(drawn):
    parse_filter(drawn[0])


def test_an_escaped_surrogate_pair_is_one_character_as_json_reads_it():
    (value,) = parse_filter('fields.mood == "\\ud83d\\ude00"').tree.values  # type: ignore[union-attr]
    assert value.value == "\N{GRINNING FACE}"
