"""Searchable run fields: what a workflow declares, and the typed values its commits write.

Finding "the runs of customer 42" must not mean reading every run's
checkpoint. So a workflow declares a few **search fields**, each a name, a
kind and a function over the run's input or its committed state; every
commit of the run computes them and the store writes them, in the
transaction of the checkpoint, into an indexed table (one row per run and
field). A filter (:mod:`treadle._values._filter`) then reads that index.

Two sources, because they differ in when they are known:

* an **input** field is computed once, from the run's input, by the commit
  that creates the run (the input is delivered then and never again);
* a **state** field is computed from the committed state at every commit,
  so it always says what the run's latest checkpoint holds. ``None`` unsets it.

Four kinds: ``text`` (``str``), ``number`` (``int`` or ``float``), ``time``
(``datetime``; naive ones are taken as UTC) and ``bool``. A value of
another type, a text longer than :data:`MAX_TEXT`, or a function that
raises leaves the field unset at that commit, with a warning naming the run
and the field: a field is an index over a run, never a reason for it to fail.
"""

from __future__ import annotations

import enum
import logging
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from treadle._values._text import lone_surrogate

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

logger = logging.getLogger("treadle.search")

MAX_TEXT = 512
"""The longest text value a field keeps, in characters (an index key stays small)."""

MAX_FIELDS = 32
"""How many search fields one workflow may declare."""

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class FieldKind(enum.Enum):
    """The type of a search field's values, which says how filters compare them."""

    TEXT = "text"
    NUMBER = "number"
    TIME = "time"
    BOOL = "bool"

    @classmethod
    def of(cls, kind: object) -> FieldKind:
        """The kind a type (``str``, ``float``, ``int``, ``datetime``, ``bool``) or name gives.

        Raises:
            ValueError: ``kind`` is none of them.
        """
        by_type: dict[object, FieldKind] = {
            str: cls.TEXT,
            float: cls.NUMBER,
            int: cls.NUMBER,
            datetime: cls.TIME,
            bool: cls.BOOL,
        }
        if kind in by_type:
            return by_type[kind]
        if isinstance(kind, str):
            try:
                return cls(kind)
            except ValueError:
                pass
        names = "str, int, float, datetime, bool (or 'text', 'number', 'time', 'bool')"
        msg = f"a search field's kind is one of {names}, got {kind!r}"
        raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class FieldValue:
    """One search field of one run, as a commit writes it and a store keeps it.

    Attributes:
        name: The field's name.
        kind: Its kind's name (``"text"``, ``"number"``, ``"time"``, ``"bool"``).
        text: The value of a text field.
        number: The value of any other field: a number, a time as seconds
            since the epoch, a bool as 1.0 or 0.0.

    Both ``text`` and ``number`` ``None``: the field is unset (a commit
    deletes it).
    """

    name: str
    kind: str
    text: str | None = None
    number: float | None = None

    @property
    def unset(self) -> bool:
        """Whether this value unsets the field."""
        return self.text is None and self.number is None

    def plain(self) -> str | float | bool | datetime | None:
        """The value as Python has it (a ``datetime`` in UTC for a time)."""
        if self.kind == FieldKind.TEXT.value:
            return self.text
        if self.number is None:
            return None
        if self.kind == FieldKind.BOOL.value:
            return self.number != 0
        if self.kind == FieldKind.TIME.value:
            return datetime.fromtimestamp(self.number, UTC)
        return self.number


