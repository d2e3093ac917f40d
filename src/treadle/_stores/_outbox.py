"""Reaching people: outbound webhooks from a durable outbox, and signed answer links.

A webhook that is sent after its commit, by the process that committed, is
lost when that process dies between the two. So the message is written in
the store, in the transaction of the event that causes it, and a sender
(``treadle serve``, ``treadle worker``) delivers it afterwards, at least
once: a row stays until its endpoint answered 2xx. Every writer of a run's
event log feeds the outbox without knowing about webhooks: the SQL stores
keep a trigger on the event log while an endpoint exists (none: no trigger,
so a commit costs what it cost before); the memory store appends in the
same step as the events.

Which events cause which messages (:data:`EVENT_TYPES`):

* ``request`` → ``request.created``, and ``request.deadline_near`` (due
  ``deadline_lead`` seconds before the request's deadline) when it has one;
* ``request_answered`` → ``request.answered`` (and drops the request's
  pending ``request.deadline_near``, as ``request_timed_out`` and the end of
  the run do);
* ``status_changed`` to ``completed`` / ``failed`` → ``run.completed`` /
  ``run.failed``.

Messages of one run to one endpoint go in commit order: a message waits
while an earlier one of its run and endpoint is pending (a
``request.deadline_near`` goes at its time and holds nothing up). Each
carries a ``webhook-id`` made from its run, its event's ``seq`` and its
type, the same on every retry, so a receiver drops duplicates by it.

Answer links (their values and tokens: :mod:`treadle._stores._answer_links`)
are kept here too: the store keeps each link's nonce and marks it used by
its one use, and an endpoint made for a person gets, in each
``request.created``, a link for that person (:func:`offered_link`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from treadle._stores._answer_links import AnswerLink, b64

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._answer_links import LinkOffer

EVENT_TYPES = (
    "request.created",
    "request.deadline_near",
    "request.answered",
    "run.failed",
    "run.completed",
)
"""Every message type an endpoint may ask for."""

DEADLINE_NEAR = "request.deadline_near"

# The events that make a request's pending deadline_near moot, and the statuses that end a run.
SETTLING = ("request_answered", "request_timed_out")
ENDED = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where webhooks go, and how.

    Attributes:
        endpoint_id: Its name (``wh_...``), given when it was added.
        url: Where messages are POSTed.
        events: The message types it gets.
        secret: The Standard Webhooks signing secret (``whsec_`` and base64).
        attempts: Deliveries tried before a message is a dead letter.
        backoff: Seconds before the first retry; each next waits twice as long
            (at most an hour).
        deadline_lead: Seconds before a request's deadline its
            ``request.deadline_near`` is sent.
        created_at: When it was added.
        links: The answer link its ``request.created`` messages carry (``None``: none).
    """

    endpoint_id: str
    url: str
    events: tuple[str, ...]
    secret: str
    attempts: int
    backoff: float
    deadline_lead: float
    created_at: float
    links: LinkOffer | None = None

    def retry_at(self, attempts: int, now: float) -> float | None:
        """When to try again after ``attempts`` failed deliveries; ``None``: a dead letter."""
        if attempts >= self.attempts:
            return None
        return now + min(self.backoff * 2.0 ** (attempts - 1), 3600.0)

    def to_json(self, *, with_secret: bool = False) -> dict[str, Any]:
        """The endpoint as plain data (its secret only when asked)."""
        shown: dict[str, Any] = {
            "endpoint_id": self.endpoint_id,
            "url": self.url,
            "events": list(self.events),
            "attempts": self.attempts,
            "backoff": self.backoff,
            "deadline_lead": self.deadline_lead,
            "created_at": self.created_at,
            "answer_links": None if self.links is None else self.links.to_json(),
        }
        if with_secret:
            shown["secret"] = self.secret
        return shown


