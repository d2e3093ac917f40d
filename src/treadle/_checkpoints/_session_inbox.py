"""A session's inbox as its owner reads it between supersteps (the loop's ``InputFeed``).

Messages sent under an input policy wait in the run's inbox, in the
order the store gave them, until the session's policy lets the loop take
them (``_engine/_inputs.py``). What the loop takes is marked applied with
the run's next commit, in the same transaction as the checkpoint that
holds it: a crash in between leaves it in the inbox for the next owner.
Until that commit this reader remembers what it handed over, so a
superstep that runs while the last commit is still being written (the
background durability modes) does not take it twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from treadle._checkpoints._inbox import marker_deadline
from treadle._engine._arrivals import Answer, Expiry
from treadle._engine._inputs import QueuedInput
from treadle._graph._input_policy import policy_of_kind

logger = logging.getLogger("treadle.runtime")

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from treadle._checkpoints._ownership import Ownership
    from treadle._engine._inputs import FeedItem
    from treadle._stores._lease_roles import Deliveries
    from treadle._values._serialization import Serializer


class SessionInbox:
    """The inbox of one run, read by the process that owns it.

    Args:
        store: Where the run lives.
        run_id: The run.
        serializer: Decodes what the inbox holds.
        ownership: The lease the run is held under (what was read before
            it was opened, its ``consumed``, is not read again).
        misdirected: Why a message's target cannot be reached (``None``:
            it can). Such a message is refused on the record, in this
            process's name, and never taken: a sender without the workflow's
            code (a ``Client``, a store's ``deliver``) cannot check it, and
            taken into a running turn it failed the whole session.
    """

    def __init__(
        self,
        store: Deliveries,
        run_id: str,
        serializer: Serializer,
        ownership: Ownership,
        misdirected: Callable[[str | None], str | None],
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._serializer = serializer
        self._ownership = ownership
        self._misdirected = misdirected
        self._taken = ownership.consumed or 0
        self.rollback: QueuedInput | None = None
        self._ahead: set[int] = set()  # taken from behind a message that waits (see applied)

    async def unapplied(self) -> list[FeedItem]:
        """The items after those taken already, in the store's order.

        Raises:
            DurabilityError: the store could not be read.
        """
        loads = self._serializer.loads
        found: list[FeedItem] = []
        refused: list[tuple[int, str]] = []
        for item in await self._store.inbox(self._run_id):
            if item.seq <= self._taken:
                continue
            if item.seq in self._ahead:  # applied already (see applied)
                if not found:  # nothing before it waits now: the prefix marked reaches it
                    self.applied(item.seq)
                continue
            self._ownership.seen = max(self._ownership.seen, item.seq)
            policy = policy_of_kind(item.kind)
            target = item.target
            if policy is not None and (wrong := self._misdirected(target)) is not None:
                refused.append((item.seq, wrong))
            elif policy is not None:
                queued = QueuedInput(item.seq, loads(item.payload), target, policy, item.created_at)
                found.append((item.seq, queued))
            elif item.kind == "answer" and target is not None:
                if marker_deadline(item.payload) is not None:
                    found.append((item.seq, Expiry(frozenset({target}))))
                else:
                    found.append((item.seq, Answer(target, loads(item.payload), strict=False)))
        if refused:  # out of the inbox, each on the record; the items after them go on
            await self._ownership.refuse_inbox(refused)
            for seq, reason in refused:
                logger.warning("run %s: inbox item %d refused: %s", self._run_id, seq, reason)
        return found

    @property
    def seen(self) -> int:
        """The newest item read: what came after it came after the loop's last look."""
        return max(self._taken, self._ownership.seen)

    def applied(self, seq: int | None, ahead: Sequence[int] = ()) -> None:
        """Mark the items up to ``seq`` applied with the run's next commit.

        ``ahead``: answers taken from behind a message that waits for the
        session's next rest. The store marks a prefix of the inbox applied:
        they stay unmarked until that message is taken, and are not handed
        over again meanwhile. Read again by another owner, each answers a
        request its checkpoint no longer waits on, and is left alone
        (``sort_inbox``).
        """
        self._ahead.update(ahead)
        if seq is None:
            return
        self._taken = max(self._taken, seq)
        ownership = self._ownership
        ownership.consumed = max(ownership.consumed or 0, seq)

    def abandon(self, rollback: QueuedInput) -> None:
        """Keep a message that rolls the running turn back, for the run's driver (see ``drive``)."""
        self.rollback = rollback

    def now(self) -> float:
        """The store's clock (the wall clock, as leases): what inbox times are read on."""
        return time.time()

    async def wait_until(self, at: float) -> None:
        """Sleep until ``at`` on the store's clock (a debounce burst waiting to be quiet)."""
        await asyncio.sleep(max(0.0, at - time.time()))