@dataclass(frozen=True, slots=True)
class SearchField:
    """A search field a workflow declares (``WorkflowBuilder.add_search_field``).

    Attributes:
        name: Lower-case letters, digits and ``_``, starting with a letter
            or ``_``; how filters name it (``fields.customer``).
        kind: The type of its values.
        source: ``"input"`` (computed once, from the run's input) or
            ``"state"`` (from the committed state, at every commit).
        value: The function: given the input, or the state as a mapping.
    """

    name: str
    kind: FieldKind
    source: str
    value: Callable[[Any], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            msg = (
                f"a search field's name is lower-case letters, digits and _ "
                f"(at most 63, not starting with a digit), got {self.name!r}"
            )
            raise ValueError(msg)
        if self.source not in ("input", "state"):
            msg = f"a search field's source is 'input' or 'state', got {self.source!r}"
            raise ValueError(msg)
        if not callable(self.value):
            msg = f"search field {self.name!r}: its value must be callable, got {self.value!r}"
            raise TypeError(msg)

    def compute(self, given: Any, run_id: str) -> FieldValue:
        """This field's value over ``given`` (the input, or the state), unset when it has none."""
        try:
            value = self.value(given)
        except Exception as error:  # noqa: BLE001 - a field never fails its run (module doc)
            logger.warning("run %s: search field %r raised %r; unset", run_id, self.name, error)
            return FieldValue(self.name, self.kind.value)
        return typed(self.name, self.kind, value, run_id)


def typed(name: str, kind: FieldKind, value: object, run_id: str) -> FieldValue:
    """``value`` as a field of ``kind`` (unset, with a warning, if it is not one)."""
    unset = FieldValue(name, kind.value)
    if value is None:
        return unset
    if kind is FieldKind.TEXT and isinstance(value, str):
        if len(value) > MAX_TEXT:
            problem = f"a text of {len(value)} characters (at most {MAX_TEXT} are kept)"
        elif (at := lone_surrogate(value)) is not None:
            problem = f"a text with a lone surrogate at position {at} (stored text is UTF-8)"
        else:
            return FieldValue(name, kind.value, text=value)
    elif (
        kind is FieldKind.NUMBER and isinstance(value, int | float) and not isinstance(value, bool)
    ):
        number = float(value)
        if math.isfinite(number):
            return FieldValue(name, kind.value, number=number)
        problem = f"the number {value!r}"
    elif kind is FieldKind.BOOL and isinstance(value, bool):
        return FieldValue(name, kind.value, number=1.0 if value else 0.0)
    elif kind is FieldKind.TIME and isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return FieldValue(name, kind.value, number=moment.timestamp())
    else:
        problem = f"a {type(value).__name__}, not a {kind.value}"
    logger.warning("run %s: search field %r is %s; unset", run_id, name, problem)
    return unset


@dataclass(frozen=True, slots=True)
class SearchFields:
    """The search fields of a workflow, in the order declared (empty: none)."""

    fields: tuple[SearchField, ...] = ()

    def __post_init__(self) -> None:
        names = [field.name for field in self.fields]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            msg = f"search fields declared twice: {', '.join(twice)}"
            raise ValueError(msg)
        if len(names) > MAX_FIELDS:
            msg = f"a workflow declares at most {MAX_FIELDS} search fields, got {len(names)}"
            raise ValueError(msg)

    def __bool__(self) -> bool:
        return bool(self.fields)

    def of_input(self, message: Any, run_id: str) -> tuple[FieldValue, ...]:
        """The input fields' values over the run's input (written when the run is created)."""
        return tuple(f.compute(message, run_id) for f in self.fields if f.source == "input")

    def of_state(self, state: Mapping[str, Any], run_id: str) -> tuple[FieldValue, ...]:
        """The state fields' values over a committed state (written at every commit)."""
        return tuple(f.compute(state, run_id) for f in self.fields if f.source == "state")


NO_SEARCH_FIELDS = SearchFields()
"""A workflow without search fields (frozen, so one value serves every workflow)."""


def merged(batches: Iterable[tuple[FieldValue, ...]]) -> tuple[FieldValue, ...]:
    """Several commits' field values as one write: the last value of each field wins."""
    last: dict[str, FieldValue] = {}
    for values in batches:
        for value in values:
            last[value.name] = value
    return tuple(last.values())
