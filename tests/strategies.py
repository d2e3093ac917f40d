"""Hypothesis strategies and sample types for property tests, with a deep type-equality check."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
from decimal import Decimal
from typing import Any

import pydantic
from hypothesis import strategies as st

from treadle._values._serialization import TAG, TypeRegistry


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Perm(enum.Flag):
    READ = 1
    WRITE = 2


class Shape(enum.Enum):
    POINT = (0, 0)
    LINE = (1, 2)


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: float


@dataclasses.dataclass
class Node:
    label: str
    payload: Any
    children: list[Node] = dataclasses.field(default_factory=list)
    visits: int = dataclasses.field(init=False, default=0)


@dataclasses.dataclass(slots=True)
class Slotted:
    when: dt.datetime
    amount: Decimal


class Owner(pydantic.BaseModel):
    name: str
    score: float
    tags: tuple[str, ...]
    color: Color
    level: Level


class Doc(pydantic.BaseModel):
    title: str = pydantic.Field(alias="Title")
    owner: Owner | None
    counts: dict[str, int]
    born: dt.date


ENUMS: tuple[enum.Enum, ...] = (*Color, *Level, *Perm, Perm.READ | Perm.WRITE, *Shape)


def make_registry() -> TypeRegistry:
    """The allowlist a workflow handling these types would build from its annotations."""
    registry = TypeRegistry()
    registry.register_annotation(Node | Slotted | Doc | list[Point] | dict[str, Shape | Perm])
    return registry


offsets = st.timedeltas(min_value=-dt.timedelta(hours=23), max_value=dt.timedelta(hours=23))
zones = st.one_of(
    st.just(dt.UTC),
    offsets.map(dt.timezone),
    st.builds(dt.timezone, offsets, st.text(max_size=5)),
    st.timezones(),
)
clocks = st.one_of(
    st.datetimes(),
    st.datetimes(timezones=zones),
    st.times(),
    st.times(timezones=zones),
    st.dates(),
    st.timedeltas(),
)
hashable_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(max_size=20),
    clocks,
    st.decimals(allow_nan=False),
    st.uuids(),
    st.sampled_from(ENUMS),
    st.builds(Point, st.integers(), st.floats(allow_nan=False)),
)
hashables = st.recursive(
    hashable_leaves,
    lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
    max_leaves=6,
)
owners = st.builds(
    Owner,
    name=st.text(),
    score=st.floats(),
    tags=st.lists(st.text(), max_size=3).map(tuple),
    color=st.sampled_from(Color),
    level=st.sampled_from(Level),
)
docs = st.builds(
    lambda title, **kw: Doc(Title=title, **kw),
    title=st.text(),
    owner=st.none() | owners,
    counts=st.dictionaries(st.text(), st.integers(), max_size=3),
    born=st.dates(),
)
leaves = st.one_of(
    hashables,
    st.floats(),  # nan and infinities
    st.decimals(),  # NaN and sNaN
    st.binary(max_size=20).map(bytearray),
    owners,
    docs,
    st.builds(Slotted, st.datetimes(timezones=zones), st.decimals(allow_nan=False)),
)


def _node(label: str, payload: Any, children: list[Node], visits: int) -> Node:
    node = Node(label, payload, children)
    node.visits = visits
    return node


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(), inner, max_size=4),
        st.dictionaries(st.sampled_from([TAG, "v", "n", "x"]), inner, max_size=4),
        st.dictionaries(hashables, inner, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.builds(
            _node,
            st.text(max_size=5),
            inner,
            st.lists(st.builds(_node, st.text(), inner, st.just([]), st.integers()), max_size=2),
            st.integers(),
        ),
    )


values = st.recursive(leaves, _containers, max_leaves=25)


def assert_same(a: Any, b: Any, path: str = "value") -> None:
    """Assert ``a`` and ``b`` are equal and of exactly the same types all the way down."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, enum.Enum):
        assert a is b, f"{path}: {a!r} is not {b!r}"
    elif type(a) is float:
        same = (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
        assert same, f"{path}: {a!r} != {b!r}"
    elif type(a) is Decimal:
        assert str(a) == str(b), f"{path}: {a!r} != {b!r}"
    elif type(a) in (list, tuple):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif type(a) is dict:
        assert len(a) == len(b), f"{path}: sizes differ"
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            assert_same(ka, kb, f"{path}<key {ka!r}>")
            assert_same(va, vb, f"{path}[{ka!r}]")
    elif type(a) in (set, frozenset):
        assert a == b, f"{path}: {a!r} != {b!r}"
        lookup = {x: x for x in b}
        for x in a:
            assert_same(x, lookup[x], f"{path}<element {x!r}>")
    elif type(a) in (dt.datetime, dt.time):
        assert a.replace(tzinfo=None) == b.replace(tzinfo=None), f"{path}: {a!r} != {b!r}"
        assert a.fold == b.fold, f"{path}: fold {a.fold} != {b.fold}"
        assert type(a.tzinfo) is type(b.tzinfo), f"{path}: {a.tzinfo!r} vs {b.tzinfo!r}"
        assert a.tzinfo == b.tzinfo, f"{path}: {a.tzinfo!r} != {b.tzinfo!r}"
        assert a.tzname() == b.tzname(), f"{path}: {a.tzname()} != {b.tzname()}"
    elif dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{path}.{field.name}")
    elif isinstance(a, pydantic.BaseModel):
        for name in type(a).model_fields:
            assert_same(getattr(a, name), getattr(b, name), f"{path}.{name}")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"
