"""Answers whose objects sit in a union, a list, a tuple or a mapping, checked as strictly.

Unknown keys are refused by name wherever an object sits, never dropped;
a union's object is checked as the member it is an answer for; and a
decision inside any of them is never left to its default. Each case was
found wrong from outside: a right answer for a union's second member was
refused as unknown keys of the first, keys inside list items, tuple items
and mapping values were dropped in silence, a whole number past what a
float holds was taken as ``inf`` for a float, and a NaN inside a set or an
iterator given from Python went through.
"""

from __future__ import annotations

import enum
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, RootModel

from treadle import WorkflowBuilder, WorkflowContext, executor
from treadle.errors import InvalidResponseError
from treadle.stores import MemoryStore


class Item(BaseModel):
    a: int = 0


class Other(BaseModel):
    z: int = 0


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Decision(BaseModel):
    ok: bool = False
    color: Color = Color.RED


class InUnion(BaseModel):
    u: Other | Item


class InList(BaseModel):
    items: list[Item]


class InTuple(BaseModel):
    t: tuple[Item, int]


class InMapping(BaseModel):
    d: dict[str, Item]


class Items(RootModel[list[Item]]):
    pass


class Decisions(BaseModel):
    ds: dict[str, Decision]


class Scores(BaseModel):
    scores: list[float]


class Counted(BaseModel):
    n: int


class Nested(BaseModel):
    ok: bool
    d: list


class Pair(BaseModel):
    a: list
    b: list


def nested(levels: int, inside: object = None) -> list:
    """A list holding a list, ``levels`` deep (the innermost empty, or holding ``inside``)."""
    made: list = [] if inside is None else [inside]
    for _ in range(levels - 1):
        made = [made]
    return made


@pytest.mark.parametrize(
    ("kind", "answer", "refused"),
    [
        (InUnion, {"u": {"a": 1}}, None),  # the union's second member: taken as it
        (InUnion, {"u": {"z": 1}}, None),
        (InUnion, {"u": {"a": 1, "zz": 2}}, "u.zz: no such field (it has: z, a)"),
        (InList, {"items": [{"a": 1}, {"a": 2, "zz": 3}]}, "items.1.zz: no such field"),
        (Items, [{"a": 1, "zz": 2}], "0.zz: no such field (it has: a)"),
        (InTuple, {"t": [{"a": 1, "zz": 2}, 3]}, "t.0.zz: no such field (it has: a)"),
        (InMapping, {"d": {"k": {"a": 1, "zz": 2}}}, "d.k.zz: no such field (it has: a)"),
        (InMapping, {"d": {"k": {"a": 1}}}, None),
        (Decisions, {"ds": {"k": {"ok": True}}}, "ds.k.color: not given, and a decision"),
        (Decisions, {"ds": {"k": {"ok": True, "color": "blue"}}}, None),
        # A whole number past a float, written whole: pydantic made it inf for a float.
        (Scores, {"scores": [1.5, 10**400]}, "scores.1: a whole number past what a float holds"),
        (Counted, {"n": 10**400}, None),  # an int holds it
        # From Python, a set is an array too: what it holds is looked into.
        (Scores, {"scores": {float("nan")}}, "scores.0: nan is not a JSON number"),
        (Scores, {"scores": frozenset({float("inf")})}, "scores.0: inf is not a JSON number"),
        # An iterator is not: looked into, it would be used up (a NaN in one went through).
        (Scores, {"scores": iter([float("nan")])}, "scores: an iterator is not an answer's"),
        # Past what pydantic writes (it said "value: Error serializing"), named as past
        # what it reads is.
        (Nested, {"ok": True, "d": nested(260)}, "d: nests arrays and objects too deeply"),
        # The deeper is named, an empty array at the bottom a level as any (b was named).
        (Pair, {"a": nested(201), "b": nested(200, 1)}, "a: nests arrays and objects too deeply"),
    ],
)
async def test_an_object_anywhere_in_an_answer_is_checked_as_strictly(kind, answer, refused):
    @executor(id="ask")
    async def ask(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await ctx.request({"text": text}, kind))

    workflow = WorkflowBuilder(ask, name="ask").register_type(kind).build()
    store = MemoryStore()
    (request,) = (await workflow.run("x", run_id="r", store=store)).pending_requests
    if refused is None:
        done = await workflow.respond("r", {request.request_id: answer}, store=store)
        assert done.outputs == [kind.model_validate(answer)]
        return
    with pytest.raises(InvalidResponseError) as caught:
        await workflow.respond("r", {request.request_id: answer}, store=store)
    assert refused in str(caught.value)
    assert (await store.inbox("r")) == []  # nothing delivered


class Reviewed(BaseModel):
    items: list[Item]
    ok: bool = False


def test_the_decision_walk_passes_by_parts_that_can_hold_no_decision(monkeypatch):
    # An answer of two million items was walked for decisions item by item (6.7 s), where
    # its items could hold none. Counted as the walk's steps, not timed.
    from treadle._values import _decisions  # noqa: PLC0415 - the walk, counted

    steps = []
    real = _decisions._object_form
    monkeypatch.setattr(_decisions, "_object_form", lambda *args: steps.append(1) or real(*args))
    items = [{"a": n} for n in range(10_000)]
    assert _decisions.decisions_left_to_default(InList, {"items": items}) == []
    assert _decisions.decisions_left_to_default(Reviewed, {"items": items}) == [
        "ok: not given, and a decision is never left to its default (false)"
    ]
    assert len(steps) < 20, len(steps)  # a few for the types, none for each of the items


