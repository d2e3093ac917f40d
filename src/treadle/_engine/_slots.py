"""Making the engine's per-superstep and per-run values without calling their classes.

On Python 3.11 calling a class whose ``__init__`` (or ``__new__``) is
written in Python costs several hundred instructions more than setting its
slots one by one, and a frozen dataclass's ``__init__`` goes through
``object.__setattr__`` for each field. The barrier makes several such values
every superstep and a run makes more as it opens and ends, so those hot
paths make them :func:`blank` and set each slot, and a frozen dataclass by
way of its :func:`unfrozen_twin`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

blank = object.__new__
"""An instance of a class with no slot set, its ``__init__`` not called."""


def unfrozen_twin(frozen: type[Any]) -> type[Any]:
    """A slotted, unfrozen dataclass with ``frozen``'s fields in the same order.

    One made :func:`blank` and set slot by slot becomes a ``frozen`` by
    assigning its ``__class__`` (the slot layouts match), and is frozen from
    then on like any other.
    """
    return dataclasses.make_dataclass(
        f"_{frozen.__name__}Draft",
        [
            (f.name, f.type)
            if f.default is dataclasses.MISSING
            else (f.name, f.type, dataclasses.field(default=f.default))
            for f in dataclasses.fields(frozen)
        ],
        slots=True,
    )
