"""``MemoryStore``'s webhooks and answer links (see :mod:`treadle._stores._outbox`).

The outbox is fed from the runs' event logs under the store's lock, before
any read or claim of it: each run's log is read from where the last feed
stopped, so every writer of a log feeds it (as the SQL stores' trigger
does), and an event logged before its endpoint was added causes nothing.
A memory store lives and dies with its process, so nothing here outlives
it; what it shows is the behaviour of the durable stores.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from treadle._stores._answer_links import AnswerLink, new_key
from treadle._stores._outbox import (
    DEADLINE_NEAR,
    Endpoint,
    Outbox,
    OutboxMessage,
    messages_for,
    settles,
)

if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence

    from treadle._stores._events import LoggedEvent
    from treadle._stores._memory_ownership import MemoryRun


@dataclasses.dataclass
class _Kept:
    """What the memory store keeps for its outbox."""

    endpoints: dict[str, Endpoint] = dataclasses.field(default_factory=dict)
    messages: dict[int, OutboxMessage] = dataclasses.field(default_factory=dict)
    leases: dict[int, tuple[str, float]] = dataclasses.field(default_factory=dict)
    fed: dict[str, int] = dataclasses.field(default_factory=dict)  # run -> last seq fed
    next_id: int = 1
    links: dict[str, AnswerLink] = dataclasses.field(default_factory=dict)
    key: bytes = dataclasses.field(default_factory=lambda: bytes.fromhex(new_key()))


class MemoryOutbox:
    """:class:`~treadle._stores._outbox.Outbox` in memory, under the store's lock."""

    _lock: threading.RLock
    _runs: dict[str, MemoryRun]

    @property
    def _kept(self) -> _Kept:
        kept: _Kept | None = self.__dict__.get("_outbox_kept")
        if kept is None:
            kept = self.__dict__["_outbox_kept"] = _Kept()
        return kept

    def outbox(self) -> Outbox:
        """The store's webhooks and answer links: the store itself."""
        return self

    def _feed(self) -> None:
        kept = self._kept
        for run_id, run in self._runs.items():
            start = kept.fed.get(run_id, 0)
            for event in run.events[start:]:
                self._feed_event(kept, event)
            kept.fed[run_id] = len(run.events)

    @staticmethod
    def _feed_event(kept: _Kept, event: LoggedEvent) -> None:
        run_id, kind, data, at = event.run_id, event.kind, event.data, event.at
        for message_id, pending in list(kept.messages.items()):
            if (
                pending.run_id == run_id
                and pending.event_type == DEADLINE_NEAR
                and pending.state == "pending"
                and settles(kind, data, pending)
            ):
                del kept.messages[message_id]
        logged = [event.superstep, kind, event.executor_id, at, data]
        for endpoint in kept.endpoints.values():
            for event_type, due in messages_for(kind, data, at, endpoint):
                message = OutboxMessage(
                    kept.next_id,
                    endpoint.endpoint_id,
                    run_id,
                    event.seq,
                    event_type,
                    logged,
                    due,
                    "pending",
                    0,
                    None,
                )
                kept.messages[kept.next_id] = message
                kept.next_id += 1

    async def add_endpoint(self, endpoint: Endpoint) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.add_endpoint`."""
        with self._lock:
            self._feed()
            self._kept.endpoints[endpoint.endpoint_id] = endpoint

    async def endpoints(self) -> list[Endpoint]:
        """See :meth:`~treadle._stores._outbox.Outbox.endpoints`."""
        with self._lock:
            return sorted(self._kept.endpoints.values(), key=lambda e: e.created_at)

    async def remove_endpoint(self, endpoint_id: str) -> bool:
        """See :meth:`~treadle._stores._outbox.Outbox.remove_endpoint`."""
        with self._lock:
            self._feed()
            kept = self._kept
            for message_id, message in list(kept.messages.items()):
                if message.endpoint_id == endpoint_id:
                    del kept.messages[message_id]
            return kept.endpoints.pop(endpoint_id, None) is not None

    async def claim_messages(
        self, owner: str, now: float, lease: float, limit: int
    ) -> list[OutboxMessage]:
        """See :meth:`~treadle._stores._outbox.Outbox.claim_messages`."""
        with self._lock:
            self._feed()
            kept = self._kept
            blocked: set[tuple[str, str]] = set()
            claimed: list[OutboxMessage] = []
            for message in sorted(kept.messages.values(), key=lambda m: m.message_id):
                if message.state != "pending":
                    continue
                pair = (message.endpoint_id, message.run_id)
                held = kept.leases.get(message.message_id)
                free = held is None or held[1] <= now
                if pair not in blocked and message.due_at <= now and free and len(claimed) < limit:
                    claimed.append(message)
                    kept.leases[message.message_id] = (owner, now + lease)
                if message.event_type != DEADLINE_NEAR:
                    blocked.add(pair)
            return claimed

    def _held(self, message_id: int, owner: str) -> OutboxMessage | None:
        held = self._kept.leases.get(message_id)
        if held is None or held[0] != owner:
            return None
        return self._kept.messages.get(message_id)

    async def message_sent(self, message_id: int, owner: str) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.message_sent`."""
        with self._lock:
            if self._held(message_id, owner) is not None:
                del self._kept.messages[message_id]
                del self._kept.leases[message_id]

    async def message_failed(
        self, message_id: int, owner: str, error: str, retry_at: float | None
    ) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.message_failed`."""
        with self._lock:
            message = self._held(message_id, owner)
            if message is None:
                return
            state, due = ("dead", 0.0) if retry_at is None else ("pending", retry_at)
            self._kept.messages[message_id] = dataclasses.replace(
                message,
                state=state,
                due_at=due,
                attempts=message.attempts + 1,
                last_error=error[:500],
            )
            del self._kept.leases[message_id]

    async def messages(self, state: str = "dead", limit: int = 100) -> list[OutboxMessage]:
        """See :meth:`~treadle._stores._outbox.Outbox.messages`."""
        with self._lock:
            self._feed()
            found = [m for m in self._kept.messages.values() if m.state == state]
            return sorted(found, key=lambda m: m.message_id)[:limit]

    async def resend(self, message_ids: Sequence[int] | None, now: float) -> int:
        """See :meth:`~treadle._stores._outbox.Outbox.resend`."""
        with self._lock:
            kept = self._kept
            wanted = kept.messages.keys() if message_ids is None else message_ids
            count = 0
            for message_id in list(wanted):
                message = kept.messages.get(message_id)
                if message is not None and message.state == "dead":
                    kept.messages[message_id] = dataclasses.replace(
                        message, state="pending", due_at=now, attempts=0, last_error=None
                    )
                    count += 1
            return count

    async def link_key(self) -> bytes:
        """See :meth:`~treadle._stores._outbox.Outbox.link_key`."""
        with self._lock:
            return self._kept.key

    async def add_link(self, link: AnswerLink) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.add_link`."""
        with self._lock:
            self._kept.links.setdefault(link.nonce, link)

    async def link(self, nonce: str) -> AnswerLink | None:
        """See :meth:`~treadle._stores._outbox.Outbox.link`."""
        with self._lock:
            return self._kept.links.get(nonce)

    async def use_link(self, nonce: str, now: float, used_by: str) -> bool:
        """See :meth:`~treadle._stores._outbox.Outbox.use_link`."""
        with self._lock:
            link = self._kept.links.get(nonce)
            if link is None or link.used_at is not None:
                return False
            self._kept.links[nonce] = dataclasses.replace(link, used_at=now, used_by=used_by)
            return True

    def _forget_links(self, run_id: str) -> None:
        """Drop a deleted run's answer links (under the store's lock, with the run).

        Request ids are unique within a run only: a run made later under the
        deleted run's id asks the same ids, and its questions are not the links'.
        """
        links = self._kept.links
        for nonce in [nonce for nonce, link in links.items() if link.run_id == run_id]:
            del links[nonce]

    async def release_link(self, nonce: str) -> None:
        """See :meth:`~treadle._stores._outbox.Outbox.release_link`."""
        with self._lock:
            link = self._kept.links.get(nonce)
            if link is not None:
                self._kept.links[nonce] = dataclasses.replace(link, used_at=None, used_by=None)