def test_a_field_too_deep_to_read_is_found_down_one_chain_not_level_by_level(monkeypatch):
    # 16 MiB of chains of arrays 200 deep was walked level by level over the whole value to
    # name the field (8 s). Counted as the parts looked into, not timed.
    from treadle._values import _strict  # noqa: PLC0415 - the walk, counted

    looked = []
    real = _strict._items
    monkeypatch.setattr(_strict, "_items", lambda part: looked.append(1) or real(part))
    answer = {"ok": True, "d": [nested(201) for _ in range(1_000)]}
    refused = _strict.fit_type(Nested, answer)[1]
    assert refused == ["d: nests arrays and objects too deeply to be checked"]
    assert len(looked) < 1_000, len(looked)  # one chain gone down, not 201,000 parts


def test_a_problem_a_million_levels_down_is_named_by_its_path_start_and_length():
    # The check kept each container's path as a tuple of its keys, copied again a level
    # down: a value n deep cost n²/2 copies (100,000 deep: 21 s; a million: about an hour,
    # past the suite's timeout). A place is now made from its parent's in constant time.
    from treadle._values import _strict  # noqa: PLC0415 - the walk itself

    deep: list[object] = [float("nan")]
    for _ in range(1_000_000):
        deep = [deep]
    assert _strict.not_json(deep) == [
        f"{'0.' * 30}... ({2_000_001:,} characters): nan is not a JSON number"
    ]


@given(st.lists(st.one_of(st.integers(-5, 10**6), st.text(max_size=130)), max_size=40))
def test_a_place_is_shown_as_the_path_of_its_keys_is(keys):
    from treadle._values import _places  # noqa: PLC0415 - the two spellings compared

    place = _places.WHOLE
    for key in keys:
        place = _places.inside(place, key)
    assert _places.shown(place) == _places.where(tuple(keys))


class _Entry(BaseModel):
    a: int = 0


class _ByName(BaseModel):
    d: dict[str, _Entry]


class _Line(BaseModel):
    ok: bool = False


class _Review(BaseModel):
    groups: dict[str, list[_Line]]


class _Kids(BaseModel):
    kids: dict[str, _Kids] = {}


class _Loose(BaseModel):
    ok: bool
    d: list


def _peak_bytes(check):
    tracemalloc.start()
    try:
        return check(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_unknown_keys_under_a_long_key_are_counted_not_each_given_its_whole_path():
    # Each unknown key's path was the long key's text again: 5,000 keys under a key of
    # 100,000 characters held 500 MB before the answer was refused (a 1 MiB HTTP body:
    # some 25 GB). Measured as memory, not time.
    from treadle._values import _strict  # noqa: PLC0415 - the check itself

    answer = {"d": {"k" * 100_000: {f"x{i}": 0 for i in range(5_000)}}}
    refused, peak = _peak_bytes(lambda: _strict.fit_type(_ByName, answer)[1])
    assert refused[0] == (f"d.{'k' * 58}... (100,005 characters): no such field (it has: a)")
    assert refused[-1] == "value: 4980 more fields it has no place for"
    assert peak < 20_000_000, peak


def test_a_decision_looked_for_under_a_long_key_does_not_copy_it_for_each_item():
    from treadle._values import _decisions  # noqa: PLC0415 - the walk itself

    answer = {"groups": {"k" * 100_000: [{"ok": True} for _ in range(2_000)] + [{}]}}
    left, peak = _peak_bytes(lambda: _decisions.decisions_left_to_default(_Review, answer))
    said = f"groups.{'k' * 53}... (100,015 characters): not given, and a decision is never"
    assert left == [f"{said} left to its default (false)"]
    assert peak < 20_000_000, peak  # 200 MB when each item held its path


def test_the_look_for_a_float_past_its_range_keeps_no_path_for_each_item():
    from treadle._values import _strict  # noqa: PLC0415 - the check itself

    inner: list[object] = [0] * 100_000 + [10**308]  # 309 digits: looked for, and a float
    for _ in range(150):
        inner = [inner]
    problems, peak = _peak_bytes(lambda: _strict.fit_type(_Loose, {"ok": True, "d": inner})[1])
    assert problems == []
    assert peak < 50_000_000, peak  # 136 MB when each item held its location


def test_a_self_referencing_type_thousands_deep_is_checked_without_recursion():
    from treadle._values import _strict  # noqa: PLC0415 - the check itself

    answer: dict[str, object] = {}
    for _ in range(5_000):
        answer = {"kids": {"k": answer}}
    answer["kids"]["k"]["stray"] = 1  # type: ignore[index]
    problems = _strict.fit_type(_Kids, answer)[1]  # a RecursionError out of respond before
    assert problems[0].startswith("kids.k.stray: no such field (it has: kids)")


def test_a_whole_number_past_a_float_is_found_after_a_run_of_shorter_ones():
    from treadle._values import _strict  # noqa: PLC0415 - the pattern itself

    text = b"[" + b",".join([b"9" * 308] * 3 + [b"1" + b"0" * 308]) + b"]"
    assert _strict._HUGE_INTEGER.search(text) is not None
    assert _strict._HUGE_INTEGER.search(text.replace(b"1" + b"0" * 308, b"1")) is None
