"""A stored run's live events, handed to its store's live feed the moment they are raised.

The engine calls a stored run's ``relay`` with each ephemeral or
``before_barrier`` event (a token delta, progress) as a handler raises it;
this writes it as the log would (:func:`entry_of`) and publishes it on the
store's :class:`~treadle._stores._live.LiveFeed`, which never blocks: a
follower that is slow or gone costs the run nothing but the encoding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._checkpoints._journal import entry_of

if TYPE_CHECKING:
    from treadle._engine._clock import Clock
    from treadle._engine._events import WorkflowEvent
    from treadle._stores._live import LiveFeed


class LiveRelay:
    """Publishes a run's live events on its store's feed, stamped by the run's clock."""

    __slots__ = ("_clock", "_feed")

    def __init__(self, feed: LiveFeed, clock: Clock) -> None:
        self._feed = feed
        self._clock = clock

    def __call__(self, event: WorkflowEvent) -> None:
        """Publish ``event`` now (it goes to the log, if at all, at its barrier)."""
        self._feed.publish(event.run_id, entry_of(event, self._clock.now()))