def new_endpoint(
    url: str,
    events: Sequence[str] = EVENT_TYPES,
    *,
    now: float,
    attempts: int = 12,
    backoff: float = 2.0,
    deadline_lead: float = 600.0,
    links: LinkOffer | None = None,
) -> Endpoint:
    """A new endpoint with a fresh id and signing secret.

    Raises:
        ValueError: A type is not one of :data:`EVENT_TYPES`, the URL is not
            http(s), or a number is out of range.
    """
    unknown = [e for e in events if e not in EVENT_TYPES]
    if unknown or not events:
        raise ValueError(
            f"unknown webhook event {', '.join(unknown) or '(none)'}: "
            f"choose among {', '.join(EVENT_TYPES)}"
        )
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"a webhook URL must start with http:// or https://, not {url!r}")
    if attempts < 1 or backoff <= 0 or deadline_lead < 0:
        raise ValueError("attempts must be 1 or more, backoff above 0, deadline lead 0 or more")
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    return Endpoint(
        "wh_" + secrets.token_hex(6),
        url,
        tuple(dict.fromkeys(events)),
        secret,
        attempts,
        backoff,
        deadline_lead,
        now,
        links,
    )


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """One message of the outbox, to one endpoint.

    Attributes:
        message_id: Its row (outbox order).
        endpoint_id: The endpoint it goes to.
        run_id: The run whose event caused it.
        seq: That event's place in the run's log.
        event_type: One of :data:`EVENT_TYPES`.
        event: The logged event: ``[superstep, kind, executor_id, at, data]``.
        due_at: When it is (next) to be sent.
        state: ``pending`` or ``dead``.
        attempts: Deliveries that failed so far.
        last_error: Why the last one failed.
    """

    message_id: int
    endpoint_id: str
    run_id: str
    seq: int
    event_type: str
    event: list[Any]
    due_at: float
    state: str
    attempts: int
    last_error: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> OutboxMessage:
        """A message from its columns, in :data:`MESSAGE_COLUMNS` order."""
        message_id, endpoint_id, run_id, seq, event_type, event, due_at, state, attempts, error = (
            row
        )
        return cls(
            int(message_id),
            endpoint_id,
            run_id,
            int(seq),
            event_type,
            json.loads(event),
            float(due_at),
            state,
            int(attempts),
            error,
        )

    @property
    def webhook_id(self) -> str:
        """The message's id for deduplication: the same on every retry and re-send."""
        digest = hashlib.sha256(f"{self.run_id}\0{self.seq}\0{self.event_type}".encode())
        return "msg_" + digest.hexdigest()[:32]

    def payload(self) -> dict[str, Any]:
        """The body: ``type``, ``timestamp`` (of the event) and ``data``."""
        superstep, kind, executor_id, at, data = self.event
        return {
            "type": self.event_type,
            "timestamp": at,
            "data": {
                "run_id": self.run_id,
                "seq": self.seq,
                "superstep": superstep,
                "event": kind,
                "executor_id": executor_id,
                **data,
            },
        }

    def to_json(self) -> dict[str, Any]:
        """The message as plain data, for listings."""
        return {
            "message_id": self.message_id,
            "webhook_id": self.webhook_id,
            "endpoint_id": self.endpoint_id,
            "run_id": self.run_id,
            "seq": self.seq,
            "type": self.event_type,
            "state": self.state,
            "attempts": self.attempts,
            "due_at": self.due_at,
            "last_error": self.last_error,
        }


MESSAGE_COLUMNS = (
    "{order}, endpoint_id, run_id, event_seq, event_type, event, due_at, state, attempts, "
    "last_error"
)


def messages_for(
    kind: str, data: dict[str, Any], at: float, endpoint: Endpoint
) -> list[tuple[str, float]]:
    """The messages (type, due time) one logged event causes for ``endpoint``.

    The memory store's feed; the SQL stores' trigger says the same in SQL.
    """
    found: list[tuple[str, float]] = []
    if kind == "request":
        found.append(("request.created", at))
        deadline = data.get("deadline_at")
        if isinstance(deadline, int | float):
            found.append((DEADLINE_NEAR, max(at, deadline - endpoint.deadline_lead)))
    elif kind == "request_answered":
        found.append(("request.answered", at))
    elif kind == "status_changed" and data.get("status") in ("completed", "failed"):
        found.append((f"run.{data['status']}", at))
    return [(t, due) for t, due in found if t in endpoint.events]


