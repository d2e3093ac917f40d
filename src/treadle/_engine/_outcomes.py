"""A run's named outcome: checked where a handler sets it, decided at the barrier.

An outcome (``"approved"``, ``"rejected"``, ...) with an optional one-line
summary is the business answer a run ends with, shown beside its status in
every list. A handler sets it with ``ctx.set_outcome``; like a state write
it is buffered on the invocation and committed at the barrier, so an
invocation that fails or suspends sets nothing. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from treadle._engine._errors import OutcomeConflictError
from treadle._values._text import unstorable

if TYPE_CHECKING:
    from collections.abc import Sequence

Outcome = tuple[str, str | None]
"""An outcome's name and its summary (``None``: none given)."""

MAX_NAME = 64
"""Characters an outcome's name may have: a word a list shows beside a status."""
MAX_SUMMARY = 200
"""Characters an outcome's summary may have: one line in a list."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")


def checked_outcome(executor_id: str, name: object, summary: object) -> Outcome:
    """``(name, summary)`` once both are fit to be shown beside a run's status.

    Raises:
        TypeError: ``name`` or ``summary`` is not a ``str``.
        ValueError: ``name`` is not a short identifier-like word, or
            ``summary`` is not one line of at most :data:`MAX_SUMMARY` characters.
    """
    where = f"executor {executor_id!r} set the run's outcome"
    if not isinstance(name, str):
        msg = f"{where} to {name!r}: an outcome name must be a str, not {type(name).__name__}"
        raise TypeError(msg)
    if summary is not None and not isinstance(summary, str):
        msg = f"{where} with summary {summary!r}: a summary must be a str or None"
        raise TypeError(msg)
    if len(name) > MAX_NAME or _NAME.fullmatch(name) is None:
        msg = (
            f"{where} to {name!r}: an outcome name is a letter then letters, digits, '_', "
            f"'-' or '.', at most {MAX_NAME} characters (e.g. 'approved')"
        )
        raise ValueError(msg)
    if summary is not None:
        if (problem := unstorable(f"{where} with summary", summary)) is not None:
            raise ValueError(problem)
        if "\n" in summary or "\r" in summary:
            msg = f"{where} with summary {summary[:40]!r}...: a summary is one line"
            raise ValueError(msg)
        if len(summary) > MAX_SUMMARY:
            msg = (
                f"{where} with a summary of {len(summary)} characters: a summary is at most "
                f"{MAX_SUMMARY} characters"
            )
            raise ValueError(msg)
    return name, summary


def decided_outcome(set_by: Sequence[tuple[str, Outcome]], superstep: int) -> Outcome:
    """The one outcome the executors of a superstep set (``set_by``: who set what, in order).

    Raises:
        OutcomeConflictError: two of them set different outcomes.
    """
    first_executor, first = set_by[0]
    for executor_id, outcome in set_by[1:]:
        if outcome != first:
            said = (first[0], outcome[0])
            if said[0] == said[1]:  # the same name, other summaries: name those
                said = (f"{first[0]}: {first[1]}", f"{outcome[0]}: {outcome[1]}")
            raise OutcomeConflictError((first_executor, executor_id), said, superstep)
    return first
