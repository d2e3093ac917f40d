"""A replay check's hold on journaled steps: no step body runs while one replays a run.

The replay check (``treadle.testing.replay``) re-runs a recorded superstep
with new code to see whether it decides the same. The steps of that
superstep already happened when the run was recorded: a reminder e-mailed,
a payment made. So while a check runs (this context variable set around
it), every ``ctx.step`` and ``ctx.saved_step`` returns the result the run
journaled, exactly as a resume does, and one the journal does not hold is
never called: :class:`StepNotReplayed` ends the replay of that superstep,
and the check reports it (a step the new code added, or one whose result
the run did not keep).

A context variable, not a run option: it is set by the check around the
runs it drives, reaches every handler task they start (tasks copy their
context), and no run outside it ever sees it.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._engine._delivery import Stamp
    from treadle._engine._journal import JournalEntry


@dataclass(frozen=True, slots=True)
class ReplayJournals:
    """The journals a recorded superstep ended its invocations with, by executor and stamp.

    An invocation that suspended in the recorded superstep kept every step
    it reached before its wait; replayed, it gets that journal from its
    start, so each of those steps returns its recorded result.
    """

    recorded: Mapping[tuple[str, Stamp], list[JournalEntry]] = field(default_factory=dict)

    def journal(
        self, executor_id: str, stamp: Stamp, delivered: list[JournalEntry] | None
    ) -> list[JournalEntry] | None:
        """The journal to re-execute with: the recorded one, else the one the message carries."""
        return self.recorded.get((executor_id, stamp), delivered)


REPLAYING: ContextVar[ReplayJournals | None] = ContextVar("treadle_replaying", default=None)
"""Set while a replay check drives a run: steps return journaled results or stop it."""


class StepNotReplayed(BaseException):
    """A replayed handler reached a step with no journaled result: it is not run.

    A ``BaseException``: it ends the replay of the superstep (the handler's
    own ``except Exception`` does not swallow it) and reaches the check
    that set :data:`REPLAYING`, which reports it.
    """

    def __init__(self, executor_id: str, kind: str, name: str, cursor: int) -> None:
        super().__init__(f"executor {executor_id!r}: {kind} {name!r} has no journaled result")
        self.executor_id = executor_id
        self.kind = kind
        self.name = name
        self.cursor = cursor
