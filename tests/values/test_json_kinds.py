"""A value of a kind its type refuses whatever it holds is refused as the whole check would.

An array answering a request for a dataclass, a model or an enum is refused
from the type's core schema and a stand-in (``[]``), before any walk of its
items; what is said is what the whole check says of it. A type whose own
code sees the raw value first may take an array: its values are checked in
full, as before.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest
from pydantic import BaseModel, RootModel, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from treadle._values import _strict
from treadle._values._json_kinds import kinds_refused
from treadle._values._strict import fit_type


@dataclass(frozen=True)
class Verdict:
    approved: bool
    note: str = ""


@dataclass(frozen=True)
class Thread:
    text: str
    reply: Thread | None = None


class Score(BaseModel):
    points: int


class Checked(BaseModel):
    points: int

    @model_validator(mode="after")
    def positive(self) -> Checked:
        return self


class Choice(enum.Enum):
    YES = "yes"
    NO = "no"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Points(RootModel[list[int]]):
    pass


@pydantic_dataclass
class Stamp:
    label: str


ARRAYS = ([], [1], [[]] * 3, ["yes", {"approved": True}], (True, "note"))


@pytest.mark.parametrize(
    ("cls", "refused"),
    [
        (Verdict, {"array"}),
        (Thread, {"array"}),
        (Score, {"array"}),
        (Checked, {"array"}),
        (Stamp, {"array"}),
        (Choice, {"array", "object"}),
        (Level, {"array", "object"}),
        (Points, {"object"}),
    ],
)
def test_a_kind_refused_whatever_it_holds_is_said_as_the_whole_check_says(cls, refused):
    assert kinds_refused(_strict._adapter(cls).core_schema) == refused
    schema, adapter = _strict._schema(cls), _strict._adapter(cls)
    for value in (*ARRAYS, {}, {"approved": True}, {"points": 1}):
        whole = _strict.fit_schema(
            value, schema, lambda data: adapter.validate_json(data, strict=True)
        )
        assert repr(fit_type(cls, value)) == repr(whole), value


class Tally(BaseModel):
    count: int

    @model_validator(mode="before")
    @classmethod
    def counted(cls, value: object) -> object:
        return {"count": len(value)} if isinstance(value, list) else value


class Wrapped(BaseModel):
    count: int

    @model_validator(mode="wrap")
    @classmethod
    def counted(cls, value: object, handler):
        return handler({"count": len(value)} if isinstance(value, list) else value)


class Lenient(enum.Enum):
    ANY = "any"

    @classmethod
    def _missing_(cls, value: object) -> Lenient:
        return cls.ANY


class Rights(enum.Flag):
    READ = 1
    WRITE = 2


@pydantic_dataclass
class Pair:
    first: int

    @model_validator(mode="before")
    @classmethod
    def from_list(cls, value: object) -> object:
        return {"first": value[0]} if isinstance(value, list) else value


def test_a_type_whose_own_code_sees_the_value_first_refuses_no_kind_and_takes_its_arrays():
    for cls in (Tally, Wrapped, Lenient, Rights, Pair):
        assert kinds_refused(_strict._adapter(cls).core_schema) == frozenset(), cls
    assert fit_type(Tally, [1, 2, 3]) == (Tally(count=3), [])
    assert fit_type(Wrapped, [[]] * 4) == (Wrapped(count=4), [])
    assert fit_type(Lenient, ["x"]) == (Lenient.ANY, [])
    assert fit_type(Pair, [7, 8]) == (Pair(first=7), [])
