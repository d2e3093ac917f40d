"""An invocation's journal: the steps and waits it reached, replayed when it re-executes.

A handler suspended at a durable wait re-executes from the top once the
wait is satisfied (see ``_engine/_waits.py``); its journal gives each
``ctx.step`` and each wait it meets again its recorded value, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from treadle._exceptions import JournalMismatchError, RequestTimeoutError

if TYPE_CHECKING:
    from collections.abc import Sequence

JournalEntry: TypeAlias = tuple[str, str, Any]
"""("step", step name, result), ("wait", wait key, value) or ("timeout", wait key, deadline)."""


class Journal:
    """One invocation's record of its steps and waits, replayed when it re-executes.

    A handler re-executed after a durable wait meets its steps and waits in
    the same order as before: each one reached while entries remain gets its
    recorded value back (and must be the one recorded there); past the end,
    new results are recorded.
    """

    __slots__ = ("_cursor", "_entries")

    def __init__(self, recorded: Sequence[JournalEntry] = ()) -> None:
        self._entries: list[JournalEntry] = list(recorded)
        self._cursor = 0

    @property
    def cursor(self) -> int:
        """How many steps and waits the handler has reached so far."""
        return self._cursor

    @property
    def replaying(self) -> bool:
        """Whether recorded entries remain to be replayed."""
        return self._cursor < len(self._entries)

    @property
    def entries(self) -> list[JournalEntry]:
        """Every entry, recorded before and since, in order."""
        return self._entries

    def replay(
        self, executor_id: str, kind: str, name: str, alias: str | None = None
    ) -> tuple[bool, Any]:
        """``(True, value)`` for the next recorded entry, ``(False, None)`` past the end.

        ``alias``: another name the entry may have been recorded under (a wait
        recorded before wait keys were scoped).

        Raises:
            JournalMismatchError: the entry recorded here is another step or wait.
            RequestTimeoutError: the wait asked for timed out here (its deadline
                passed unanswered), which the handler meets where it awaited.
        """
        if self._cursor >= len(self._entries):
            return False, None
        recorded_kind, recorded_name, value = self._entries[self._cursor]
        if alias is not None and recorded_name == alias:
            recorded_name = name
        if (recorded_kind, recorded_name) != (kind, name):
            if (recorded_kind, kind, recorded_name) == ("timeout", "wait", name):
                self._cursor += 1  # the wait's deadline passed: raised where it is awaited
                raise RequestTimeoutError(executor_id, name, value)
            raise JournalMismatchError(
                executor_id, self._cursor, f"{recorded_kind} {recorded_name!r}", f"{kind} {name!r}"
            )
        self._cursor += 1
        return True, value

    def record(self, kind: str, name: str, value: Any) -> None:
        """Append a new entry (only once every recorded one was replayed)."""
        self._entries.append((kind, name, value))
        self._cursor += 1