def offered_link(message: OutboxMessage, endpoint: Endpoint) -> AnswerLink | None:
    """The answer link ``message`` carries to ``endpoint``, if it offers one.

    Made from the message alone (its nonce from its ``webhook-id``, its
    expiry from the request's asking), so every retry carries the same link.
    """
    offer = endpoint.links
    if offer is None or message.event_type != "request.created":
        return None
    request_id = message.event[4].get("request_id")
    if not isinstance(request_id, str):
        return None
    digest = hashlib.sha256(f"{message.webhook_id}\0{endpoint.endpoint_id}".encode()).digest()
    at = float(message.event[3])
    return AnswerLink(
        "w" + b64(digest[:18]),
        message.run_id,
        request_id,
        offer.principal,
        at + offer.lifetime,
        at,
        f"webhook:{endpoint.endpoint_id}",
        groups=offer.groups,
    )


def settles(kind: str, data: dict[str, Any], pending: OutboxMessage) -> bool:
    """Whether the event makes the pending ``request.deadline_near`` ``pending`` moot."""
    if kind in SETTLING:
        return bool(data.get("request_id") == pending.event[4].get("request_id"))
    return kind == "status_changed" and data.get("status") in ENDED


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of a message (Standard Webhooks, ``v1``)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


class Endpoints(Protocol):
    """The webhook endpoints a store keeps (a role of :class:`Outbox`)."""

    async def add_endpoint(self, endpoint: Endpoint) -> None:
        """Keep an endpoint: events committed from now on reach it."""
        ...

    async def endpoints(self) -> list[Endpoint]:
        """Every endpoint, oldest first."""
        ...

    async def remove_endpoint(self, endpoint_id: str) -> bool:
        """Forget an endpoint and its messages; ``False``: no such endpoint."""
        ...


class OutboxMessages(Protocol):
    """Webhook messages waiting to be sent, as a sender takes them (a role of :class:`Outbox`)."""

    async def claim_messages(
        self, owner: str, now: float, lease: float, limit: int
    ) -> list[OutboxMessage]:
        """Lease up to ``limit`` due messages, at most one per run and endpoint.

        A message is due at its ``due_at`` unless an earlier message of its
        run and endpoint is pending (other than a ``request.deadline_near``)
        or another sender's lease on it is current.
        """
        ...

    async def message_sent(self, message_id: int, owner: str) -> None:
        """The endpoint took the message: it leaves the outbox."""
        ...

    async def message_failed(
        self, message_id: int, owner: str, error: str, retry_at: float | None
    ) -> None:
        """A delivery failed: try again at ``retry_at``, or (``None``) keep it as a dead letter."""
        ...

    async def messages(self, state: str = "dead", limit: int = 100) -> list[OutboxMessage]:
        """Messages in ``state`` (``dead`` or ``pending``), oldest first."""
        ...

    async def resend(self, message_ids: Sequence[int] | None, now: float) -> int:
        """Make dead letters pending again, due now (``None``: all); how many were."""
        ...


class LinkKeeper(Protocol):
    """The answer links a store keeps, each used once (a role of :class:`Outbox`)."""

    async def link_key(self) -> bytes:
        """The answer links' signing key (made on first use, kept in the store)."""
        ...

    async def add_link(self, link: AnswerLink) -> None:
        """Keep a new answer link (one kept already under its nonce stays as it is)."""
        ...

    async def link(self, nonce: str) -> AnswerLink | None:
        """The link of a nonce, as kept."""
        ...

    async def use_link(self, nonce: str, now: float, used_by: str) -> bool:
        """Mark the link used, once: ``False`` when it was already."""
        ...

    async def release_link(self, nonce: str) -> None:
        """Undo a use whose answer was refused for its content (the link may be used again)."""
        ...


@runtime_checkable
class Outbox(Endpoints, OutboxMessages, LinkKeeper, Protocol):
    """What a store keeps for webhooks and answer links (``store.outbox()``): its three roles.

    Every store implements it; the sender, the CLI and the server use it.
    """


@runtime_checkable
class HasOutbox(Protocol):
    """A store that keeps an outbox (all of treadle's do)."""

    def outbox(self) -> Outbox:
        """The store's webhooks and answer links."""
        ...
