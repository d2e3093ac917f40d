"""The webhook sender: delivers the store's outbox, at least once, signed.

``treadle serve`` and ``treadle worker`` each run one, as a task of their
own TaskGroup (see :func:`sending`). A sender leases the due messages
(:meth:`~treadle._stores._outbox.Outbox.claim_messages`: at most one per
run and endpoint, so each run's messages reach each endpoint in commit
order), POSTs each, and then forgets it on a 2xx answer or schedules a
retry (exponential backoff from the endpoint's ``backoff``) until the
endpoint's ``attempts`` are spent, when it becomes a dead letter, listed
by ``treadle webhooks dead`` and sent again by ``treadle webhooks resend``.
A sender killed mid-delivery leaves its leases to run out, and another (or
its restart) sends those messages again, with the same ``webhook-id``.

An endpoint made for a person (``treadle webhooks add URL --for maria``)
gets, in each ``request.created``, an answer link for that person
(``data.answer_link``; :mod:`treadle._operations._links`).

Messages are signed per the Standard Webhooks specification: headers
``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``
(``v1,`` and the base64 HMAC-SHA256 of ``id.timestamp.body`` under the
endpoint's secret), so a receiver verifies them with any Standard
Webhooks library.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from treadle._exceptions import TreadleError
from treadle._operations._shapes import with_iso_times
from treadle._operations._webhook_post import TIMEOUT, Wire, post
from treadle._stores._answer_links import link_token
from treadle._stores._outbox import HasOutbox, offered_link
from treadle._tasks import stop_if_cancelled

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from treadle._engine._metrics import Metrics
    from treadle._stores._outbox import Endpoint, Outbox, OutboxMessage
    from treadle._stores._store import Store

_logger = logging.getLogger("treadle.webhooks")

LEASE = 30.0
"""Seconds a sender holds a message it is delivering (more than a delivery's timeout)."""

__all__ = ["LEASE", "TIMEOUT", "WebhookSender", "message_json", "outbox_of", "post", "sending"]


def outbox_of(store: Store) -> Outbox:
    """The store's outbox.

    Raises:
        TypeError: The store keeps none (a store of one's own making).
    """
    if isinstance(store, HasOutbox):
        return store.outbox()
    raise TypeError(f"{store!r} keeps no webhook outbox")


def message_json(message: OutboxMessage) -> dict[str, Any]:
    """An outbox message as the CLI's ``--json`` and the API give it (its time in ISO 8601)."""
    return with_iso_times(message.to_json(), ("due_at",))


class WebhookSender:
    """Delivers a store's outbox until cancelled."""

    def __init__(
        self,
        store: Store,
        *,
        poll_interval: float = 1.0,
        batch: int = 32,
        lease: float = LEASE,
        metrics: Metrics | None = None,
    ) -> None:
        """A sender for ``store``'s outbox, looking for due messages every ``poll_interval``.

        ``metrics``: where each send's outcome is counted (delivered, retried, dead).
        """
        self._metrics = metrics
        self._outbox = outbox_of(store)
        self._poll_interval = poll_interval
        self._batch = batch
        self._lease = lease
        self._owner = f"{socket.gethostname()}:{os.getpid()}:webhooks-{id(self):x}"
        # The sender's own threads: a delivery blocks one for up to TIMEOUT, and on the
        # loop's default executor a batch of receivers that never answer held every
        # thread that runs' sync steps and conditions wait for.
        self._busy = 0  # deliveries under way
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=batch, thread_name_prefix="treadle-webhooks"
        )

    async def serve(self) -> None:
        """Send due messages as they fall due, until cancelled.

        Deliveries run beside the loop that claims them, at most ``batch`` at
        once: a receiver that never answers holds up its own messages only,
        not a round of every endpoint's (each round waited for its slowest).
        """
        try:
            async with asyncio.TaskGroup() as group:
                while True:
                    stop_if_cancelled()  # lost below (see treadle._tasks): it would never end
                    room = self._batch - self._busy
                    try:
                        sent = await self._start_due(group, room)
                    except TreadleError as error:  # the store is away: try again next round
                        _logger.warning("webhooks: cannot read the outbox: %s", error)
                        sent = 0
                    if sent == 0 or sent < room:
                        await asyncio.sleep(self._poll_interval)
        finally:
            self._threads.shutdown(wait=False, cancel_futures=True)

    async def _start_due(self, group: asyncio.TaskGroup, room: int) -> int:
        """Claim up to ``room`` due messages and start delivering each in ``group``."""
        if room <= 0:
            return 0
        endpoints = {e.endpoint_id: e for e in await self._outbox.endpoints()}
        if not endpoints:
            return 0
        claimed = await self._outbox.claim_messages(self._owner, time.time(), self._lease, room)
        for message in claimed:
            endpoint = endpoints.get(message.endpoint_id)
            if endpoint is not None:
                self._busy += 1
                group.create_task(self._delivering(message, endpoint))
        return len(claimed)

    async def _delivering(self, message: OutboxMessage, endpoint: Endpoint) -> None:
        """Deliver one message; the store away meanwhile leaves it leased, to be sent again."""
        try:
            await self._deliver(message, endpoint)
        except TreadleError as error:
            _logger.warning("webhooks: message %s: %s", message.message_id, error)
        finally:
            self._busy -= 1

    async def _deliver(self, message: OutboxMessage, endpoint: Endpoint) -> None:
        extra = await self._answer_link(message, endpoint)
        problem = await self._post(message, endpoint, extra)
        if problem is None:
            await self._outbox.message_sent(message.message_id, self._owner)
            if self._metrics is not None:
                self._metrics.webhook_delivery("delivered")
            return
        attempts = message.attempts + 1
        retry_at = endpoint.retry_at(attempts, time.time())
        await self._outbox.message_failed(message.message_id, self._owner, problem, retry_at)
        if self._metrics is not None:
            self._metrics.webhook_delivery("retried" if retry_at is not None else "dead")
        if retry_at is None:
            _logger.warning(
                "webhooks: %s %s of run %s to %s is a dead letter after %d attempts: %s",
                message.event_type,
                message.webhook_id,
                message.run_id,
                endpoint.url,
                attempts,
                problem,
            )

    async def _post(
        self, message: OutboxMessage, endpoint: Endpoint, extra: dict[str, Any]
    ) -> str | None:
        """:func:`post` on the sender's threads, cut off TIMEOUT seconds after it starts.

        The socket's own timeout bounds each read, not the answer: a receiver
        trickling its headers would hold the delivery for ever. Past the
        deadline the delivery's sockets are shut, so its thread returns too.
        """
        wire = Wire()
        loop = asyncio.get_running_loop()
        sent = loop.run_in_executor(self._threads, post, message, endpoint, extra, wire)
        try:
            return await asyncio.wait_for(sent, TIMEOUT)
        except TimeoutError:
            return f"no answer within {TIMEOUT:g} s"
        finally:
            wire.cut()

    async def _answer_link(self, message: OutboxMessage, endpoint: Endpoint) -> dict[str, Any]:
        """``{"answer_link": URL}`` for a ``request.created`` to an endpoint offering links.

        The link is kept before the message is sent (the same link on every
        retry: :func:`~treadle._stores._outbox.offered_link`).
        """
        link = offered_link(message, endpoint)
        if link is None or endpoint.links is None:
            return {}
        await self._outbox.add_link(link)
        token = link_token(link, await self._outbox.link_key())
        return {"answer_link": f"{endpoint.links.base_url.rstrip('/')}/answer/{token}"}


@contextlib.asynccontextmanager
async def sending(
    store: Store, group: asyncio.TaskGroup, poll_interval: float, metrics: Metrics | None = None
) -> AsyncIterator[None]:
    """Run a sender for ``store`` in ``group`` while the block runs; stop it on the way out."""
    sender = WebhookSender(store, poll_interval=poll_interval, metrics=metrics)
    task = group.create_task(sender.serve(), name="treadle-webhooks")
    try:
        yield
    finally:
        task.cancel()
